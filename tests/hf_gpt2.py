#!/usr/bin/env python3
"""GPT-2 model folders as Hugging Face's libraries write and read them, and
an independent forward pass: the second implementation the Hugging Face
tests of pipetrain compare against. Needs numpy, safetensors and
transformers (without torch), from scripts/install-test-python.sh.

usage:
  hf_gpt2.py write DIR VARIANT [--sharded] [--dtype f32|f16|bf16] [--gpt2model]
      a GPT-2 of VARIANT (see VARIANTS) with seeded random weights:
      config.json by transformers' GPT2Config.save_pretrained, weights by
      safetensors.numpy.save_file with metadata {"format": "pt"} under
      GPT2LMHeadModel's names (tied lm_head.weight left out); --sharded
      splits them over two files and transformers' index; --gpt2model
      uses GPT2Model's names (no "transformer." prefix); --dtype f16 or
      bf16 stores the weights in half precision.
  hf_gpt2.py loss DIR|FILE TOKENS B T K
      the mean loss over K fixed batches of B x T tokens of the llm.c token
      file TOKENS (row b of batch k starts at token (k B + b) T), in float64
      from DIR's config.json and weights.
  hf_gpt2.py reference CONFIG.json MODEL.safetensors
      prints "loss X" for the batch CONFIG.json holds ("tokens" and
      "targets", lists of rows; a negative target is not counted) beside
      GPT2Config's fields, with MODEL's weights. With "pipetrain_precision":
      "bf16" in CONFIG.json, the forward rounds to bf16 where pipetrain's
      bf16 stores (see forward_loss).
  hf_gpt2.py check-saved DIR
      a folder pipetrain wrote: GPT2Config.from_pretrained loads it with the
      sizes of its weights, and every weights file opens in safe_open with
      metadata format "pt" and holds weights only (no optimizer tensors).
  hf_gpt2.py same-weights DIR FILE
      FILE (a pipetrain export) holds DIR's weights exactly: the same names
      (with the prefix), values widened to float32, an untied lm_head.
  hf_gpt2.py tokens OUT N VOCAB
      an llm.c token file (version 1) of N seeded random tokens.
"""
import json
import math
import os
import struct
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

BASE = dict(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=4)
VARIANTS = {
    "default": {},
    "n_inner": {"n_inner": 48},
    "gelu": {"activation_function": "gelu"},
    "gelu_pytorch_tanh": {"activation_function": "gelu_pytorch_tanh"},
    "relu": {"activation_function": "relu"},
    "silu": {"activation_function": "silu"},
    "epsilon": {"layer_norm_epsilon": 1e-3},
    "unscaled": {"scale_attn_weights": False},
    "inverse_layer_idx": {"scale_attn_by_inverse_layer_idx": True},
    "untied": {"tie_word_embeddings": False},
    "positions": {"n_positions": 40},
}


def gpt2_config(**kw):
    from transformers import GPT2Config  # imported late: it is slow

    return GPT2Config(**kw)


def weight_shapes(cfg):
    c, v, inner = cfg["n_embd"], cfg["vocab_size"], cfg.get("n_inner") or 4 * cfg["n_embd"]
    yield "transformer.wte.weight", (v, c)
    yield "transformer.wpe.weight", (cfg["n_positions"], c)
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        yield p + "ln_1.weight", (c,)
        yield p + "ln_1.bias", (c,)
        yield p + "attn.c_attn.weight", (c, 3 * c)
        yield p + "attn.c_attn.bias", (3 * c,)
        yield p + "attn.c_proj.weight", (c, c)
        yield p + "attn.c_proj.bias", (c,)
        yield p + "ln_2.weight", (c,)
        yield p + "ln_2.bias", (c,)
        yield p + "mlp.c_fc.weight", (c, inner)
        yield p + "mlp.c_fc.bias", (inner,)
        yield p + "mlp.c_proj.weight", (inner, c)
        yield p + "mlp.c_proj.bias", (c,)
    yield "transformer.ln_f.weight", (c,)
    yield "transformer.ln_f.bias", (c,)
    if not cfg.get("tie_word_embeddings", True):
        yield "lm_head.weight", (v, c)


def random_weights(cfg, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in weight_shapes(cfg):
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            x = 1.0 + 0.2 * rng.standard_normal(shape)
        elif len(shape) == 1:
            x = 0.1 * rng.standard_normal(shape)
        else:
            x = 0.3 * rng.standard_normal(shape)
        out[name] = x.astype(np.float32)
    return out


def bf16_file(path, tensors):
    """safetensors.numpy cannot hold bfloat16 (numpy has none): the format
    by hand, bf16 rounded to nearest even."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, x in tensors.items():
        u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        b = u.tobytes()
        header[name] = {"dtype": "BF16", "shape": list(x.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write(folder, variant, sharded=False, dtype="f32", gpt2model=False):
    kw = dict(BASE, **VARIANTS[variant])
    cfg = gpt2_config(**kw)
    cfg.architectures = ["GPT2Model" if gpt2model else "GPT2LMHeadModel"]
    cfg.save_pretrained(folder)
    w = random_weights(kw, seed=sum(map(ord, variant)))
    if gpt2model:
        w = {k.removeprefix("transformer."): v for k, v in w.items()}
    if dtype == "f16":
        w = {k: v.astype(np.float16) for k, v in w.items()}
    names = list(w)
    files = [names] if not sharded else [names[: len(names) // 2], names[len(names) // 2 :]]
    index = {"metadata": {"total_size": sum(v.nbytes for v in w.values())}, "weight_map": {}}
    for k, part in enumerate(files):
        fname = "model.safetensors" if not sharded else f"model-{k + 1:05d}-of-{len(files):05d}.safetensors"
        sub = {n: w[n] for n in part}
        if dtype == "bf16":
            bf16_file(os.path.join(folder, fname), sub)
        else:
            save_file(sub, os.path.join(folder, fname), metadata={"format": "pt"})
        index["weight_map"].update({n: fname for n in part})
    if sharded:
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)


def read_weights(folder):
    if os.path.isfile(folder):  # one file, its config.json beside it
        folder, files = os.path.split(folder)
        files = [files]
    else:
        files = [f for f in os.listdir(folder) if f.startswith("model") and f.endswith(".safetensors")]
    out = {}
    for fname in files:
        path = os.path.join(folder, fname)
        try:
            with safe_open(path, "np") as f:
                for k in f.keys():
                    out[k] = f.get_tensor(k).astype(np.float64)
        except TypeError:  # bfloat16: numpy has none; widen the raw halves
            with open(path, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                header, data = json.loads(f.read(n)), f.read()
            for k, t in header.items():
                if k == "__metadata__":
                    continue
                b, e = t["data_offsets"]
                u = np.frombuffer(data[b:e], dtype=np.uint16).astype(np.uint32) << 16
                out[k] = u.view(np.float32).reshape(t["shape"]).astype(np.float64)
    return {k if k.startswith(("transformer.", "lm_head")) else "transformer." + k: v for k, v in out.items()}


def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


ERF = np.frompyfunc(math.erf, 1, 1)


def activation(name, x):
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if name in ("gelu", "gelu_python"):
        return 0.5 * x * (1 + ERF(x / math.sqrt(2)).astype(np.float64))
    if name == "relu":
        return np.maximum(x, 0)
    if name in ("silu", "swish"):
        return x / (1 + np.exp(-x))
    raise SystemExit(f"unknown activation {name}")


def bf16(x):
    """x rounded to bfloat16 (through float32, to nearest even), as float64."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def forward_loss(cfg, w, tokens, targets, low=False):
    """GPT-2's forward as transformers' modeling_gpt2 computes it. With low,
    as pipetrain's --precision bf16 does: r() rounds to bf16 every tensor
    pipetrain stores as bf16 (each block's output, what a block keeps: the
    LayerNorms' outputs, q k v, the attention probabilities and output, the
    residual after attention, the MLP's hidden and activated values), and
    every product reads bf16 operands (the weight matrices rounded); the
    projections round once with their bias, then again after a residual add;
    LayerNorm, softmax, the logits and the loss stay unrounded."""
    r = bf16 if low else (lambda t: t)
    B, T = tokens.shape
    C, H = cfg["n_embd"], cfg["n_head"]
    hs, eps = C // H, cfg.get("layer_norm_epsilon", 1e-5)
    x = r(w["transformer.wte.weight"][tokens] + w["transformer.wpe.weight"][:T])
    mask = np.tril(np.ones((T, T), dtype=bool))
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        h = r(layernorm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps))
        qkv = r(h @ r(w[p + "attn.c_attn.weight"]) + w[p + "attn.c_attn.bias"])
        q, k, v = (qkv[..., j * C : (j + 1) * C].reshape(B, T, H, hs).transpose(0, 2, 1, 3) for j in range(3))
        att = q @ k.transpose(0, 1, 3, 2)
        if cfg.get("scale_attn_weights", True):
            att = att / math.sqrt(hs)
        if cfg.get("scale_attn_by_inverse_layer_idx", False):
            att = att / float(i + 1)
        att = np.where(mask, att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        att = r(att / att.sum(-1, keepdims=True))
        y = r(att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = r(x + r(y @ r(w[p + "attn.c_proj.weight"]) + w[p + "attn.c_proj.bias"]))
        h = r(layernorm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps))
        hid = r(h @ r(w[p + "mlp.c_fc.weight"]) + w[p + "mlp.c_fc.bias"])
        m = r(activation(cfg.get("activation_function", "gelu_new"), hid))
        x = r(x + r(m @ r(w[p + "mlp.c_proj.weight"]) + w[p + "mlp.c_proj.bias"]))
    x = r(layernorm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps))
    head = w["transformer.wte.weight"] if cfg.get("tie_word_embeddings", True) else w["lm_head.weight"]
    logits = x @ r(head).T
    logits = logits - logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    counted = targets >= 0  # a negative target is not counted
    picked = np.take_along_axis(logp, np.where(counted, targets, 0)[..., None], -1)[..., 0]
    return -picked[counted].mean()


def read_tokens(path):
    with open(path, "rb") as f:
        head = np.frombuffer(f.read(1024), dtype="<i4")
        assert head[0] == 20240520 and head[1] == 1, "not an llm.c token file"
        return np.frombuffer(f.read(), dtype="<u2").astype(np.int64)[: head[2]]


def loss(folder, tokens_path, B, T, K):
    where = os.path.dirname(folder) if os.path.isfile(folder) else folder
    with open(os.path.join(where, "config.json")) as f:
        cfg = json.load(f)
    w, toks = read_weights(folder), read_tokens(tokens_path)
    total = 0.0
    for k in range(K):
        rows = [toks[(k * B + b) * T : (k * B + b) * T + T + 1] for b in range(B)]
        batch = np.stack(rows)
        total += forward_loss(cfg, w, batch[:, :-1], batch[:, 1:])
    print(f"{total / K:.12g}")


def reference(config_path, model_path):
    """The loss of the batch a JSON file holds ("tokens", "targets") beside
    GPT2Config's fields, for weights in one safetensors file."""
    with open(config_path) as f:
        cfg = json.load(f)
    w = read_weights(model_path)
    tokens, targets = np.array(cfg["tokens"], dtype=np.int64), np.array(cfg["targets"], dtype=np.int64)
    low = cfg.get("pipetrain_precision", "fp32") == "bf16"
    print(f"loss {forward_loss(cfg, w, tokens, targets, low):.17g}")


def check_saved(folder):
    from transformers import GPT2Config

    cfg = GPT2Config.from_pretrained(folder)
    files = sorted(f for f in os.listdir(folder) if f.startswith("model") and f.endswith(".safetensors"))
    assert files, f"no model*.safetensors in {folder}"
    names = set()
    for fname in files:
        with safe_open(os.path.join(folder, fname), "np") as f:
            meta = f.metadata() or {}
            assert meta.get("format") == "pt", f"{fname}: metadata format {meta.get('format')!r}"
            names |= set(f.keys())
    expected = {n for n, _ in weight_shapes(cfg.to_dict())}
    assert names == expected, f"weights {sorted(names ^ expected)} differ from a GPT-2 of this config"
    w = read_weights(folder)
    assert w["transformer.wte.weight"].shape == (cfg.vocab_size, cfg.n_embd)
    assert w["transformer.wpe.weight"].shape == (cfg.n_positions, cfg.n_embd)
    assert w["transformer.h.0.mlp.c_fc.weight"].shape[1] == (cfg.n_inner or 4 * cfg.n_embd)
    print(f"ok: {folder}: GPT2Config {cfg.n_layer} layers, {cfg.n_head} heads, {cfg.n_embd} channels, "
          f"{cfg.activation_function}; {len(names)} weights in {len(files)} file(s), format pt")


def same_weights(folder, path):
    ours, theirs = {}, read_weights(folder)
    with safe_open(path, "np") as f:
        for k in f.keys():
            ours[k] = f.get_tensor(k)
    assert set(ours) == set(theirs), f"names differ: {sorted(set(ours) ^ set(theirs))}"
    for k, v in theirs.items():
        assert ours[k].dtype == np.float32 and np.array_equal(ours[k].astype(np.float64), v), f"{k} differs"
    print(f"ok: {path} holds the {len(ours)} weights of {folder}")


def tokens(out, n, vocab):
    rng = np.random.default_rng(7)
    head = np.zeros(256, dtype="<i4")
    head[:3] = (20240520, 1, n)
    with open(out, "wb") as f:
        f.write(head.tobytes() + rng.integers(0, vocab, n).astype("<u2").tobytes())


def main(argv):
    cmd = argv[1]
    if cmd == "write":
        opts = argv[4:]
        dtype = opts[opts.index("--dtype") + 1] if "--dtype" in opts else "f32"
        write(argv[2], argv[3], "--sharded" in opts, dtype, "--gpt2model" in opts)
    elif cmd == "loss":
        loss(argv[2], argv[3], int(argv[4]), int(argv[5]), int(argv[6]))
    elif cmd == "reference":
        reference(argv[2], argv[3])
    elif cmd == "check-saved":
        check_saved(argv[2])
    elif cmd == "same-weights":
        same_weights(argv[2], argv[3])
    elif cmd == "tokens":
        tokens(argv[2], int(argv[3]), int(argv[4]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
