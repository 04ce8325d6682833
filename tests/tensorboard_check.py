#!/usr/bin/env python3
"""Reads a --tensorboard folder with TensorBoard's own reader and checks it
against the run's JSONL metrics log, for test_tensorboard.

  tensorboard_check.py DIR LOG.jsonl CONFIG_ROW

Every scalar the log holds is a curve with one point per step the log has,
equal to the log's value as a float32, and there is no other curve: the
gradient norm on every step, each worker's bubble and memory on each run's
last step, validation where the log has it. The configuration is a text
summary TensorBoard's text plugin lists, holding CONFIG_ROW (e.g.
"| layers | 2 |"). A step shown twice, a missing or extra step, or a value
that differs fails.
"""
import json
import math
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def tag_of(key):
    named = {"loss": "train/loss", "lr": "train/lr", "tokens_per_s": "train/tokens_per_s",
             "step_ms": "train/step_ms", "grad_norm": "train/grad_norm", "val_loss": "val/loss",
             "val_accuracy": "val/accuracy", "skipped": "train/skipped"}
    if key in named:
        return named[key]
    if key.startswith("worker") and key.endswith("_bubble"):
        return "bubble/" + key[: -len("_bubble")]
    if key.startswith("link_"):
        return "link/" + key[len("link_"):]
    if key.startswith("worker") and key.endswith("_step_s"):
        return "step_time/" + key
    if key.startswith("worker"):
        return "memory/" + key
    return None


def main(folder, log, config_row):
    want = {}  # tag -> {step: value}
    steps = set()
    with open(log) as f:
        for line in f:
            row = json.loads(line)
            step = row["step"]
            if "skipped" not in row:
                steps.add(step)
            for key, value in row.items():
                tag = tag_of(key)
                if tag is None or ("skipped" in row and tag != "train/skipped"):
                    continue
                assert step not in want.setdefault(tag, {}), f"{tag}: step {step} twice in the log"
                want[tag][step] = value
    ea = EventAccumulator(folder, size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    tags = ea.Tags()
    failures = []
    for tag, points in sorted(want.items()):
        if tag not in tags["scalars"]:
            failures.append(f"{tag}: no such curve")
            continue
        got = ea.Scalars(tag)
        got_steps = [e.step for e in got]
        if got_steps != sorted(points):
            failures.append(f"{tag}: steps {got_steps}, the log has {sorted(points)}")
            continue
        for e in got:
            v = points[e.step]
            expect = float("nan") if v is None else f32(v)
            if not (e.value == expect or (math.isnan(e.value) and math.isnan(expect))):
                failures.append(f"{tag} step {e.step}: {e.value!r}, the log has {v!r}")
    last = max(steps)
    for tag in tags["scalars"]:
        if tag not in want:
            failures.append(f"{tag}: a curve the log does not explain")
    ends = sorted(want.get("memory/worker0_bytes", {}))  # each run's last step
    for tag in ("train/grad_norm", "bubble/worker0", "bubble/worker1"):
        points = want.get(tag, {})
        if tag == "train/grad_norm" and (sorted(points) != sorted(steps) or
                                         not all(v > 0 for v in points.values())):
            failures.append(f"{tag}: the log has steps {sorted(points)} or a value <= 0")
        if tag.startswith("bubble") and (sorted(points) != ends or
                                         not all(0 <= v < 1 for v in points.values())):
            failures.append(f"{tag}: the log has steps {sorted(points)}, expected {ends}, "
                            "or not a fraction")
    if "config" not in ea.PluginTagToContent("text"):
        failures.append("the configuration is not a text summary TensorBoard's text plugin lists")
    else:
        texts = ea.Tensors("config")
        first = texts[0].tensor_proto.string_val[0].decode()
        if texts[0].step != 0 or config_row not in first:
            failures.append(f"config at step {texts[0].step}: {first!r}")
    print(f"{folder}: {len(tags['scalars'])} curves, steps {min(steps)}..{last}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
