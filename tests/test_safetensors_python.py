#!/usr/bin/env python3
"""Writes and checks safetensors files the way Hugging Face lays them out,
with the standard library only (json, struct), for test_safetensors_python.

  test_safetensors_python.py write OUT   a tiny GPT-2 checkpoint under HF's names
  test_safetensors_python.py check FILE  verifies a file pipetrain wrote

Values are exact in float32: element i of the k-th tensor (in the order of
TENSORS) is (k * 1000 + i) * 0.125, negated when i is odd.
"""
import json
import struct
import sys

# (name, shape): GPT2LMHeadModel's names and HF's (in, out) Conv1D layout,
# with V=8, T=4, C=4, one layer.
TENSORS = [
    ("transformer.wte.weight", [8, 4]),
    ("transformer.wpe.weight", [4, 4]),
    ("transformer.h.0.ln_1.weight", [4]),
    ("transformer.h.0.ln_1.bias", [4]),
    ("transformer.h.0.attn.c_attn.weight", [4, 12]),
    ("transformer.h.0.attn.c_attn.bias", [12]),
    ("transformer.h.0.attn.bias", [1, 1, 4, 4]),
    ("transformer.ln_f.weight", [4]),
]


def value(k, i):
    v = (k * 1000 + i) * 0.125
    return -v if i % 2 else v


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write(out):
    # Data in HF's order (sorted by name; all F32), header keys in another
    # order: readers must go by data_offsets, not by key order.
    order = sorted(range(len(TENSORS)), key=lambda k: TENSORS[k][0])
    offsets, data, pos = {}, b"", 0
    for k in order:
        name, shape = TENSORS[k]
        blob = struct.pack("<%df" % numel(shape), *[value(k, i) for i in range(numel(shape))])
        offsets[k] = (pos, pos + len(blob))
        data += blob
        pos += len(blob)
    meta = {"format": "pt", "source": "test_safetensors_python.py"}
    while True:
        header = {"__metadata__": meta}
        for k in reversed(range(len(TENSORS))):
            name, shape = TENSORS[k]
            header[name] = {"dtype": "F32", "shape": shape, "data_offsets": list(offsets[k])}
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        if len(text) % 8 != 0:
            break
        meta["source"] += "!"  # make HF's space padding appear
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)


def check(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert n % 8 == 0, "header length %d is not a multiple of 8" % n
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    meta = header.pop("__metadata__")
    assert meta == {"format": "pt", "written_by": "pipetrain"}, meta
    data = blob[8 + n :]
    assert [t[0] for t in TENSORS] == list(header.keys()), list(header.keys())
    pos = 0
    for k, (name, shape) in enumerate(TENSORS):
        entry = header[name]
        assert entry["dtype"] == "F32" and entry["shape"] == shape, (name, entry)
        begin, end = entry["data_offsets"]
        assert begin == pos and end - begin == 4 * numel(shape), (name, entry)
        got = struct.unpack("<%df" % numel(shape), data[begin:end])
        want = [value(k, i) for i in range(numel(shape))]
        assert list(got) == want, (name, got[:4], want[:4])
        pos = end
    assert pos == len(data), "data region has %d bytes, tensors cover %d" % (len(data), pos)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit("usage: test_safetensors_python.py write OUT | check FILE")
    (write if sys.argv[1] == "write" else check)(sys.argv[2])
