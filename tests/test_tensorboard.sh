#!/usr/bin/env bash
# test_tensorboard: `train --tensorboard DIR` writes event files TensorBoard's
# own reader (PyPI's tensorboard, EventAccumulator) loads: every scalar of the
# JSONL log is a curve with one point per logged step and the log's value
# (the gradient norm, each worker's bubble and memory, an mlp's held-out
# accuracy included) and there is no other; the configuration is text
# (tests/tensorboard_check.py). A resumed run adds a file to the same folder
# and the curves continue; a run resumed from an earlier checkpoint than the
# interrupted run reached shows each step once, with the resumed run's
# values. Skipped (77) when tensorboard cannot be installed
# (scripts/install-test-python.sh).
set -euo pipefail
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing (scripts/install-deps.sh installs it)"; exit 77; }
build=$(cd "$(dirname "$PIPETRAIN")" && pwd)
py=$(bash "$PT_SOURCE_DIR/scripts/install-test-python.sh" "$build/test-python") ||
    { echo "skipped: PyPI's tensorboard cannot be installed here"; exit 77; }
check=$PT_SOURCE_DIR/tests/tensorboard_check.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 2 --embd 32 --seq 32 --batch 8 --microbatches 2 --stages 2
        --lr 1e-3 --warmup 2 --seed 5 --data "$corpus" --eval-every 3
        --tensorboard "$dir/tb" --metrics "$dir/m.jsonl")

"$PIPETRAIN" train "${common[@]}" --steps 6 --save "$dir/ck6" >/dev/null
n=$(ls "$dir/tb" | grep -c '^events\.out\.tfevents\.[0-9]*\..*\.[0-9]*\.pipetrain$') || true
[ "$n" -eq 1 ] || { echo "FAIL: $n event files in $dir/tb: $(ls "$dir/tb")"; exit 1; }
"$py" "$check" "$dir/tb" "$dir/m.jsonl" "| layers | 2 |"

# resumed at its end: the same curves go on from step 7
"$PIPETRAIN" train "${common[@]}" --steps 9 --resume "$dir/ck6" \
    --save "$dir/ck9" >/dev/null
"$py" "$check" "$dir/tb" "$dir/m.jsonl" "| layers | 2 |"

# resumed from step 6 again after the run reached 9: steps 7..9 are shown
# once, as the new run wrote them (the log is trimmed the same way)
"$PIPETRAIN" train "${common[@]}" --steps 11 --resume "$dir/ck6" >/dev/null
n=$(ls "$dir/tb" | wc -l)
[ "$n" -eq 3 ] || { echo "FAIL: $n files in $dir/tb, expected 3"; exit 1; }
"$py" "$check" "$dir/tb" "$dir/m.jsonl" "| layers | 2 |"

# an mlp: the held-out accuracy is a curve and a field of the log
digits="$PT_SOURCE_DIR/data/digits.csv.gz"
if [ -s "$digits" ]; then
    "$PIPETRAIN" train --model mlp --widths 64,32,10 --data "$digits" --batch 16 --microbatches 2 \
        --stages 2 --steps 4 --eval-every 2 --tensorboard "$dir/mlp" --metrics "$dir/mlp.jsonl" \
        >/dev/null
    grep -q '"val_accuracy":' "$dir/mlp.jsonl" || { echo "FAIL: no val_accuracy in the log"; exit 1; }
    "$py" "$check" "$dir/mlp" "$dir/mlp.jsonl" "| widths | 64,32,10 |"
else
    echo "no mlp run: $digits is missing (scripts/install-deps.sh extracts it)"
fi
echo "ok"
