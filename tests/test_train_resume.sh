#!/usr/bin/env bash
# test_train_resume: N steps saved to a folder, then a resumed run of N more,
# give weights byte-identical to one run of 2N steps (so the optimizer
# moments and the data position came back too); the metrics log of the
# resumed run continues the first one's. `--save NAME.safetensors` writes
# the weights alone, which `pipetrain merge DIR OUT.safetensors` reproduces
# from a folder byte for byte, and which a resume refuses unless the
# optimizer starts afresh. merge's bad input exits 2 (usage) or 1 (a set it
# refuses), with a message.
set -euo pipefail
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing (scripts/install-deps.sh installs it)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 2 --embd 32 --seq 32 --batch 8 --microbatches 2 --lr 1e-3
        --warmup 2 --decay-steps 12 --seed 5 --data "$corpus" --eval-every 3)

"$PIPETRAIN" train "${common[@]}" --steps 12 --save "$dir/full.safetensors" >/dev/null
"$PIPETRAIN" train "${common[@]}" --steps 6 --save "$dir/half_set" \
    --metrics "$dir/m.jsonl" >/dev/null
for f in model.safetensors optimizer.safetensors trainer_state.json config.json; do
    [ -f "$dir/half_set/$f" ] || { echo "FAIL: --save DIR wrote no $f"; exit 1; }
done
"$PIPETRAIN" train "${common[@]}" --steps 12 --resume "$dir/half_set" \
    --save "$dir/resumed.safetensors" --metrics "$dir/m.jsonl" >/dev/null

cmp "$dir/full.safetensors" "$dir/resumed.safetensors" ||
    { echo "FAIL: resumed run differs from the uninterrupted one"; exit 1; }
"$PIPETRAIN" merge "$dir/half_set" "$dir/half.safetensors"
if cmp -s "$dir/full.safetensors" "$dir/half.safetensors"; then
    echo "FAIL: the half-way checkpoint equals the final one"; exit 1
fi
lines=$(wc -l < "$dir/m.jsonl")
[ "$lines" -eq 12 ] || { echo "FAIL: metrics log has $lines lines, expected 12"; exit 1; }
grep -q '"step":12,' "$dir/m.jsonl" || { echo "FAIL: no step 12 in the metrics log"; exit 1; }

# a set resumed into a set, merged back into one file
"$PIPETRAIN" train "${common[@]}" --steps 12 --resume "$dir/half_set" \
    --save "$dir/resumed_set" >/dev/null
"$PIPETRAIN" merge "$dir/resumed_set" "$dir/merged.safetensors"
cmp "$dir/full.safetensors" "$dir/merged.safetensors" ||
    { echo "FAIL: a run resumed from a set and merged differs from the uninterrupted one"; exit 1; }
# a file of weights alone: no exact resume, unless the optimizer starts afresh
if out=$("$PIPETRAIN" train "${common[@]}" --steps 12 --resume "$dir/half.safetensors" 2>&1); then
    echo "FAIL: resuming from weights alone was accepted"; exit 1
fi
grep -q "weights only" <<< "$out" || { echo "FAIL: message does not say why: $out"; exit 1; }
"$PIPETRAIN" train "${common[@]}" --steps 7 --resume "$dir/half.safetensors" --fresh-optimizer \
    >/dev/null
merge_exits() { # status, text the message must hold, arguments...
    local want=$1 needle=$2 out rc=0
    shift 2
    out=$("$PIPETRAIN" merge "$@" 2>&1) || rc=$?
    [ "$rc" -eq "$want" ] || { echo "FAIL: merge $* exited $rc, expected $want: $out"; exit 1; }
    grep -q -- "$needle" <<< "$out" || { echo "FAIL: merge $*: '$needle' not in: $out"; exit 1; }
}
merge_exits 2 "expected SET_DIR" "$dir/half_set"
merge_exits 2 "not a folder" "$dir/nothing" "$dir/x.safetensors"
merge_exits 2 "does not end in .safetensors" "$dir/half_set" "$dir/x.bin"
cp -r "$dir/half_set" "$dir/broken_set"
rm "$dir/broken_set/model.safetensors"
merge_exits 1 "not a checkpoint set" "$dir/broken_set" "$dir/x.safetensors"
[ ! -e "$dir/x.safetensors" ] || { echo "FAIL: a refused merge wrote its output"; exit 1; }

# a resume with another model shape is refused, naming the difference
if out=$("$PIPETRAIN" train "${common[@]}" --layers 3 --steps 12 \
        --resume "$dir/half_set" 2>&1); then
    echo "FAIL: resuming a 2-layer checkpoint into 3 layers was accepted"; exit 1
fi
grep -q "layers 2" <<< "$out" || { echo "FAIL: message does not say the shape: $out"; exit 1; }
# the mlp on the digits resumes exactly too (its sampler's state is a count)
digits="$PT_SOURCE_DIR/data/digits.csv.gz"
if [ -s "$digits" ]; then
    mlp=(--model mlp --widths 64,32,10 --data "$digits" --batch 16 --microbatches 2 --lr 1e-3
         --decay-steps 20 --seed 4)
    "$PIPETRAIN" train "${mlp[@]}" --steps 20 --save "$dir/mlp_full.safetensors" >/dev/null
    "$PIPETRAIN" train "${mlp[@]}" --steps 10 --save "$dir/mlp_half" >/dev/null
    "$PIPETRAIN" train "${mlp[@]}" --steps 20 --resume "$dir/mlp_half" \
        --save "$dir/mlp_resumed.safetensors" >/dev/null
    cmp "$dir/mlp_full.safetensors" "$dir/mlp_resumed.safetensors" ||
        { echo "FAIL: the resumed mlp differs from the uninterrupted one"; exit 1; }
fi
echo "ok: 6 + 6 resumed steps are byte-identical to 12, saved as weights or as a set"
