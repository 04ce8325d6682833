#!/usr/bin/env bash
# test_train_pipelined: `pipetrain train --stages P` from the command line:
# every synchronous schedule trains to the single worker's losses (to float
# rounding), a hand-written schedule file runs, a bad balance is refused
# naming the block count, the trace is valid JSON with one track per worker,
# a checkpoint saved at P = 2 resumes at P = 1, and generation across 3 stages
# samples what one worker samples; the partition, given or chosen, is
# reported; --quiet prints only the summary.
set -euo pipefail
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing (scripts/install-deps.sh installs it)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 2 --embd 16 --seq 16 --batch 8 --microbatches 4 --steps 4
        --lr 3e-3 --seed 2 --data "$corpus")
losses() { sed 's/.*"loss":\([0-9.]*\).*/\1/' "$1" | tr '\n' ' '; }
close() { # two loss lists agree to 1e-4
    awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x); split(b, y);
        for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-4) exit 1 } }'
}

"$PIPETRAIN" train "${common[@]}" --metrics "$dir/one.jsonl" >/dev/null
ref=$(losses "$dir/one.jsonl")
echo "one worker: $ref"
run() { # name, flags...
    local name=$1; shift
    "$PIPETRAIN" train "${common[@]}" "$@" --metrics "$dir/$name.jsonl" > "$dir/$name.out"
    got=$(losses "$dir/$name.jsonl")
    close "$ref" "$got" || { echo "FAIL: $name: $got"; exit 1; }
    echo "$name: $got"
}
run gpipe --stages 2 --schedule gpipe
run 1f1b --stages 2 --schedule 1f1b --trace "$dir/trace.json"
run zbh1-checkpointed --stages 2 --schedule zbh1 --checkpoint-activations
run interleaved --stages 2 --schedule interleaved --virtual 2
run zbv --stages 2 --schedule zbv
run balanced --stages 3 --schedule 1f1b --balance 1,2,1
run file --stages 2 --schedule-file "$PT_TEST_DATA/pipeline/v_shape_2x3.txt" --balance 1,1,2
grep -q "predicted" "$dir/1f1b.out" || { echo "FAIL: no bubble report"; exit 1; }
# the partition the run trained with: the one given, or the partitioner's
# cut of the model's 4 blocks into 2 chunks
grep -qx "partition: --balance 1,2,1" "$dir/balanced.out" ||
    { echo "FAIL: the given balance is not reported"; cat "$dir/balanced.out"; exit 1; }
cut=$(sed -n 's/^partition: --balance \([0-9]*\),\([0-9]*\)$/\1 \2/p' "$dir/1f1b.out")
read -r a b <<< "$cut"
[ -n "$cut" ] && [ $((a + b)) -eq 4 ] && [ "$a" -ge 1 ] && [ "$b" -ge 1 ] ||
    { echo "FAIL: the partitioner's cut is not reported: '$cut'"; cat "$dir/1f1b.out"; exit 1; }
echo "partitions: given 1,2,1; chosen $a,$b"

if command -v python3 >/dev/null; then
    python3 - "$dir/trace.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
actions = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("F", "B", "W", "BW")]
tracks = {e["tid"] for e in actions}
assert len(tracks) == 2, tracks
# worker 0: F and BW of 4 micro-batches; worker 1: F, B and W (its fused
# backward runs as B, the gradient's send, W)
assert len(actions) == 2 * 4 + 3 * 4, len(actions)
# then on each track what closes the step: the tied copies' sum, the norm, the step
for tid in tracks:
    closing = sorted((e for e in events if e.get("cat") == "step end" and e["tid"] == tid),
                     key=lambda e: e["ts"])
    assert [e["name"] for e in closing] == ["T0-1", "N", "S"], (tid, closing)
    last = max(e["ts"] + e["dur"] for e in actions if e["tid"] == tid)
    assert closing[0]["ts"] >= last - 1e-3, (tid, closing[0]["ts"], last)
steps = [e["args"]["step"] for e in events if e.get("cat") == "step"]
assert steps == [4] and all(e["args"]["step"] == 4 for e in actions), steps
print("trace: %d actions on %d tracks" % (len(actions), len(tracks)))
PY
fi

set +e
out=$("$PIPETRAIN" train "${common[@]}" --stages 2 --balance 1,2 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "4" <<< "$out" || { echo "FAIL: bad balance: $rc $out"; exit 1; }
echo "refused: $out"

"$PIPETRAIN" train "${common[@]}" --stages 2 --steps 2 --decay-steps 4 \
    --save "$dir/p2" >/dev/null
"$PIPETRAIN" train "${common[@]}" --resume "$dir/p2" --save "$dir/p1.safetensors" \
    --metrics "$dir/resumed.jsonl" >/dev/null
close "$(losses "$dir/one.jsonl" | cut -d' ' -f3-4)" "$(losses "$dir/resumed.jsonl")" ||
    { echo "FAIL: resuming a P = 2 checkpoint at P = 1 drifted"; exit 1; }

a=$("$PIPETRAIN" generate --load "$dir/p1.safetensors" --prompt "Who " --tokens 40 --seed 4)
b=$("$PIPETRAIN" generate --load "$dir/p1.safetensors" --prompt "Who " --tokens 40 --seed 4 --stages 3)
[ "$a" = "$b" ] || { echo "FAIL: pipelined generation differs: '$a' vs '$b'"; exit 1; }

# --quiet: the summary at the end and nothing while training
out=$("$PIPETRAIN" train "${common[@]}" --stages 2 --quiet)
! grep -q '^step ' <<< "$out" && grep -q '^done:' <<< "$out" ||
    { echo "FAIL: --quiet printed progress or no summary: $out"; exit 1; }
echo "ok"
