#!/usr/bin/env bash
# test_mpi_tcp_hosts: training across 2 and 4 test hosts (network namespaces
# joined by a bridge, tests/testhosts.sh), so every message crosses TCP
# instead of shared memory:
#   - every synchronous schedule at P = 2 and P = 4 writes a checkpoint
#     byte-identical to the same run on threads;
#   - 1f1b at P = 2 equals the shared-memory mpirun run too;
#   - 2 stages x 2 replicas on 4 hosts equal the same replicas on threads.
# Skipped (77) where namespaces cannot be made or mpirun is missing.
set -euo pipefail
source "$(dirname "$0")/testhosts.sh"
testhosts_need_training
export PIPETRAIN_TIMEOUT=60
dir=$(mktemp -d)
trap 'testhosts_down; rm -rf "$dir"' EXIT
common=(--layers 8 --heads 2 --embd 16 --seq 16 --batch 8 --microbatches 4 --steps 2
        --lr 3e-3 --seed 2 --threads 1 --quiet --data "$corpus")

for hosts in 2 4; do
    testhosts_up $hosts
    for s in gpipe 1f1b interleaved loopedbfs zbh1 zbh2 zbv zb2p; do
        "$PIPETRAIN" train "${common[@]}" --stages $hosts --schedule $s --save "$dir/thr.safetensors" \
            >/dev/null
        "${TH_MPIRUN[@]}" -np $hosts "$PIPETRAIN" train "${common[@]}" --stages $hosts --schedule $s \
            --save "$dir/tcp.safetensors" > "$dir/out" 2>&1 ||
            { echo "FAIL: $s on $hosts hosts:"; cat "$dir/out"; exit 1; }
        cmp "$dir/thr.safetensors" "$dir/tcp.safetensors" ||
            { echo "FAIL: $s on $hosts hosts over TCP differs from threads"; exit 1; }
    done
    echo "$hosts hosts over TCP: gpipe 1f1b interleaved loopedbfs zbh1 zbh2 zbv zb2p" \
         "byte-identical to threads"
    if [ $hosts -eq 2 ]; then
        mpirun --oversubscribe -np 2 "$PIPETRAIN" train "${common[@]}" --stages 2 \
            --save "$dir/shm.safetensors" >/dev/null
        "${TH_MPIRUN[@]}" -np 2 "$PIPETRAIN" train "${common[@]}" --stages 2 \
            --save "$dir/tcp.safetensors" >/dev/null
        cmp "$dir/shm.safetensors" "$dir/tcp.safetensors" ||
            { echo "FAIL: 1f1b over TCP differs from shared memory"; exit 1; }
        echo "2 hosts over TCP: 1f1b byte-identical to the shared-memory run"
    else
        "$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 --save "$dir/thr.safetensors" \
            >/dev/null
        "${TH_MPIRUN[@]}" -np 4 "$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 \
            --save "$dir/tcp.safetensors" >/dev/null
        cmp "$dir/thr.safetensors" "$dir/tcp.safetensors" ||
            { echo "FAIL: 2 stages x 2 replicas over TCP differ from threads"; exit 1; }
        echo "4 hosts over TCP: 2 stages x 2 replicas byte-identical to threads"
    fi
    testhosts_down
done
echo ok
