#!/usr/bin/env bash
# test_mpi_tcp_launches: 50 launches in a row of a short 2-stage training
# on 2 test hosts over TCP (tests/testhosts.sh) all succeed: the launch
# recipe (a session folder per host, no hwloc topology sharing) is not
# flaky. Labelled mpi (left out of the fast suite); about a second a launch.
# ctest: slow
set -euo pipefail
source "$(dirname "$0")/testhosts.sh"
testhosts_need_training
export PIPETRAIN_TIMEOUT=60
dir=$(mktemp -d)
trap 'testhosts_down; rm -rf "$dir"' EXIT
testhosts_up 2
launches=${PT_LAUNCHES:-50}
for i in $(seq "$launches"); do
    timeout 120 "${TH_MPIRUN[@]}" -np 2 "$PIPETRAIN" train --stages 2 --layers 2 --heads 2 \
        --embd 16 --seq 16 --batch 4 --microbatches 2 --steps 1 --seed "$i" --threads 1 --quiet \
        --data "$corpus" > "$dir/out" 2>&1 ||
        { echo "FAIL: launch $i of $launches failed:"; cat "$dir/out"; exit 1; }
    grep -q '^done:' "$dir/out" || { echo "FAIL: launch $i did not finish:"; cat "$dir/out"; exit 1; }
done
echo "$launches launches in a row on 2 hosts over TCP: all finished"
echo ok
