# test_plan_layouts: `pipetrain plan --tensor T --replicas D --zero Z`
# predicts the bytes of the fullest rank that `pipetrain train` then
# allocates for the same layout (its memory report), within 10%, at
# (P, T, D, zero) = (1, 2, 1, 0), (1, 2, 1, 0) with --sequence-parallel
# and (1, 1, 4, 1), and for a spec of
# column_linear and row_linear at T = 2; `plan --ranks 4` lists
# every layout the model allows sorted by predicted step time, marks those
# above --memory-limit and names the refused ones; bad layouts are refused
# with a message (T not dividing the heads, zero without replicas,
# --sequence-parallel without --tensor).
set -u
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model=(--layers 2 --heads 2 --embd 64 --seq 32)

for layout in "1 2 1 0" "1 2 1 0 sp" "1 1 4 1"; do
    read -r P T D Z S <<< "$layout"
    flags=(--stages "$P" --tensor "$T" --replicas "$D" --zero "$Z")
    [ "$S" = sp ] && flags+=(--sequence-parallel)
    "$PIPETRAIN" plan "${model[@]}" "${flags[@]}" --microbatches 4 --batch 2 > "$dir/plan" ||
        { echo "FAIL: plan ${flags[*]}"; cat "$dir/plan"; exit 1; }
    "$PIPETRAIN" train "${model[@]}" "${flags[@]}" --microbatches 4 --batch 8 --steps 1 \
        --data "$corpus" > "$dir/train" 2>&1 || { echo "FAIL: train ${flags[*]}"; cat "$dir/train"; exit 1; }
    want=$(awk -v P="$P" -v T="$T" '$1 == P && $2 == T && NF >= 13 { print $10 }' "$dir/plan")
    got=$(awk '/^rank +s\/r\/t/ { on = 1; next } on && /^[0-9]+ / && $9 > m { m = $9 } END { print m }' \
        "$dir/train")
    [ -n "$want" ] && [ -n "$got" ] || { echo "FAIL: no figures"; cat "$dir/plan" "$dir/train"; exit 1; }
    awk -v g="$got" -v w="$want" 'BEGIN { exit !(g <= 1.1 * w && g >= 0.9 * w) }' ||
        { echo "FAIL: ${flags[*]}: train's fullest rank holds $got MiB, plan predicted $want"; exit 1; }
    echo "P $P T $T D $D zero $Z ${S:-}: plan predicts $want MiB for the fullest rank, train allocates $got"
done

# a spec of Megatron's pair: plan's slice is train's
spec=(--model-spec 'input 256; column_linear 256 2048; gelu; row_linear 2048 256; mse')
"$PIPETRAIN" plan "${spec[@]}" --stages 1 --tensor 2 --microbatches 4 --batch 2 > "$dir/plan" ||
    { echo "FAIL: plan of a spec at T 2"; cat "$dir/plan"; exit 1; }
"$PIPETRAIN" train "${spec[@]}" --data-format synthetic-regression --tensor 2 --microbatches 4 \
    --batch 8 --steps 1 > "$dir/train" 2>&1 || { echo "FAIL: train a spec at T 2"; cat "$dir/train"; exit 1; }
want=$(awk '$1 == 1 && $2 == 2 && NF >= 13 { print $10 }' "$dir/plan")
got=$(awk '/^rank +s\/r\/t/ { on = 1; next } on && /^[0-9]+ / && $9 > m { m = $9 } END { print m }' \
    "$dir/train")
[ -n "$want" ] && [ -n "$got" ] && awk -v g="$got" -v w="$want" 'BEGIN { exit !(g <= 1.1 * w && g >= 0.9 * w && g > 0) }' ||
    { echo "FAIL: spec at T 2: train's fullest rank holds $got MiB, plan predicted $want"; cat "$dir/plan" "$dir/train"; exit 1; }
echo "spec at T 2: plan predicts $want MiB for the fullest rank, train allocates $got"

"$PIPETRAIN" plan "${model[@]}" --ranks 4 --zero 1 --microbatches 4 --memory-limit 300000 \
    > "$dir/ranks" || { echo "FAIL: plan --ranks 4"; cat "$dir/ranks"; exit 1; }
awk '$1 ~ /^[0-9]+$/ && NF >= 13 { n++; if ($1 * $2 * $3 != 4) bad = 1; if (n > 1 && $11 < last) bad = 1
                                   last = $11 }
     END { exit bad || n < 3 }' "$dir/ranks" ||
    { echo "FAIL: plan --ranks 4 does not list the layouts of 4 ranks by step time"; cat "$dir/ranks"; exit 1; }
grep -q "over the limit" "$dir/ranks" && grep -q "refused: P 1 T 4 D 1: --tensor 4 does not divide" "$dir/ranks" ||
    { echo "FAIL: plan --ranks 4 marks no layout over the limit or refuses none"; cat "$dir/ranks"; exit 1; }
echo "plan --ranks 4: $(grep -c 'ms' "$dir/ranks") lines, sorted by step time, the cap marked"

refuse() { # expected words, then the flags
    local want=$1; shift
    if "$PIPETRAIN" plan "${model[@]}" "$@" > "$dir/out" 2>&1; then
        echo "FAIL: plan $* was accepted"; exit 1
    fi
    grep -q -- "$want" "$dir/out" || { echo "FAIL: plan $*: message lacks '$want':"; cat "$dir/out"; exit 1; }
}
refuse "does not divide the 2 attention heads" --stages 1 --tensor 4
refuse "replicas" --stages 1 --zero 1
refuse "multiple of the replicas" --stages 1 --replicas 3 --microbatches 4
refuse "needs --tensor 2 or more" --stages 1 --sequence-parallel
echo "refused: T not dividing the heads, zero without replicas, M not a multiple of D," \
    "sequence parallelism without a tensor group"
