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
  hf_gpt2.py step CONFIG.json MODEL.safetensors OUT.safetensors [TAKEN.safetensors]
      one training step as pipetrain's synchronous pipeline takes it (see
      train_step): CONFIG.json holds GPT2Config's fields, the batch
      ("tokens", "targets": rows of "microbatches" micro-batches, one
      after another), the optimizer ("lr", "beta1", "beta2", "eps",
      "weight_decay", "grad_clip") and "pipetrain_precision"; MODEL holds
      the weights before the step. OUT (float64) receives every weight after
      the step under its name, its moments as exp_avg.<name> and
      exp_avg_sq.<name>, its gradient (before clipping) as grad.<name>, and
      "grad_norm" and "loss" (one element each). "pipetrain_skip_rounding":
      the name of one place where bf16 rounds (see backward) leaves that
      rounding out: what a test shows its comparison can see. TAKEN:
      pipetrain's gradients of the step ("grad.<name>"): the bf16
      roundings that float32 may take either way are resolved as its step
      resolved them (step_as_taken); prints each, then "loss X grad_norm Y
      flips N".
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


U = 2.0**-24  # float32's unit roundoff: pipetrain computes in float


def single(*args):
    """args as float32 (arrays; other values as they are)"""
    return [a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in args]


def in_float(f, *args):
    """f(*args) in float64, and how far the same in float32 lands from it:
    the scale of the error pipetrain's float arithmetic makes there"""
    exact, approx = f(*args), f(*single(*args))
    return exact, np.abs(np.asarray(approx, dtype=np.float64) - exact)


def product_in_float(a, b, bias=0.0):
    """a @ b + bias, and the scale of float's error in it: what float32 makes
    of it here, and at least what a sum of K products makes in a typical
    order, sqrt(K) units of roundoff of the sum of their sizes (another
    order, AMX's or VDPBF16PS's, may land elsewhere than numpy's)"""
    exact, err = in_float(lambda x, y, z: x @ y + z, a, b, bias)
    typical = math.sqrt(a.shape[-1]) * U * (np.abs(a) @ np.abs(b)) / Rounding.SPREAD
    return exact, np.maximum(err, typical)


def layernorm_parts(x, w, b, eps):
    """LayerNorm's output, the normalised input and 1 / std (its backward's
    inputs)."""
    mu = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    return xhat * w + b, xhat, rstd


def layernorm(x, w, b, eps):
    return layernorm_parts(x, w, b, eps)[0]


def layernorm_backward(dy, xhat, rstd, w):
    """the gradient of LayerNorm's input"""
    d = dy * w
    return rstd * (d - d.mean(-1, keepdims=True) - xhat * (d * xhat).mean(-1, keepdims=True))


def layernorm_backward_from(dy, x, w, eps):
    """layernorm_backward with the statistics of x, computed in x's type"""
    _, xhat, rstd = layernorm_parts(x, w, 0.0, eps)
    return layernorm_backward(dy, xhat, rstd, w)


ERF = np.frompyfunc(math.erf, 1, 1)

# The absolute errors of pipetrain's float tanh, erf and exp (relative)
# (kernels_math.h), beyond float32's rounding.
TANH_ERR, ERF_ERR, EXP_ERR = 1e-7, 1.5e-7, 2e-7


def activation(name, x):
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if name in ("gelu", "gelu_python"):
        return 0.5 * x * (1 + ERF(x / math.sqrt(2)).astype(x.dtype))
    if name == "relu":
        return np.maximum(x, 0)
    if name in ("silu", "swish"):
        return x / (1 + np.exp(-x))
    raise SystemExit(f"unknown activation {name}")


def activation_backward(name, x, d):
    """d times the activation's derivative at x"""
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        s = math.sqrt(2 / math.pi)
        t = np.tanh(s * (x + 0.044715 * x**3))
        return d * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * s * (1 + 3 * 0.044715 * x * x))
    if name in ("gelu", "gelu_python"):
        cdf = 0.5 * (1 + ERF(x / math.sqrt(2)).astype(x.dtype))
        return d * (cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))
    if name == "relu":
        return d * (x > 0)
    if name in ("silu", "swish"):
        sg = 1 / (1 + np.exp(-x))
        return d * sg * (1 + x * (1 - sg))
    raise SystemExit(f"unknown activation {name}")


def activation_error(name, x, d=None):
    """what pipetrain's float tanh, erf and exp add to the error of the
    activation at x (d None) or of its backward"""
    scale = np.abs(x) if d is None else np.abs(d) * (1 + np.abs(x) + 0.2 * np.abs(x) ** 3)
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return TANH_ERR * scale
    if name in ("gelu", "gelu_python"):
        return ERF_ERR * scale
    if name in ("silu", "swish"):
        return EXP_ERR * scale
    return 0.0


def softmax_rows(s):
    """softmax of each row of s, where -inf is masked"""
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def bf16(x):
    """x rounded to bfloat16 (through float32, to nearest even), as float64."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


class Rounding:
    """r(place, x, err): x rounded to bf16 where pipetrain's bf16 stores it
    (when low), except at the place named skip.

    A rounding is ambiguous where the exact value lies near a tie, the
    midpoint between two bf16: within SPREAD times `err`, the error the
    caller expects of float arithmetic there (None: pipetrain computes x
    exactly, as a sum of two bf16). Pipetrain's float arithmetic may land on
    either side of such a tie, and then stores the other bf16 neighbour.
    Each call is numbered in order; `ambiguous` lists (distance to the tie
    as a share of the spread, call, element, place) of every ambiguous
    rounding, and `flips` names (call, element) of those that take the
    other neighbour."""

    SPREAD = 8

    def __init__(self, low, skip=None, flips=(), first=0):
        self.low, self.skip, self.flips = low, skip, set(flips)
        self.calls, self.ambiguous = first, []

    def __call__(self, place, x, err=None):
        call = self.calls
        self.calls += 1
        if not self.low or place == self.skip:
            return x
        out = bf16(x)
        if err is None:
            return out
        bits = np.asarray(x, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
        tie = (bits | np.uint32(0x8000)).view(np.float32).astype(np.float64)
        spread = self.SPREAD * (np.broadcast_to(err, np.shape(x)) + U * np.abs(x))
        gap = np.abs(x - tie)
        # led by how near the tie, and how large against the rest of x (a
        # small value taken the other way moves little)
        lead = gap / np.where(spread > 0, spread, 1) * np.abs(x).max() / np.maximum(np.abs(x), 1e-300)
        self.ambiguous += [(lead[tuple(e)], call, tuple(int(i) for i in e), place) for e in np.argwhere(gap < spread)]
        for c, e in self.flips:
            if c == call:
                inward = bits[e].view(np.float32).astype(np.float64)
                other = inward if out[e] != inward else (bits[e] + np.uint32(0x10000)).view(np.float32)
                out = out.copy()
                out[e] = other
        return out


def attention_scale(cfg, layer, hs):
    scale = 1 / math.sqrt(hs) if cfg.get("scale_attn_weights", True) else 1.0
    return scale / (layer + 1) if cfg.get("scale_attn_by_inverse_layer_idx", False) else scale


def head_weight(cfg):
    return "transformer.wte.weight" if cfg.get("tie_word_embeddings", True) else "lm_head.weight"


def heads(x, H):
    """(B,T,C) -> (B,H,T,C/H)"""
    B, T, C = x.shape
    return x.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)


def merge_heads(x):
    """(B,H,T,hs) -> (B,T,H hs)"""
    B, H, T, hs = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, H * hs)


def forward(cfg, w, tokens, targets, r):
    """GPT-2's forward as transformers' modeling_gpt2 computes it: the loss,
    and what the backward reads. With r a Rounding that rounds (low), as
    pipetrain's --precision bf16 does: r() rounds to bf16 every tensor
    pipetrain stores as bf16 (each block's output, what a block keeps: the
    LayerNorms' outputs, q k v, the attention probabilities and output, the
    residual after attention, the MLP's hidden and activated values), and
    every product reads bf16 operands (the weight matrices rounded); the
    projections round once with their bias, then again after a residual add;
    LayerNorm, softmax, the logits and the loss stay unrounded. Each
    rounding is told how far float arithmetic may land from the value."""
    B, T = tokens.shape
    C, H = cfg["n_embd"], cfg["n_head"]
    hs, eps = C // H, cfg.get("layer_norm_epsilon", 1e-5)
    act = cfg.get("activation_function", "gelu_new")
    x = r("x", w["transformer.wte.weight"][tokens] + w["transformer.wpe.weight"][:T])
    mask = np.where(np.tril(np.ones((T, T), dtype=bool)), 0.0, -np.inf).astype(np.float32)
    layers = []

    def linear(place, inp, name):
        return r(place, *product_in_float(inp, r("w", w[name + ".weight"]), w[name + ".bias"]))

    def layernorm_out(place, inp, name):
        return r(place, *in_float(layernorm, inp, w[name + ".weight"], w[name + ".bias"], eps))

    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        c = {"x": x}
        c["h1"] = layernorm_out("h1", x, p + "ln_1")
        c["qkv"] = linear("qkv", c["h1"], p + "attn.c_attn")
        q, k, v = (heads(c["qkv"][..., j * C : (j + 1) * C], H) for j in range(3))
        scale = attention_scale(cfg, i, hs)
        att, err = in_float(lambda a, b: softmax_rows(a @ b * scale + mask), q, k.transpose(0, 1, 3, 2))
        c["att"] = r("att", att, err + 2 * EXP_ERR * att)
        c["y"] = merge_heads(r("y", *product_in_float(c["att"], v)))
        c["x2"] = r("x2", x + linear("proj", c["y"], p + "attn.c_proj"))
        c["h2"] = layernorm_out("h2", c["x2"], p + "ln_2")
        c["hid"] = linear("hid", c["h2"], p + "mlp.c_fc")
        g, err = in_float(lambda a: activation(act, a), c["hid"])
        c["g"] = r("g", g, err + activation_error(act, c["hid"]))
        x = r("out", c["x2"] + linear("proj", c["g"], p + "mlp.c_proj"))
        layers.append(c)
    lnf = layernorm_out("lnf", x, "transformer.ln_f")
    logits = lnf @ r("w", w[head_weight(cfg)]).T
    logits = logits - logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    counted = targets >= 0  # a negative target is not counted
    picked = np.take_along_axis(logp, np.where(counted, targets, 0)[..., None], -1)[..., 0]
    _, probs_err = in_float(lambda a, b: softmax_rows(a @ b), lnf, r("w", w[head_weight(cfg)]).T)
    kept = dict(layers=layers, x=x, lnf=lnf, probs=np.exp(logp), probs_err=probs_err + 2 * EXP_ERR * np.exp(logp),
                counted=counted)
    return -picked[counted].mean(), kept


def forward_loss(cfg, w, tokens, targets, low=False):
    return forward(cfg, w, tokens, targets, Rounding(low))[0]


def backward(cfg, w, tokens, targets, kept, loss_scale, r):
    """The gradient of loss_scale times the micro-batch's mean loss with
    respect to every weight, by hand, GPT-2's backward op by op. With r a
    Rounding that rounds, it rounds to bf16 each gradient pipetrain's bf16
    stores, at these places:
      dlogits  the logits' gradient, as a product reads it;
      dln_f    the gradient at ln_f's output;  dx  each block's input gradient;
      dg dh    at the MLP's activated and hidden values;  dln2 dln1  at the
      LayerNorms' outputs;  dx2  at the residual after attention;  dy  at the
      attention's output;  dq dk dv  at q k v;  dscores  at the scores;
    and every product reads bf16 operands (the weights rounded), as the
    forward. A weight gradient is summed unrounded (float in pipetrain)."""
    B, T = tokens.shape
    C, H = cfg["n_embd"], cfg["n_head"]
    hs, eps = C // H, cfg.get("layer_norm_epsilon", 1e-5)
    act = cfg.get("activation_function", "gelu_new")
    g = {k: np.zeros_like(v) for k, v in w.items()}
    counted = kept["counted"]
    scale = loss_scale / counted.sum()
    d = kept["probs"] * scale
    rows, cols = np.nonzero(counted)
    d[rows, cols, targets[rows, cols]] -= scale
    d[~counted] = 0
    dl = r("dlogits", d, np.where(counted[..., None], kept["probs_err"] * scale, 0))
    head = head_weight(cfg)

    def product(place, a, b):
        return r(place, *product_in_float(a, b))

    def layernorm_grad(place, dout, dln, x, name):
        return r(place, *in_float(lambda a, b, c, m: a + layernorm_backward_from(b, c, m, eps), dout, dln, x, w[name]))

    dlnf = product("dln_f", dl, r("w", w[head]))
    g[head] += np.einsum("btv,btc->vc", dl, kept["lnf"])
    _, xhat, _ = layernorm_parts(kept["x"], w["transformer.ln_f.weight"], 0.0, eps)
    g["transformer.ln_f.weight"] += (dlnf * xhat).sum((0, 1))
    g["transformer.ln_f.bias"] += dlnf.sum((0, 1))
    dx = layernorm_grad("dx", np.zeros_like(dlnf), dlnf, kept["x"], "transformer.ln_f.weight")
    for i in reversed(range(cfg["n_layer"])):
        p, c, dout = f"transformer.h.{i}.", kept["layers"][i], dx
        dg = product("dg", dout, r("w", w[p + "mlp.c_proj.weight"]).T)
        dh, err = in_float(lambda a, b: activation_backward(act, a, b), c["hid"], dg)
        dh = r("dh", dh, err + activation_error(act, c["hid"], dg))
        dln2 = product("dln2", dh, r("w", w[p + "mlp.c_fc.weight"]).T)
        dx2 = layernorm_grad("dx2", dout, dln2, c["x2"], p + "ln_2.weight")
        dy = heads(product("dy", dx2, r("w", w[p + "attn.c_proj.weight"]).T), H)
        q, k, v = (heads(c["qkv"][..., j * C : (j + 1) * C], H) for j in range(3))
        att, scale = c["att"], attention_scale(cfg, i, hs)
        dv = product("dv", att.transpose(0, 1, 3, 2), dy)

        def scores_grad(p_, dy_, v_):
            dprob = dy_ @ v_
            return scale * p_ * (dprob - (p_ * dprob).sum(-1, keepdims=True))

        ds = r("dscores", *in_float(scores_grad, att, dy, v.transpose(0, 1, 3, 2)))
        dq = product("dq", ds, k)
        dk = product("dk", ds.transpose(0, 1, 3, 2), q)
        dqkv = np.concatenate([merge_heads(dq), merge_heads(dk), merge_heads(dv)], -1)
        dln1 = product("dln1", dqkv, r("w", w[p + "attn.c_attn.weight"]).T)
        dx = layernorm_grad("dx", dx2, dln1, c["x"], p + "ln_1.weight")
        for name, inp, dout_ in (("mlp.c_proj", c["g"], dout), ("mlp.c_fc", c["h2"], dh),
                                 ("attn.c_proj", c["y"], dx2), ("attn.c_attn", c["h1"], dqkv)):
            g[p + name + ".weight"] += np.einsum("bti,bto->io", inp, dout_)
            g[p + name + ".bias"] += dout_.sum((0, 1))
        for name, dln, x in (("ln_2", dln2, c["x2"]), ("ln_1", dln1, c["x"])):
            _, xhat, _ = layernorm_parts(x, w[p + name + ".weight"], 0.0, eps)
            g[p + name + ".weight"] += (dln * xhat).sum((0, 1))
            g[p + name + ".bias"] += dln.sum((0, 1))
    np.add.at(g["transformer.wte.weight"], tokens, dx)
    g["transformer.wpe.weight"][:T] += dx.sum(0)
    return g


def micro_batch(cfg, w, tokens, targets, m, r):
    """micro-batch m's gradient (loss scale 1/M) and loss, rounding by r"""
    M = cfg["microbatches"]
    b = len(tokens) // M
    tok, tgt = tokens[m * b : (m + 1) * b], targets[m * b : (m + 1) * b]
    loss, kept = forward(cfg, w, tok, tgt, r)
    return backward(cfg, w, tok, tgt, kept, 1.0 / M, r), loss / M


def optimizer_step(cfg, w, grads, loss):
    """The global norm, clipping and AdamW (optimizer.c: bias-corrected
    moments from zero, decoupled weight decay on 2-D weights only): the
    weights after the step, their moments and gradients, the norm and the
    loss."""
    norm = math.sqrt(sum((v * v).sum() for v in grads.values()))
    clip = cfg["grad_clip"] / (norm + 1e-6) if 0 < cfg["grad_clip"] < norm else 1.0
    b1, b2, eps, lr = cfg["beta1"], cfg["beta2"], cfg["eps"], cfg["lr"]
    out = {"grad_norm": np.array([norm]), "loss": np.array([loss])}
    for k, v in w.items():
        gc = grads[k] * clip
        m1, m2 = (1 - b1) * gc, (1 - b2) * gc * gc
        decay = cfg["weight_decay"] if v.ndim >= 2 else 0.0
        out[k] = v - lr * ((m1 / (1 - b1)) / (np.sqrt(m2 / (1 - b2)) + eps) + decay * v)
        out["exp_avg." + k], out["exp_avg_sq." + k], out["grad." + k] = m1, m2, grads[k]
    return out


def train_step(cfg, w, tokens, targets, r):
    """One step of pipetrain's synchronous pipeline, rounding by r (a
    Rounding): every micro-batch's gradient with loss scale 1/M summed, then
    optimizer_step."""
    grads, loss = {k: np.zeros_like(v) for k, v in w.items()}, 0.0
    for m in range(cfg["microbatches"]):
        g, l = micro_batch(cfg, w, tokens, targets, m, r)
        for k in grads:
            grads[k] += g[k]
        loss += l
    return optimizer_step(cfg, w, grads, loss)


def mismatch(taken, grads):
    """for each tensor, its largest element's difference from taken's as a
    share of its largest element: their sum, and the largest"""
    err = [np.abs(taken["grad." + k] - g).max() / max(np.abs(g).max(), 1e-300) for k, g in grads.items()]
    return sum(err), max(err)


def step_as_taken(cfg, w, tokens, targets, skip, taken, most=8, tries=1024):
    """train_step, with the ambiguous roundings (Rounding) resolved as the
    step `taken` (another implementation's gradients under "grad.<name>")
    resolved them, as far as that can be told: while some gradient element
    differs from taken's by more than float32's noise (2e-6 of its tensor's
    largest), each of the `tries` ambiguous roundings that lead (Rounding) is
    tried the other way, and the one that brings the summed mismatch
    (mismatch) down most, by a fifth at least, is kept; up to `most` of
    them. Returns the
    step and the roundings kept the other way, as (place, call, element)."""
    low = cfg.get("pipetrain_precision", "fp32") == "bf16"
    M = cfg["microbatches"]
    done, first = {}, [0]

    def part(m, flips):  # micro-batch m with the flips among its roundings, kept
        mine = frozenset(f for f in flips if first[m] <= f[0] < first[m + 1]) if len(first) > M else frozenset()
        if (m, mine) not in done:
            r = Rounding(low, skip, mine, first[m])
            done[(m, mine)] = micro_batch(cfg, w, tokens, targets, m, r) + (r.ambiguous,)
            if len(first) <= M:
                first.append(r.calls)
        return done[(m, mine)]

    def gradients(flips):
        parts = [part(m, flips) for m in range(M)]
        grads = {k: sum(p[0][k] for p in parts) for k in w}
        return grads, sum(p[1] for p in parts), [a for p in parts for a in p[2]]

    flips = []
    grads, loss, ambiguous = gradients(flips)
    worst = mismatch(taken, grads)
    while worst[1] >= 2e-6 and len(flips) < most:
        best = None
        for _, call, e, place in sorted(ambiguous)[:tries]:
            if (call, e) in [f[:2] for f in flips]:
                continue
            trial = gradients([f[:2] for f in flips] + [(call, e)])
            now = mismatch(taken, trial[0])
            if now[0] < 0.8 * worst[0] and (not best or now[0] < best[0][0]):
                best = (now, trial, (call, e, place))
        if not best:
            break
        worst, (grads, loss, ambiguous) = best[:2]
        flips.append(best[2])
    return optimizer_step(cfg, w, grads, loss), [(place, call, e) for call, e, place in flips]


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


def step(config_path, model_path, out_path, taken_path=None):
    """One training step (train_step) of the batch, optimizer and weights
    given; the results in float64 into out_path. With taken_path (another
    implementation's gradients of the same step, "grad.<name>"), the
    ambiguous bf16 roundings are resolved as that step resolved them
    (step_as_taken), and each one taken the other way is printed."""
    with open(config_path) as f:
        cfg = json.load(f)
    w = read_weights(model_path)
    tokens, targets = np.array(cfg["tokens"], dtype=np.int64), np.array(cfg["targets"], dtype=np.int64)
    low = cfg.get("pipetrain_precision", "fp32") == "bf16"
    skip = cfg.get("pipetrain_skip_rounding")
    flips = []
    if taken_path:
        with safe_open(taken_path, "np") as f:
            taken = {k: f.get_tensor(k).astype(np.float64) for k in f.keys()}
        out, flips = step_as_taken(cfg, w, tokens, targets, skip, taken)
    else:
        out = train_step(cfg, w, tokens, targets, Rounding(low, skip))
    save_file({k: np.ascontiguousarray(v, dtype=np.float64) for k, v in out.items()}, out_path)
    for place, call, e in flips:
        print(f"flip {place} (rounding {call}) at {list(e)}")
    print(f"loss {out['loss'][0]:.17g} grad_norm {out['grad_norm'][0]:.17g} flips {len(flips)}")


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
    elif cmd == "step":
        step(argv[2], argv[3], argv[4], argv[5] if len(argv) > 5 else None)
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
