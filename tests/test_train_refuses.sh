#!/usr/bin/env bash
# test_train_refuses: usage mistakes get a message naming the problem and
# exit status 2; an unreadable checkpoint exit status 1; nothing is written.
set -uo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "some text to train on, long enough for a few windows of tokens." > "$dir/t.txt"
for i in 1 2 3 4 5 6; do cat "$dir/t.txt" "$dir/t.txt" > "$dir/u.txt"; mv "$dir/u.txt" "$dir/t.txt"; done
fails=0
expect() { # status pattern args...
    local status=$1 pattern=$2; shift 2
    out=$("$PIPETRAIN" "$@" 2>&1); got=$?
    if [ "$got" -ne "$status" ] || ! grep -q -- "$pattern" <<< "$out"; then
        echo "FAIL: pipetrain $* -> status $got, expected $status and '$pattern': $out"; fails=$((fails+1))
    else
        echo "ok: $pattern"
    fi
}
base=(train --layers 1 --heads 2 --embd 8 --seq 8 --steps 1 --data "$dir/t.txt")
expect 2 "cannot be cut into 3 equal micro-batches" "${base[@]}" --batch 16 --microbatches 3
expect 2 "unknown flag '--layer'" train --layer 2
expect 2 "--batch 'x': expected an integer in \[1, " "${base[@]}" --batch x
expect 2 "not a multiple of heads" "${base[@]}" --embd 9
expect 2 "data is required" train --steps 1
expect 2 "expected adamw or sgd" "${base[@]}" --optimizer adam
echo "not a checkpoint" > "$dir/bad.safetensors"
expect 1 "bad.safetensors" generate --load "$dir/bad.safetensors"
expect 1 "bad.safetensors" "${base[@]}" --resume "$dir/bad.safetensors"
expect 1 "missing.txt" train --data "$dir/missing.txt" --steps 1
"$PIPETRAIN" "${base[@]}" --batch 4 --save "$dir/ok.safetensors" >/dev/null || fails=$((fails+1))
cp "$dir/ok.safetensors" "$dir/keep"
# a run that fails at once leaves the checkpoint under its name untouched
"$PIPETRAIN" "${base[@]}" --batch 4 --microbatches 3 --save "$dir/ok.safetensors" >/dev/null 2>&1
cmp -s "$dir/ok.safetensors" "$dir/keep" || { echo "FAIL: checkpoint changed"; fails=$((fails+1)); }
[ -z "$(ls "$dir" | grep '\.tmp')" ] || { echo "FAIL: temporary files left"; fails=$((fails+1)); }
exit $fails
