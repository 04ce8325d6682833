"""gpt2_reference.py: GPT-2's forward and mean loss in float64 with numpy, a
second implementation that tests/test_gpt_variants.c holds pipetrain's
against.

    python3 gpt2_reference.py CONFIG.json MODEL.safetensors

CONFIG.json holds GPT2Config's fields under Hugging Face's names (n_layer,
n_head, n_embd, n_positions, n_inner (null: 4 n_embd), activation_function,
layer_norm_epsilon, scale_attn_weights, scale_attn_by_inverse_layer_idx,
tie_word_embeddings, vocab_size) and the batch: "tokens" and "targets", lists
of rows (a negative target is not counted). MODEL.safetensors holds the
weights under GPT2LMHeadModel's names, Conv1D weights stored (in, out); with
tied embeddings lm_head.weight may be left out (transformer.wte.weight is
the head). Prints "loss <value>": the mean of -log p(target).

Written from the semantics of transformers' modeling_gpt2.py (GPT2Block,
GPT2Attention, GPT2MLP, ACT2FN), not from pipetrain's code.
"""
import json
import math
import sys

import numpy as np
from safetensors.numpy import load_file

_erf = np.vectorize(math.erf)

ACTIVATIONS = {
    "gelu_new": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "relu": lambda x: np.maximum(x, 0.0),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "swish": lambda x: x / (1.0 + np.exp(-x)),
}


def layer_norm(x, w, b, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def expect_shape(w, name, shape):
    if name not in w:
        sys.exit(f"gpt2_reference: {name} is missing")
    if tuple(w[name].shape) != tuple(shape):
        sys.exit(f"gpt2_reference: {name} has shape {w[name].shape}, expected {shape}")
    return w[name]


def attention(x, w, prefix, cfg, layer_idx):
    """GPT2Attention: causal self-attention over (B, T, C)."""
    B, T, C = x.shape
    H = cfg["n_head"]
    hs = C // H
    qkv = x @ expect_shape(w, prefix + "c_attn.weight", (C, 3 * C)) + w[prefix + "c_attn.bias"]
    q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, H, hs).transpose(0, 2, 1, 3) for i in range(3))
    scores = q @ k.transpose(0, 1, 3, 2)
    if cfg.get("scale_attn_weights", True):
        scores = scores / math.sqrt(hs)
    if cfg.get("scale_attn_by_inverse_layer_idx", False):
        scores = scores / float(layer_idx + 1)
    causal = np.tril(np.ones((T, T), dtype=bool))
    scores = np.where(causal, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs = probs / probs.sum(axis=-1, keepdims=True)
    y = (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
    return y @ expect_shape(w, prefix + "c_proj.weight", (C, C)) + w[prefix + "c_proj.bias"]


def mlp(x, w, prefix, cfg):
    """GPT2MLP: c_fc to n_inner, the activation, c_proj back to C."""
    C = x.shape[-1]
    inner = cfg.get("n_inner") or 4 * C
    act = ACTIVATIONS[cfg.get("activation_function", "gelu_new")]
    h = act(x @ expect_shape(w, prefix + "c_fc.weight", (C, inner)) + w[prefix + "c_fc.bias"])
    return h @ expect_shape(w, prefix + "c_proj.weight", (inner, C)) + w[prefix + "c_proj.bias"]


def loss(cfg, w, tokens, targets):
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    C, V = cfg["n_embd"], cfg["vocab_size"]
    B, T = tokens.shape
    wte = expect_shape(w, "transformer.wte.weight", (V, C))
    wpe = expect_shape(w, "transformer.wpe.weight", (cfg.get("n_positions") or T, C))
    x = wte[tokens] + wpe[np.arange(T)]
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        x = x + attention(layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps), w, p + "attn.", cfg, l)
        x = x + mlp(layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps), w, p + "mlp.", cfg)
    x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    if cfg.get("tie_word_embeddings", True):
        head = wte
        if "lm_head.weight" in w and not np.array_equal(w["lm_head.weight"], wte):
            sys.exit("gpt2_reference: tied embeddings, but lm_head.weight differs from wte")
    else:
        head = expect_shape(w, "lm_head.weight", (V, C))
    logits = x @ head.T
    top = logits.max(axis=-1, keepdims=True)
    logp = logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))
    counted = targets >= 0
    picked = np.take_along_axis(logp, np.where(counted, targets, 0)[..., None], axis=-1)[..., 0]
    return -(picked * counted).sum() / counted.sum()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gpt2_reference.py CONFIG.json MODEL.safetensors")
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    w = {k: v.astype(np.float64) for k, v in load_file(sys.argv[2]).items()}
    tokens = np.array(cfg["tokens"], dtype=np.int64)
    targets = np.array(cfg["targets"], dtype=np.int64)
    print(f"loss {loss(cfg, w, tokens, targets):.17g}")


if __name__ == "__main__":
    main()
