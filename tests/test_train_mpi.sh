#!/usr/bin/env bash
# test_train_mpi: `mpirun -np N pipetrain train --stages P [--replicas D]`:
#   - one stage per rank gives a checkpoint byte-identical to the same run on
#     threads (P = 2 and P = 4), and only one rank reports;
#   - P = 2 with D = 2 replicas: byte-identical to the same replicas on
#     threads, and the single worker's losses to float rounding (the
#     replicas' gradient sum adds in another order);
#   - a set saved under MPI at P = 4 (every rank its own shard) resumes at
#     P = 2 on threads and at P = 1 and ends byte-identical to the
#     uninterrupted run; a weights-only set is refused for --resume unless
#     --fresh-optimizer says so;
#   - each rank holds its own stage: its parameters, gradients and moments
#     are about a quarter of the whole model's at P = 4 (the metrics log's
#     last line), and the planner predicted what it allocated;
#   - pipedream runs with replicas (1F1B-RR);
#   - --precision bf16: gpipe, 1f1b and zbh1 at P = 2 and P = 4, under MPI
#     and on threads, write checkpoints byte-identical to one worker's;
#   - --bind-cores is refused under MPI, pointing at mpirun's --bind-to.
set -euo pipefail
command -v mpirun >/dev/null || { echo "skipped: mpirun is not installed"; exit 77; }
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PIPETRAIN_TIMEOUT=60
mpi=(mpirun --oversubscribe -np)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 2 --embd 16 --seq 16 --batch 8 --microbatches 4 --steps 3
        --lr 3e-3 --seed 2 --data "$corpus")
losses() { sed 's/.*"loss":\([0-9.]*\).*/\1/' "$1" | tr '\n' ' '; }

for p in 2 4; do
    "$PIPETRAIN" train "${common[@]}" --stages $p --save "$dir/thr$p.safetensors" >/dev/null
    "${mpi[@]}" $p "$PIPETRAIN" train "${common[@]}" --stages $p --save "$dir/mpi$p.safetensors" \
        --metrics "$dir/mpi$p.jsonl" > "$dir/mpi$p.out"
    cmp "$dir/thr$p.safetensors" "$dir/mpi$p.safetensors" ||
        { echo "FAIL: P=$p over MPI differs from threads"; exit 1; }
    [ "$(grep -c '^done:' "$dir/mpi$p.out")" -eq 1 ] || { echo "FAIL: not one rank reported"; exit 1; }
    echo "P=$p: MPI checkpoint byte-identical to threads"
done

if "${mpi[@]}" 2 "$PIPETRAIN" train "${common[@]}" --stages 2 --bind-cores > "$dir/bind.out" 2>&1 ||
    ! grep -q -- "--bind-to core" "$dir/bind.out"; then
    echo "FAIL: --bind-cores under MPI was not refused as it should be:"; cat "$dir/bind.out"; exit 1
fi
echo "--bind-cores under MPI: refused"

"$PIPETRAIN" train "${common[@]}" --precision bf16 --save "$dir/bf1.safetensors" >/dev/null
for p in 2 4; do
    for s in gpipe 1f1b zbh1; do
        "${mpi[@]}" $p "$PIPETRAIN" train "${common[@]}" --precision bf16 --stages $p --schedule $s \
            --save "$dir/bfm.safetensors" >/dev/null
        "$PIPETRAIN" train "${common[@]}" --precision bf16 --stages $p --schedule $s \
            --save "$dir/bft.safetensors" >/dev/null
        cmp "$dir/bf1.safetensors" "$dir/bfm.safetensors" && cmp "$dir/bf1.safetensors" "$dir/bft.safetensors" ||
            { echo "FAIL: bf16 $s P=$p (MPI or threads) differs from one worker"; exit 1; }
    done
done
echo "bf16: gpipe, 1f1b, zbh1 at P=2 and P=4, MPI and threads: checkpoints byte-identical to one worker"

"$PIPETRAIN" train "${common[@]}" --metrics "$dir/one.jsonl" >/dev/null
"${mpi[@]}" 4 "$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 \
    --metrics "$dir/dp.jsonl" >/dev/null
a=$(losses "$dir/one.jsonl"); b=$(losses "$dir/dp.jsonl")
echo "one worker: $a"
echo "P=2 D=2:    $b"
awk -v a="$a" -v b="$b" 'BEGIN { n = split(a, x); m = split(b, y); if (n != m || n != 3) exit 1;
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-4) exit 1 } }' ||
    { echo "FAIL: replicas drifted from one worker"; exit 1; }

"$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 --save "$dir/dpthr.safetensors" >/dev/null
"${mpi[@]}" 4 "$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 \
    --save "$dir/dpmpi.safetensors" >/dev/null
cmp "$dir/dpthr.safetensors" "$dir/dpmpi.safetensors" ||
    { echo "FAIL: replicas under MPI differ from replicas on threads"; exit 1; }
echo "P=2 D=2: MPI checkpoint byte-identical to threads"

# a set saved at P = 4 under MPI resumes at P = 2 on threads and at P = 1
run=(--layers 8 --heads 2 --embd 64 --seq 8 --batch 4 --microbatches 4 --lr 3e-3 --seed 5
     --decay-steps 6 --data "$corpus")
"$PIPETRAIN" train "${run[@]}" --steps 6 --save "$dir/whole.safetensors" \
    --metrics "$dir/whole.jsonl" >/dev/null
"${mpi[@]}" 4 "$PIPETRAIN" train "${run[@]}" --steps 3 --stages 4 --balance 3,2,2,3 --save "$dir/set4" \
    --metrics "$dir/set4.jsonl" >/dev/null
[ -f "$dir/set4/model.safetensors.index.json" ] && [ -f "$dir/set4/model-00004-of-00004.safetensors" ] ||
    { echo "FAIL: no 4-shard set:"; ls "$dir/set4"; exit 1; }
"$PIPETRAIN" train "${run[@]}" --steps 6 --stages 2 --resume "$dir/set4" \
    --save "$dir/resumed2.safetensors" >/dev/null
"$PIPETRAIN" train "${run[@]}" --steps 6 --resume "$dir/set4" --save "$dir/resumed1.safetensors" \
    >/dev/null
cmp "$dir/whole.safetensors" "$dir/resumed2.safetensors" &&
    cmp "$dir/whole.safetensors" "$dir/resumed1.safetensors" ||
    { echo "FAIL: resuming the MPI P=4 set does not continue the uninterrupted run"; exit 1; }
echo "set saved under MPI at P=4 resumes at P=2 (threads) and P=1: byte-identical to the uninterrupted run"
mkdir "$dir/weights"
cp "$dir"/set4/model* "$dir"/set4/config.json "$dir/weights/"
set +e
out=$("$PIPETRAIN" train "${run[@]}" --steps 6 --resume "$dir/weights" 2>&1); rc=$?
set -e
[ "$rc" -ne 0 ] && grep -qi "optimizer" <<< "$out" ||
    { echo "FAIL: a weights-only set resumed without --fresh-optimizer: $rc $out"; exit 1; }
"$PIPETRAIN" train "${run[@]}" --steps 4 --resume "$dir/weights" --fresh-optimizer >/dev/null ||
    { echo "FAIL: --fresh-optimizer"; exit 1; }
echo "weights-only set: refused for --resume, accepted with --fresh-optimizer"

# every rank holds a quarter of the model's state, as predicted
python3 - "$dir/whole.jsonl" "$dir/set4.jsonl" <<'PY'
import json, sys
whole = json.loads(open(sys.argv[1]).read().splitlines()[-1])
parts = json.loads(open(sys.argv[2]).read().splitlines()[-1])
total = whole["worker0_bytes"]
for r in range(4):
    got, want = parts["worker%d_bytes" % r], parts["worker%d_predicted_bytes" % r]
    assert abs(got - want) <= 0.1 * want, (r, got, want)
    assert got <= 0.4 * total, ("rank %d holds %d of the whole %d" % (r, got, total))
    print("rank %d: %.0f KiB of the whole model's %.0f KiB (predicted %.0f KiB)"
          % (r, got / 1024, total / 1024, want / 1024))
PY

# PipeDream's 1F1B-RR: asynchronous, replicas updating together each round
"${mpi[@]}" 4 "$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 --schedule pipedream \
    --save "$dir/rr.safetensors" > "$dir/rr.out"
grep -q '^done:' "$dir/rr.out" && [ -s "$dir/rr.safetensors" ] ||
    { echo "FAIL: pipedream with replicas"; cat "$dir/rr.out"; exit 1; }
echo "pipedream 1F1B-RR: $(grep '^done:' "$dir/rr.out")"

set +e
out=$("${mpi[@]}" 2 "$PIPETRAIN" train "${common[@]}" --stages 3 2>&1); rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "3" <<< "$out" || { echo "FAIL: 3 stages on 2 ranks: $rc $out"; exit 1; }
echo "refused: $(echo "$out" | grep -m1 pipetrain)"
echo ok
