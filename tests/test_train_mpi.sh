#!/usr/bin/env bash
# test_train_mpi: `mpirun -np N pipetrain train --stages P [--replicas D]`:
# one stage per rank gives a checkpoint byte-identical to the same run on
# threads (P = 2 and P = 4), only one rank reports, P = 2 with D = 2
# replicas trains to the single worker's losses (to float rounding: the
# replicas' gradient sum adds in another order), and pipedream runs with
# replicas (1F1B-RR).
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

"$PIPETRAIN" train "${common[@]}" --metrics "$dir/one.jsonl" >/dev/null
"${mpi[@]}" 4 "$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 \
    --metrics "$dir/dp.jsonl" >/dev/null
a=$(losses "$dir/one.jsonl"); b=$(losses "$dir/dp.jsonl")
echo "one worker: $a"
echo "P=2 D=2:    $b"
awk -v a="$a" -v b="$b" 'BEGIN { n = split(a, x); m = split(b, y); if (n != m || n != 3) exit 1;
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-4) exit 1 } }' ||
    { echo "FAIL: replicas drifted from one worker"; exit 1; }

# PipeDream's 1F1B-RR: asynchronous, replicas updating together each round
"${mpi[@]}" 4 "$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 --schedule pipedream \
    --save "$dir/rr.safetensors" > "$dir/rr.out"
grep -q '^done:' "$dir/rr.out" && [ -s "$dir/rr.safetensors" ] ||
    { echo "FAIL: pipedream with replicas"; cat "$dir/rr.out"; exit 1; }
echo "pipedream 1F1B-RR: $(grep '^done:' "$dir/rr.out")"

set +e
out=$("${mpi[@]}" 2 "$PIPETRAIN" train "${common[@]}" --stages 3 2>&1); rc=$?
set -e
[ "$rc" -ne 0 ] && echo "$out" | grep -q "3" || { echo "FAIL: 3 stages on 2 ranks: $rc $out"; exit 1; }
echo "refused: $(echo "$out" | grep -m1 pipetrain)"
echo ok
