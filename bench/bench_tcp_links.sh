#!/usr/bin/env bash
# bench_tcp_links: pipetrain over TCP between 2 test hosts (tests/testhosts.sh)
# with each link unlimited, at 1 Gb/s and at 100 Mb/s (tc tbf), against the
# same run through shared memory: tokens/s per schedule, and each as a ratio
# of the unlimited-link run measured in the same invocation. Needs root.
#   bash bench/bench_tcp_links.sh build/pipetrain [STEPS]
# GPT 4 layers / 384 / 6 heads / context 256, P = 2, M = 16, --threads 1.
set -euo pipefail
pipetrain=$(realpath "${1:?usage: bench_tcp_links.sh PIPETRAIN [STEPS]}")
steps=${2:-6}
here=$(dirname "$0")
corpus=/usr/share/games/fortunes
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run=(train --stages 2 --layers 4 --embd 384 --heads 6 --seq 256 --batch 16 --microbatches 16
     --steps "$steps" --lr 1e-4 --seed 1 --threads 1 --quiet --data "$corpus")

# tokens/s of the steps after the first (the first warms the caches)
tokens_per_s() {
    python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][1:]
print("%.0f" % (sum(r["tokens_per_s"] for r in rows) / len(rows)))' "$1"
}

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '%-8s %-12s %10s %8s\n' schedule link tokens/s ratio
for s in 1f1b zbh1; do
    mpirun --oversubscribe --bind-to none -np 2 "$pipetrain" "${run[@]}" --schedule $s \
        --metrics "$dir/shm.jsonl" >/dev/null
    printf '%-8s %-12s %10s %8s\n' $s "shared mem" "$(tokens_per_s "$dir/shm.jsonl")" -
    base=
    for rate in "" 1gbit 100mbit; do
        bash "$here/../tests/testhosts.sh" 2 ${rate:+--rate $rate} -- bash -c \
            "\$TH_MPIRUN_LINE -np 2 $pipetrain ${run[*]} --schedule $s --metrics $dir/tcp.jsonl" \
            >/dev/null
        t=$(tokens_per_s "$dir/tcp.jsonl")
        [ -n "$base" ] || base=$t
        printf '%-8s %-12s %10s %8.2f\n' $s "${rate:-unlimited}" "$t" \
            "$(awk -v a="$t" -v b="$base" 'BEGIN { print a / b }')"
    done
done
