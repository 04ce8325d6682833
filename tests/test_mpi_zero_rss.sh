# test_mpi_zero_rss: GPT-2 small's shape (12 layers, 768 channels, 12
# heads, a vocabulary of 50304; random tokens, 16 a sample, M = 4) trained
# one step by one process,
# then by `mpirun -np 4 pipetrain train --replicas 4 --zero 1` (1 stage x 4
# replicas, each its own process):
#   - each rank's AdamW moments are 1/4 of the one process's;
#   - each rank's peak resident memory (the report's peak RSS: the
#     process's VmHWM) is at most 0.7x of the one process's;
#   - the memory report's prediction is within 10% of what each rank
#     allocated;
# then by the same with --zero 2, where each rank keeps only its quarter of
# the gradients (and one block's while it is scattered):
#   - each rank's peak RSS is below its zero 1 peak by at least half of
#     what the report says zero 2 no longer holds (zero 1's gradients less
#     zero 2's), so the memory is given back for real;
# read from the memory report `pipetrain train` prints at the end. (About a
# minute on 2 cores: most of it the seeded initialization of 160M
# parameters, once per process.)
set -u
command -v python3 >/dev/null || { echo "skipped: python3 (to write the tokens) is missing"; exit 77; }
command -v mpirun >/dev/null || { echo "skipped: mpirun is not installed"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PIPETRAIN_TIMEOUT=120
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 -c '
import random, struct, sys
random.seed(1)
open(sys.argv[1], "wb").write(struct.pack("<4096H", *[random.randrange(50304) for _ in range(4096)]))
' "$dir/tokens.bin" || { echo "FAIL: cannot write the tokens"; exit 1; }
# --repack-weights: the products' packed panels of the matrices (kept by
# default, whole on every replica) are not what sharding is about
common=(--layers 12 --heads 12 --embd 768 --vocab 50304 --seq 16 --batch 4 --microbatches 4
        --steps 1 --eval-batches 1 --seed 2 --data "$dir/tokens.bin" --repack-weights)

"$PIPETRAIN" train "${common[@]}" > "$dir/one.out" 2>&1 ||
    { echo "FAIL: one process"; cat "$dir/one.out"; exit 1; }
mpirun --oversubscribe -np 4 "$PIPETRAIN" train "${common[@]}" --replicas 4 --zero 1 \
    > "$dir/four.out" 2>&1 || { echo "FAIL: 4 ranks, zero 1"; cat "$dir/four.out"; exit 1; }
mpirun --oversubscribe -np 4 "$PIPETRAIN" train "${common[@]}" --replicas 4 --zero 2 \
    > "$dir/two.out" 2>&1 || { echo "FAIL: 4 ranks, zero 2"; cat "$dir/two.out"; exit 1; }

# the report's rows: rank s/r/t params grads moments stash activ comm total predicted rss (MiB)
rows() { awk '/^rank +s\/r\/t/ { on = 1; next } on && /^[0-9]+ / { print } /^\(MiB/ { on = 0 }' "$1"; }
rows "$dir/one.out" > "$dir/one.rows"
rows "$dir/four.out" > "$dir/four.rows"
rows "$dir/two.out" > "$dir/two.rows"
[ "$(wc -l < "$dir/one.rows")" -eq 1 ] && [ "$(wc -l < "$dir/four.rows")" -eq 4 ] &&
    [ "$(wc -l < "$dir/two.rows")" -eq 4 ] ||
    { echo "FAIL: the memory reports lack their rows"; cat "$dir/one.out" "$dir/four.out" \
        "$dir/two.out"; exit 1; }
read -r _ _ _ _ moments1 _ _ _ _ _ rss1 < "$dir/one.rows"
awk -v m1="$moments1" -v rss1="$rss1" '
    { rank = $1; moments = $5; total = $9; predicted = $10; rss = $11
      printf "rank %d: moments %.1f MiB (%.3f of one process'"'"'s %.1f), peak RSS %.1f MiB " \
             "(%.3fx of %.1f), allocated %.1f MiB, predicted %.1f\n", rank, moments, moments / m1,
             m1, rss, rss / rss1, rss1, total, predicted
      if (moments < 0.99 * m1 / 4 || moments > 1.01 * m1 / 4) {
          print "FAIL: rank " rank "'"'"'s moments are not 1/4 of one process'"'"'s"; bad = 1 }
      if (rss > 0.7 * rss1) {
          print "FAIL: rank " rank "'"'"'s peak RSS is above 0.7x of one process'"'"'s"; bad = 1 }
      if (total > 1.1 * predicted || total < 0.9 * predicted) {
          print "FAIL: rank " rank "'"'"'s bytes are not within 10% of the prediction"; bad = 1 } }
    END { exit bad }' "$dir/four.rows" || exit 1
echo "1 stage x 4 replicas, zero 1, under mpirun: moments 1/4 and peak RSS at most 0.7x per rank"
paste "$dir/four.rows" "$dir/two.rows" | awk '
    { rank = $1; g1 = $4; rss1 = $11; g2 = $15; total = $20; predicted = $21; rss2 = $22
      printf "rank %d, zero 2: gradients %.1f MiB (zero 1 %.1f), allocated %.1f MiB (predicted " \
             "%.1f), peak RSS %.1f MiB (zero 1 %.1f)\n", rank, g2, g1, total, predicted, rss2, rss1
      if (rss2 > rss1 - 0.5 * (g1 - g2)) {
          print "FAIL: rank " rank "'"'"'s peak RSS at zero 2 does not drop with its gradients"; bad = 1 }
      if (total > 1.1 * predicted || total < 0.9 * predicted) {
          print "FAIL: rank " rank "'"'"'s bytes at zero 2 are not within 10% of the prediction"; bad = 1 } }
    END { exit bad }' || exit 1
echo "zero 2: each rank's peak RSS drops by at least half the gradients it no longer keeps"
