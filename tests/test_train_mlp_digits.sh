#!/usr/bin/env bash
# test_train_mlp_digits: the mlp reaches at least 90% held-out accuracy on
# scikit-learn's 8x8 digits (360 test images never trained on).
set -euo pipefail
digits="$PT_SOURCE_DIR/data/digits.csv.gz"
[ -s "$digits" ] || { echo "skipped: $digits is missing (scripts/install-deps.sh extracts it)"; exit 77; }
out=$("$PIPETRAIN" train --model mlp --widths 64,128,10 --data "$digits" --batch 32 \
      --microbatches 2 --steps 400 --lr 2e-3 --seed 3)
echo "$out" | tail -n 2
acc=$(echo "$out" | sed -n 's/.*held-out accuracy \([0-9.]*\)%.*/\1/p')
[ -n "$acc" ] || { echo "FAIL: no accuracy reported"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a >= 90.0) }' || { echo "FAIL: accuracy $acc% < 90%"; exit 1; }
echo "ok: held-out accuracy $acc%"
