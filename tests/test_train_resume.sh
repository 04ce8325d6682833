#!/usr/bin/env bash
# test_train_resume: N steps, then a resumed run of N more, give a checkpoint
# byte-identical (parameters, optimizer moments, data position) to one run of
# 2N steps; the metrics log of the resumed run continues the first one's.
set -euo pipefail
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing (scripts/install-deps.sh installs it)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 2 --embd 32 --seq 32 --batch 8 --microbatches 2 --lr 1e-3
        --warmup 2 --decay-steps 12 --seed 5 --data "$corpus" --eval-every 3)

"$PIPETRAIN" train "${common[@]}" --steps 12 --save "$dir/full.safetensors" >/dev/null
"$PIPETRAIN" train "${common[@]}" --steps 6 --save "$dir/half.safetensors" \
    --metrics "$dir/m.jsonl" >/dev/null
"$PIPETRAIN" train "${common[@]}" --steps 12 --resume "$dir/half.safetensors" \
    --save "$dir/resumed.safetensors" --metrics "$dir/m.jsonl" >/dev/null

cmp "$dir/full.safetensors" "$dir/resumed.safetensors" ||
    { echo "FAIL: resumed run differs from the uninterrupted one"; exit 1; }
if cmp -s "$dir/full.safetensors" "$dir/half.safetensors"; then
    echo "FAIL: the half-way checkpoint equals the final one"; exit 1
fi
lines=$(wc -l < "$dir/m.jsonl")
[ "$lines" -eq 12 ] || { echo "FAIL: metrics log has $lines lines, expected 12"; exit 1; }
grep -q '"step":12,' "$dir/m.jsonl" || { echo "FAIL: no step 12 in the metrics log"; exit 1; }

# a resume with another model shape is refused, naming the difference
if out=$("$PIPETRAIN" train "${common[@]}" --layers 3 --steps 12 \
        --resume "$dir/half.safetensors" 2>&1); then
    echo "FAIL: resuming a 2-layer checkpoint into 3 layers was accepted"; exit 1
fi
echo "$out" | grep -q "layers 2" || { echo "FAIL: message does not say the shape: $out"; exit 1; }
# the mlp on the digits resumes exactly too (its sampler's state is a count)
digits="$PT_SOURCE_DIR/data/digits.csv.gz"
if [ -s "$digits" ]; then
    mlp=(--model mlp --widths 64,32,10 --data "$digits" --batch 16 --microbatches 2 --lr 1e-3
         --decay-steps 20 --seed 4)
    "$PIPETRAIN" train "${mlp[@]}" --steps 20 --save "$dir/mlp_full.safetensors" >/dev/null
    "$PIPETRAIN" train "${mlp[@]}" --steps 10 --save "$dir/mlp_half.safetensors" >/dev/null
    "$PIPETRAIN" train "${mlp[@]}" --steps 20 --resume "$dir/mlp_half.safetensors" \
        --save "$dir/mlp_resumed.safetensors" >/dev/null
    cmp "$dir/mlp_full.safetensors" "$dir/mlp_resumed.safetensors" ||
        { echo "FAIL: the resumed mlp differs from the uninterrupted one"; exit 1; }
fi
echo "ok: 6 + 6 resumed steps are byte-identical to 12"
