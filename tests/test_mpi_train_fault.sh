#!/usr/bin/env bash
# test_mpi_train_fault: `mpirun -np 2 pipetrain train --stages 2` loses a rank
# to kill -9 in the middle of training, after a checkpoint has been written:
# the job ends non-zero within 30 s, its output names the dead rank, and the
# checkpoint on disk still loads (`pipetrain generate --load`), since it was
# renamed into place whole. Rank 1 is the one killed (found among mpirun's
# children by OMPI_COMM_WORLD_RANK in its environment).
source "$(dirname "$0")/mpi_kill.sh"
ck="$dir/ck.safetensors"

mpirun --oversubscribe -np 2 "$PIPETRAIN" train --stages 2 --layers 2 --heads 4 --embd 128 \
    --seq 64 --batch 8 --microbatches 4 --steps 200 --lr 1e-3 --seed 3 --data "$corpus" \
    --save "$ck" --save-every 2 > "$dir/out" 2>&1 &
job=$!

# the first checkpoint (step 2)
for _ in $(seq 600); do
    [ -f "$ck" ] && break
    kill -0 "$job" 2>/dev/null || { echo "FAIL: the job ended before a checkpoint"; cat "$dir/out"; exit 1; }
    sleep 0.05
done
[ -f "$ck" ] || { echo "FAIL: no checkpoint after 30 s"; cat "$dir/out"; exit 1; }

victim=$(rank_pid "$job" 1)
[ -n "$victim" ] || { echo "FAIL: rank 1's process not found"; cat "$dir/out"; exit 1; }
kill -0 "$job" 2>/dev/null || { echo "FAIL: the job ended before the kill"; cat "$dir/out"; exit 1; }
kill -9 "$victim"
killed_at=$(date +%s.%N)

set +e
ended=
for _ in $(seq 600); do
    if ! kill -0 "$job" 2>/dev/null; then
        ended=$(date +%s.%N)
        break
    fi
    sleep 0.05
done
[ -n "$ended" ] || { echo "FAIL: the job still runs 30 s after rank 1 died"; cat "$dir/out"; exit 1; }
wait "$job"; rc=$?
job=
set -e
secs=$(awk -v a="$killed_at" -v b="$ended" 'BEGIN { printf "%.1f", b - a }')
echo "rank 1 (pid $victim) killed; mpirun exited $rc after ${secs} s"
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0 after losing a rank"; cat "$dir/out"; exit 1; }
grep -q '^done:' "$dir/out" && { echo "FAIL: the run finished instead of failing"; exit 1; }
grep -Eq 'rank 1[^0-9]|\[\[[0-9]+,[0-9]+\],1\]' "$dir/out" ||
    { echo "FAIL: the output does not name rank 1:"; cat "$dir/out"; exit 1; }
echo "named: $(grep -Em1 'rank 1[^0-9]|\[\[[0-9]+,[0-9]+\],1\]' "$dir/out")"

"$PIPETRAIN" generate --load "$ck" --tokens 5 > "$dir/gen" 2>&1 ||
    { echo "FAIL: the checkpoint does not load:"; cat "$dir/gen"; exit 1; }
echo "checkpoint loads: generate wrote $(wc -c < "$dir/gen") bytes"
echo ok
