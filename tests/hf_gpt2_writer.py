#!/usr/bin/env python3
"""Writes a GPT-2 checkpoint the way Hugging Face's transformers saves
GPT2LMHeadModel with safetensors: its tensor names, Conv1D weights stored
(in, out), lm_head.weight left out (tied to wte), the causal-mask buffers
h.N.attn.bias included, metadata {"format": "pt"}, the header padded with
spaces to 8 bytes. Standard library only: an independent second
implementation of the format for test_checkpoint_hf.

Element j of the k-th tensor (in the order below) holds
    ((k * 7919 + j * 104729) % 2001 - 1000) / 1000.0
which the C side recomputes.

usage: hf_gpt2_writer.py OUT LAYERS EMBD SEQ VOCAB"""
import json
import struct
import sys


def tensors(layers, c, t, v):
    yield "transformer.wte.weight", [v, c]
    yield "transformer.wpe.weight", [t, c]
    for i in range(layers):
        p = f"transformer.h.{i}."
        yield p + "ln_1.weight", [c]
        yield p + "ln_1.bias", [c]
        yield p + "attn.bias", [1, 1, t, t]
        yield p + "attn.c_attn.weight", [c, 3 * c]
        yield p + "attn.c_attn.bias", [3 * c]
        yield p + "attn.c_proj.weight", [c, c]
        yield p + "attn.c_proj.bias", [c]
        yield p + "ln_2.weight", [c]
        yield p + "ln_2.bias", [c]
        yield p + "mlp.c_fc.weight", [c, 4 * c]
        yield p + "mlp.c_fc.bias", [4 * c]
        yield p + "mlp.c_proj.weight", [4 * c, c]
        yield p + "mlp.c_proj.bias", [c]
    yield "transformer.ln_f.weight", [c]
    yield "transformer.ln_f.bias", [c]


def main():
    out, layers, c, t, v = sys.argv[1], *map(int, sys.argv[2:6])
    header = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for k, (name, shape) in enumerate(tensors(layers, c, t, v)):
        n = 1
        for d in shape:
            n *= d
        values = [((k * 7919 + j * 104729) % 2001 - 1000) / 1000.0 for j in range(n)]
        blob = struct.pack(f"<{n}f", *values)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


if __name__ == "__main__":
    main()
