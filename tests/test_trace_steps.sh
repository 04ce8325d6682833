#!/usr/bin/env bash
# test_trace_steps: `train --trace FILE --trace-steps A:B` writes one trace
# of steps A to B (counted from 1, as the progress line and the metrics log
# count them) on one time axis: it parses as JSON, its actions are exactly
# those of steps A..B (each step the same count, 2 stages x 4 micro-batches
# of 1f1b), its step slices follow one another in time, and each worker has
# its activation and transport counters. N alone traces step N, no
# --trace-steps the last step; a validation inside the range changes
# nothing. Malformed ranges, a range past --steps, --trace-steps without
# --trace and a range a resumed run has already passed are refused, naming
# the flag.
set -euo pipefail
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing (scripts/install-deps.sh installs it)"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: no python3 to read the trace's JSON"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 2 --embd 16 --seq 16 --batch 8 --microbatches 4 --stages 2
        --schedule 1f1b --lr 3e-3 --seed 2 --data "$corpus" --eval-every 3)

# check FILE FIRST LAST: the trace holds the actions of steps FIRST..LAST
check() {
    python3 - "$@" <<'PY'
import json, sys
path, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
events = json.load(open(path))["traceEvents"]
want = list(range(first, last + 1))
actions = [e for e in events if e["ph"] == "X" and e["cat"] in ("F", "B", "W", "BW")]
per_step = {}
for e in actions:
    per_step.setdefault(e["args"]["step"], []).append(e)
assert sorted(per_step) == want, f"actions of steps {sorted(per_step)}, expected {want}"
# worker 0: F and BW of 4 micro-batches; worker 1: F, B and W
counts = {s: len(a) for s, a in per_step.items()}
assert all(n == 2 * 4 + 3 * 4 for n in counts.values()), counts
slices = sorted((e for e in events if e["ph"] == "X" and e["cat"] == "step"),
                key=lambda e: e["ts"])
assert [e["args"]["step"] for e in slices] == want, [e["args"]["step"] for e in slices]
for a, b in zip(slices, slices[1:]):
    assert a["ts"] + a["dur"] <= b["ts"], f"step {a['args']['step']} overlaps the next"
for e in actions:  # each action inside its step's slice
    s = slices[want.index(e["args"]["step"])]
    assert s["ts"] <= e["ts"] + 1e-3 and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1e-3, e
counters = {e["name"] for e in events if e["ph"] == "C"}
expect = {f"worker {w} {k}" for w in (0, 1) for k in ("activations", "transport")}
assert counters == expect, counters
assert slices[0]["ts"] >= 0 and all(e["ts"] >= 0 for e in events if "ts" in e)
print(f"{path}: steps {want}, {len(actions)} actions, counters {sorted(counters)}")
PY
}

"$PIPETRAIN" train "${common[@]}" --steps 6 --trace "$dir/range.json" --trace-steps 2:4 \
    --metrics "$dir/m.jsonl" >/dev/null
check "$dir/range.json" 2 4
"$PIPETRAIN" train "${common[@]}" --steps 6 --trace "$dir/one.json" --trace-steps 5 --quiet \
    >/dev/null
check "$dir/one.json" 5 5
"$PIPETRAIN" train "${common[@]}" --steps 6 --trace "$dir/last.json" --quiet \
    --save "$dir/ck" >/dev/null
check "$dir/last.json" 6 6
"$PIPETRAIN" train "${common[@]}" --steps 6 --trace "$dir/all.json" --trace-steps 1:6 --quiet \
    >/dev/null
check "$dir/all.json" 1 6

# refused: malformed, past --steps, without --trace; nothing is written
refused() { # WHY ARGS...
    local why=$1 out rc
    shift
    set +e
    out=$("$PIPETRAIN" train "${common[@]}" "$@" 2>&1 >/dev/null)
    rc=$?
    set -e
    [ "$rc" -eq 2 ] && [[ $out == *"$why"* ]] ||
        { echo "FAIL: train $* -> status $rc, expected 2 and '$why': $out"; exit 1; }
    echo "refused: $out"
}
for bad in 0:2 4:2 5:7 a:b 2: :3 1:2:3 "" " 2:3" 2-3 0x1:2; do
    refused "--trace-steps '$bad'" --steps 6 --trace "$dir/bad.json" --trace-steps "$bad"
done
refused "--trace-steps" --steps 6 --trace-steps 2:3
[ ! -e "$dir/bad.json" ] || { echo "FAIL: a refused run wrote its trace"; exit 1; }

# a resumed run (after step 6) traces its own steps only
refused "resumes after step 6" --steps 9 --resume "$dir/ck" \
    --trace "$dir/bad.json" --trace-steps 5:7
"$PIPETRAIN" train "${common[@]}" --steps 9 --resume "$dir/ck" --quiet \
    --trace "$dir/resumed.json" --trace-steps 7:8 >/dev/null
check "$dir/resumed.json" 7 8
echo "ok"
