#!/usr/bin/env bash
# test_merge_cli: `train --save DIR` writes a checkpoint set (a folder);
# `pipetrain merge DIR OUT.safetensors` turns it into the very bytes
# `train --save OUT.safetensors` writes; a run resumed from a set ends
# byte-identical to an uninterrupted one; bad input exits 2 (usage) or 1 (a
# set that is refused), with a message.
set -euo pipefail
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing (scripts/install-deps.sh installs it)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 2 --embd 32 --seq 32 --batch 8 --microbatches 2 --lr 1e-3
        --warmup 2 --decay-steps 8 --seed 5 --data "$corpus")

"$PIPETRAIN" train "${common[@]}" --steps 8 --save "$dir/full.safetensors" >/dev/null
"$PIPETRAIN" train "${common[@]}" --steps 4 --save "$dir/half" >/dev/null
[ -f "$dir/half/model.safetensors" ] && [ -f "$dir/half/trainer_state.json" ] &&
    [ -f "$dir/half/config.json" ] || { echo "FAIL: --save DIR wrote no set"; ls -R "$dir"; exit 1; }
"$PIPETRAIN" train "${common[@]}" --steps 8 --resume "$dir/half" --save "$dir/resumed" >/dev/null
"$PIPETRAIN" merge "$dir/resumed" "$dir/merged.safetensors"
cmp "$dir/full.safetensors" "$dir/merged.safetensors" ||
    { echo "FAIL: the set resumed and merged differs from the uninterrupted run's file"; exit 1; }

expect_exit() { # status, text the message must hold, arguments...
    local want=$1 needle=$2 out rc=0
    shift 2
    out=$("$PIPETRAIN" merge "$@" 2>&1) || rc=$?
    [ "$rc" -eq "$want" ] || { echo "FAIL: merge $* exited $rc, expected $want: $out"; exit 1; }
    echo "$out" | grep -q -- "$needle" || { echo "FAIL: merge $*: '$needle' not in: $out"; exit 1; }
}
expect_exit 2 "expected SET_DIR" "$dir/half"
expect_exit 2 "not a folder" "$dir/nothing" "$dir/x.safetensors"
expect_exit 2 "does not end in .safetensors" "$dir/half" "$dir/x.bin"
rm "$dir/half/optimizer.safetensors" "$dir/half/model.safetensors"
expect_exit 1 "not a checkpoint set" "$dir/half" "$dir/x.safetensors"
[ ! -e "$dir/x.safetensors" ] || { echo "FAIL: a refused merge wrote its output"; exit 1; }
"$PIPETRAIN" merge --help | grep -q "usage: pipetrain merge" || { echo "FAIL: no --help"; exit 1; }
echo "ok: a set saved, resumed and merged is byte-identical to the single file"
