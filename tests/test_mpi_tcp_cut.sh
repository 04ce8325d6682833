#!/usr/bin/env bash
# test_mpi_tcp_cut: a 2-host training over TCP (tests/testhosts.sh) loses
# host 1's link in the middle of the run, after a checkpoint folder was
# saved. Within 60 s of the cut every process has ended, mpirun included;
# the job exits non-zero; its output names the unreachable peer (rank 1 or
# host 1's address) and the last checkpoint saved; that folder loads.
# The ranks keep their default 30 s deadline: mpirun's TCP keepalives
# (in TH_MPIRUN) notice the lost host first and end the job.
set -euo pipefail
source "$(dirname "$0")/testhosts.sh"
testhosts_need_training
unset PIPETRAIN_TIMEOUT
dir=$(mktemp -d)
job=
cleanup() {
    [ -n "$job" ] && kill -9 "$job" 2>/dev/null
    testhosts_down
    rm -rf "$dir"
}
trap cleanup EXIT
testhosts_up 2
ck=$dir/ck

"${TH_MPIRUN[@]}" -np 2 "$PIPETRAIN" train --stages 2 --layers 2 --heads 4 --embd 128 --seq 64 \
    --batch 8 --microbatches 4 --steps 100000 --lr 1e-3 --seed 3 --threads 1 --data "$corpus" \
    --save "$ck" --save-every 2 > "$dir/out" 2>&1 &
job=$!
# the first checkpoint folder (step 2), then a few more steps
timeout 30 bash -c "until [ -f '$ck/trainer_state.json' ]; do sleep 0.05; done" ||
    { echo "FAIL: no checkpoint after 30 s"; cat "$dir/out"; exit 1; }
sleep 1
kill -0 "$job" 2>/dev/null || { echo "FAIL: the job ended before the cut"; cat "$dir/out"; exit 1; }
testhosts_cut 1
cut_at=$(date +%s.%N)

left() { # processes still running: the launcher and those inside the hosts
    { kill -0 "$job" 2>/dev/null && echo "$job"; ip netns pids "${TH_ID}h0"; ip netns pids "${TH_ID}h1"; } |
        wc -l
}
ended=
for _ in $(seq 1200); do
    if [ "$(left)" -eq 0 ]; then
        ended=$(date +%s.%N)
        break
    fi
    sleep 0.05
done
[ -n "$ended" ] || { echo "FAIL: $(left) processes still run 60 s after the cut"; cat "$dir/out"; exit 1; }
set +e
wait "$job"; rc=$?
set -e
job=
echo "link cut; every process ended after $(awk -v a="$cut_at" -v b="$ended" 'BEGIN { printf "%.1f", b - a }') s, mpirun exit status $rc"
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0 after losing a host"; cat "$dir/out"; exit 1; }
host1=$(sed -n 2p "$TH_HOSTFILE" | cut -d' ' -f1)
peer=$(grep -E "rank 1 |node $host1\$" "$dir/out" | head -1)
[ -n "$peer" ] || { echo "FAIL: the output names neither rank 1 nor $host1:"; cat "$dir/out"; exit 1; }
echo "named: $peer"
saved=$(grep "last checkpoint saved is $ck at step" "$dir/out") ||
    { echo "FAIL: the output does not name the last checkpoint:"; cat "$dir/out"; exit 1; }
echo "$saved"
"$PIPETRAIN" generate --load "$ck" --tokens 5 > "$dir/gen" 2>&1 ||
    { echo "FAIL: the checkpoint does not load:"; cat "$dir/gen"; exit 1; }
echo "checkpoint loads: generate wrote $(wc -c < "$dir/gen") bytes"
echo ok
