#!/usr/bin/env bash
# test_mpi_tcp_link: a 2-host training over TCP (tests/testhosts.sh) with
# each link limited to 100 Mb/s: the ping-pong at the start measures the link
# within 25% of 100 Mb/s (tbf's rate), the last metrics line carries it, and
# each worker's last step ends within -20%/+25% of when the program simulator,
# playing the program the workers ran, has it end
# for that link (each transfer, 512 KiB, is above tbf's burst and takes
# 42 ms on the wire, most of the step: a simulator that left the link out
# would predict less than half). The same run without a
# limit measures a link faster than 200 Mb/s.
set -euo pipefail
source "$(dirname "$0")/testhosts.sh"
testhosts_need_training
dir=$(mktemp -d)
cleanup() {
    testhosts_down
    rm -rf "$dir"
}
trap cleanup EXIT

train() {
    "${TH_MPIRUN[@]}" -np 2 "$PIPETRAIN" train --stages 2 --balance 2,2 --layers 2 --heads 4 \
        --embd 256 --seq 128 --batch 32 --microbatches 8 --steps 3 --lr 1e-3 --seed 3 \
        --threads 1 --data "$corpus" --metrics "$1" > "$dir/out" 2>&1 ||
        { echo "FAIL: training exited $?"; cat "$dir/out"; exit 1; }
}
# field NAME of the metrics log's last line
field() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])[sys.argv[2]])' "$1" "$2"; }

testhosts_up 2 100mbit
train "$dir/slow.jsonl"
grep -q "link (ping-pong)" "$dir/out" || { echo "FAIL: no link line"; cat "$dir/out"; exit 1; }
bw=$(field "$dir/slow.jsonl" link_bytes_per_s)
awk -v b="$bw" 'BEGIN { r = b * 8 / 100e6; exit !(r > 0.75 && r < 1.25) }' ||
    { echo "FAIL: the link measured $bw bytes/s, want 100 Mb/s (12.5e6) within 25%"; exit 1; }
for w in 0 1; do
    s=$(field "$dir/slow.jsonl" worker${w}_step_s)
    p=$(field "$dir/slow.jsonl" worker${w}_predicted_step_s)
    echo "worker $w: last step $s s, predicted $p s (link $bw bytes/s)"
    awk -v s="$s" -v p="$p" 'BEGIN { exit !(p > 0 && s / p > 0.8 && s / p < 1.25) }' ||
        { echo "FAIL: worker $w took $s s, predicted $p s"; cat "$dir/out"; exit 1; }
done
testhosts_down

testhosts_up 2
train "$dir/fast.jsonl"
bw=$(field "$dir/fast.jsonl" link_bytes_per_s)
awk -v b="$bw" 'BEGIN { exit !(b * 8 > 200e6) }' ||
    { echo "FAIL: an unlimited link measured $bw bytes/s"; exit 1; }
echo ok
