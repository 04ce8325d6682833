#!/usr/bin/env bash
# test_train_bf16: `pipetrain train --precision bf16` end to end on a small
# text file:
#   - the loss falls as fp32's does (within 2% of it at the last step), and
#     the run says which product kernel it took;
#   - the portable products reach the same losses as the default kernel's
#     within float rounding, and so do AVX512_BF16's where the CPU has it
#     (where not, --bf16-kernel avx512bf16 is refused naming AVX512_BF16);
#   - --save-dtype bf16 writes a .safetensors file of BF16 weights, about
#     half the bytes of the fp32 file, each weight the fp32 one rounded, which
#     eval loads; with a checkpoint folder it is refused, naming why;
#   - eval --precision bf16 gives one loss on 1 and 2 stages, near fp32's,
#     and generate runs in bf16;
#   - a bad --precision or --bf16-kernel is refused by name.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for i in $(seq 1 60); do
    echo "The quick brown fox jumps over the lazy dog number $i."
    echo "A stitch in time saves nine; a bird in the hand is worth two in the bush."
done > "$dir/corpus.txt"
run=(--layers 2 --heads 2 --embd 32 --seq 32 --batch 8 --microbatches 2 --stages 2 --steps 30
     --lr 5e-3 --seed 3 --data "$dir/corpus.txt")
last() { sed -n '30s/.*"loss":\([0-9.]*\).*/\1/p' "$1"; }
"$PIPETRAIN" train "${run[@]}" --metrics "$dir/f.jsonl" --save "$dir/f.safetensors" > /dev/null
"$PIPETRAIN" train "${run[@]}" --precision bf16 --metrics "$dir/b.jsonl" \
    --save "$dir/b.safetensors" --save-dtype bf16 > "$dir/b.out"
grep -q "^precision bf16: products on \(amx\|avx512bf16\|portable\)" "$dir/b.out" ||
    { echo "FAIL: the run did not say which products it took:"; cat "$dir/b.out"; exit 1; }
f=$(last "$dir/f.jsonl"); b=$(last "$dir/b.jsonl")
echo "step 30 loss: fp32 $f, bf16 $b ($(grep -o 'products on [a-z]*' "$dir/b.out"))"
awk -v f="$f" -v b="$b" 'BEGIN { d = (b - f) / f; if (d < 0) d = -d; exit !(f < 4.5 && d < 0.02) }' ||
    { echo "FAIL: bf16's loss $b is not within 2% of fp32's $f (or fp32 did not learn)"; exit 1; }
"$PIPETRAIN" train "${run[@]}" --precision bf16 --bf16-kernel portable --metrics "$dir/p.jsonl" > /dev/null
p=$(last "$dir/p.jsonl")
awk -v p="$p" -v b="$b" 'BEGIN { d = (b - p) / p; if (d < 0) d = -d; exit !(d < 2e-3) }' ||
    { echo "FAIL: portable products' loss $p, the default's $b"; exit 1; }
set +e
out=$("$PIPETRAIN" train "${run[@]}" --precision bf16 --bf16-kernel avx512bf16 \
      --metrics "$dir/v.jsonl" 2>&1); rc=$?
set -e
if [ "$rc" -eq 0 ]; then
    grep -q "^precision bf16: products on avx512bf16" <<< "$out" ||
        { echo "FAIL: --bf16-kernel avx512bf16 ran on other products: $out"; exit 1; }
    v=$(last "$dir/v.jsonl")
    awk -v v="$v" -v p="$p" 'BEGIN { d = (v - p) / p; if (d < 0) d = -d; exit !(d < 2e-3) }' ||
        { echo "FAIL: avx512bf16 products' loss $v, the portable ones' $p"; exit 1; }
    echo "step 30 loss: portable $p, avx512bf16 $v"
else
    [ "$rc" -eq 2 ] && grep -q "AVX512_BF16" <<< "$out" ||
        { echo "FAIL: --bf16-kernel avx512bf16 exited $rc: $out"; exit 1; }
    echo "skipped: --bf16-kernel avx512bf16: $out"
fi

# the bf16 weights file: BF16 tensors, half the size, loaded by eval
header=$(head -c 4096 "$dir/b.safetensors" | tr -d '\0')
grep -q '"BF16"' <<< "$header" && ! grep -q '"F32"' <<< "$header" ||
    { echo "FAIL: --save-dtype bf16 wrote no BF16 (or some F32) tensors"; exit 1; }
fs=$(stat -c %s "$dir/f.safetensors"); bs=$(stat -c %s "$dir/b.safetensors")
awk -v f="$fs" -v b="$bs" 'BEGIN { exit !(b < 0.55 * f) }' ||
    { echo "FAIL: the bf16 file has $bs bytes, the fp32 one $fs"; exit 1; }
"$PIPETRAIN" eval --load "$dir/b.safetensors" --data "$dir/corpus.txt" > "$dir/eval.out" ||
    { echo "FAIL: eval cannot load the bf16 weights"; cat "$dir/eval.out"; exit 1; }
echo "bf16 weights: $bs bytes (fp32 $fs); eval: $(tail -n 1 "$dir/eval.out")"

# eval and generate in bf16: the same loss on one stage and on two (bf16
# rounds at the same places on every layout), near fp32's and not equal
ev() { "$PIPETRAIN" eval --load "$dir/f.safetensors" --data "$dir/corpus.txt" --batches 4 "$@"; }
e32=$(ev --precision fp32); e16=$(ev --precision bf16); e16p=$(ev --precision bf16 --stages 2)
echo "eval: fp32 $e32; bf16 $e16; bf16 on 2 stages $e16p"
[ "$e16" = "$e16p" ] || { echo "FAIL: eval in bf16 differs between 1 and 2 stages"; exit 1; }
l32=$(awk '{print $2}' <<< "$e32"); l16=$(awk '{print $2}' <<< "$e16")
awk -v f="$l32" -v b="$l16" 'BEGIN { d = (b - f) / f; if (d < 0) d = -d; exit !(b != f && d < 0.02) }' ||
    { echo "FAIL: eval in bf16 ($l16) is not near and apart from fp32 ($l32)"; exit 1; }
"$PIPETRAIN" generate --load "$dir/f.safetensors" --tokens 8 --precision bf16 > /dev/null ||
    { echo "FAIL: generate --precision bf16"; exit 1; }

set +e
out=$("$PIPETRAIN" train "${run[@]}" --steps 1 --save "$dir/folder" --save-dtype bf16 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "master weights" <<< "$out" ||
    { echo "FAIL: --save-dtype bf16 with a folder: $rc $out"; exit 1; }
out=$("$PIPETRAIN" train "${run[@]}" --precision fp16 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "fp16" <<< "$out" || { echo "FAIL: --precision fp16: $rc $out"; exit 1; }
out=$(ev --precision fp16 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "fp16" <<< "$out" || { echo "FAIL: eval --precision fp16: $rc $out"; exit 1; }
out=$("$PIPETRAIN" train "${run[@]}" --bf16-kernel fast 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "fast" <<< "$out" || { echo "FAIL: --bf16-kernel fast: $rc $out"; exit 1; }
echo ok
