#!/usr/bin/env bash
# test_train_loss_falls: a small gpt on one small text file: the loss falls
# from about ln 256 = 5.5 by more than 1.5 in 40 steps, the metrics log has
# one JSON line per step with the documented fields, and generation from the
# saved checkpoint prints the prompt and the tokens asked for.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for i in $(seq 1 60); do
    echo "The quick brown fox jumps over the lazy dog number $i."
    echo "A stitch in time saves nine; a bird in the hand is worth two in the bush."
done > "$dir/corpus.txt"
"$PIPETRAIN" train --layers 2 --heads 2 --embd 32 --seq 32 --batch 8 --steps 40 --lr 5e-3 \
    --data "$dir/corpus.txt" --metrics "$dir/m.jsonl" --save "$dir/m.safetensors" > "$dir/out"
first=$(sed -n '1s/.*"loss":\([0-9.]*\).*/\1/p' "$dir/m.jsonl")
last=$(sed -n '40s/.*"loss":\([0-9.]*\).*/\1/p' "$dir/m.jsonl")
echo "loss $first -> $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.0 && b < a - 1.5) }' ||
    { echo "FAIL: loss did not fall enough"; exit 1; }
[ "$(wc -l < "$dir/m.jsonl")" -eq 40 ] || { echo "FAIL: metrics lines"; exit 1; }
for field in step loss lr tokens_per_s step_ms; do
    grep -q "\"$field\":" "$dir/m.jsonl" || { echo "FAIL: no $field in metrics"; exit 1; }
done
grep -q '"step":40,.*"val_loss":' "$dir/m.jsonl" || { echo "FAIL: no val_loss at the end"; exit 1; }
text=$("$PIPETRAIN" generate --load "$dir/m.safetensors" --prompt "The quick" --tokens 30 --seed 2)
[ "${#text}" -ge 39 ] && [ "${text:0:9}" = "The quick" ] || { echo "FAIL: generated '$text'"; exit 1; }
echo "generated: $text"
