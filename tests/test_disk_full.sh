#!/usr/bin/env bash
# test_disk_full: a save that meets a full disk fails with a message saying
# so, the run ends non-zero, and the checkpoint saved before still loads and
# still says its step. A 2 MiB tmpfs holds one checkpoint set of the model
# (about 1.4 MiB) but not a second beside it while it is written; the run
# saves every step. Needs root (mount); skipped elsewhere.
set -euo pipefail
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "skipped: mounting a tmpfs needs root"; exit 77; }
dir=$(mktemp -d)
disk="$dir/disk"
mkdir "$disk"
mount -t tmpfs -o size=2m tmpfs "$disk" 2>/dev/null || { rmdir "$disk"; rm -rf "$dir";
    echo "skipped: cannot mount a tmpfs here"; exit 77; }
trap 'umount "$disk"; rm -rf "$dir"' EXIT

set +e
"$PIPETRAIN" train --layers 2 --heads 2 --embd 64 --seq 32 --batch 4 --microbatches 2 \
    --steps 4 --seed 3 --data "$corpus" --save "$disk/ck" --save-every 1 > "$dir/out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "FAIL: the run ended 0 with a full disk"; cat "$dir/out"; exit 1; }
grep -qi "no space" "$dir/out" || { echo "FAIL: no message about the disk:"; cat "$dir/out"; exit 1; }
echo "the run ended $rc: $(grep -i 'no space' "$dir/out" | head -1)"
"$PIPETRAIN" merge "$disk/ck" "$dir/ck.safetensors" ||
    { echo "FAIL: the checkpoint saved before does not load"; exit 1; }
step=$(sed -n 's/.*"step": *\([0-9]*\).*/\1/p' "$disk/ck/trainer_state.json" | head -1)
[ "$step" = 1 ] || { echo "FAIL: the surviving set says step $step, not 1"; exit 1; }
echo "the set of step 1 still loads"
echo ok
