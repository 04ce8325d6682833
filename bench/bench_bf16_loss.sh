#!/usr/bin/env bash
# bench_bf16_loss: does bf16 train as fp32 does? GPT-small (4 layers, 384
# channels, 6 heads, context 256, vocabulary 256: bytes) for 300 AdamW steps
# on the fortunes corpus, batch 8 in 4 micro-batches, 2 pipeline stages,
# once in fp32 and once in bf16 from the same initialisation and data order;
# then every logged step's training loss side by side, and whether bf16's
# is within 2% of fp32's at every step after step 50. Long on 2 cores (about
# 10 minutes): a benchmark, not a test.
# Usage: bench/bench_bf16_loss.sh [path to pipetrain] [steps] (default build/pipetrain 300)
set -euo pipefail
P=${1:-build/pipetrain}
steps=${2:-300}
corpus=/usr/share/games/fortunes
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
model=(--layers 4 --embd 384 --heads 6 --seq 256 --batch 8 --microbatches 4 --stages 2
       --steps "$steps" --lr 1e-3 --warmup 20 --eval-every 0 --eval-batches 2 --quiet --data "$corpus")
for prec in fp32 bf16; do
    "$P" train "${model[@]}" --precision "$prec" --metrics "$out/$prec.jsonl" > "$out/$prec.out"
    grep '^done' "$out/$prec.out" | sed "s/^/$prec: /"
done
loss() { sed -n 's/.*"step":\([0-9]*\),"loss":\([0-9.eE+-]*\).*/\1 \2/p' "$1"; }
join <(loss "$out/fp32.jsonl") <(loss "$out/bf16.jsonl") | awk -v steps="$steps" '
    BEGIN { printf "%6s %10s %10s %8s\n", "step", "fp32", "bf16", "rel" }
    { rel = ($3 - $2) / $2; a = rel < 0 ? -rel : rel
      if ($1 % 10 == 0 || $1 == 1) printf "%6d %10.4f %10.4f %+8.4f\n", $1, $2, $3, rel
      if ($1 > 50 && a > worst) { worst = a; at = $1 }
      if ($1 > 50 && a > 0.02) bad++ }
    END { printf "after step 50: largest |bf16 - fp32| / fp32 = %.4f (step %d); %s\n", worst, at,
                 bad ? bad " steps beyond 2%: FAIL" : "every step within 2%: ok"
          exit bad ? 1 : 0 }'
