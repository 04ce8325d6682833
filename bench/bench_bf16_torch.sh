#!/usr/bin/env bash
# bench_bf16_torch: pipetrain's bf16 against PyTorch's mixed precision on
# the same machine, back to back: PyTorch in float32 once, then rounds of
# bench/gpt_torch.py (GPT-small, 4096 tokens a step,
# torch.autocast("cpu", dtype=torch.bfloat16), 2 threads) followed at once
# by build/bench/bench_bf16 (the same model and tokens a step: fp32 and the
# kernel bf16 takes by default at P = 2, and bf16 on one worker with both
# cores' threads). Each round's ratios are taken within
# the round, and the median of the rounds is the figure: on a machine whose
# speed moves from minute to minute (a shared host), one pair says little.
# PyTorch lives only in a bench venv under build/ (made here once: the CPU
# wheel, or PyPI's torch where that index cannot be reached); nothing of the
# project imports it.
# Usage: bench/bench_bf16_torch.sh [steps] [rounds] (default 4 and 3)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-4}
rounds=${2:-3}
source "$here/bench/torch_venv.sh"
torch_venv "$here"
[ -x "$here/build/bench/bench_bf16" ] || cmake --build "$here/build" --target bench_bf16 >/dev/null
out="$here/build/bench_bf16_torch"
mkdir -p "$out"
"$venv/bin/python" "$here/bench/gpt_torch.py" "$steps" --fp32 2>/dev/null
for r in $(seq 1 "$rounds"); do
    "$venv/bin/python" "$here/bench/gpt_torch.py" "$steps" 2>/dev/null > "$out/torch.$r.txt"
    "$here/build/bench/bench_bf16" "$steps" default > "$out/pipetrain.$r.txt"
done
cat "$out/pipetrain.1.txt"
echo
printf '%-6s %11s %15s %12s %15s %9s %12s\n' round "torch bf16" "pipetrain fp32" "bf16 P=2" "bf16 P=1 x 2" "P=2 / torch" "P=1x2 / torch"
for r in $(seq 1 "$rounds"); do
    torch=$(sed -n 's/.*tokens\/s \([0-9]*\).*/\1/p' "$out/torch.$r.txt")
    kernel=$(sed -n "s/.*bf16's products by default: \([a-z0-9]*\).*/\1/p" "$out/pipetrain.$r.txt")
    fp32=$(awk '$1 == "fp32" { print $3 }' "$out/pipetrain.$r.txt")
    two=$(awk -v k="$kernel" '$1 == "bf16" && $2 == k { print $4 }' "$out/pipetrain.$r.txt")
    one=$(awk -v k="$kernel" '$1 == "bf16-P1x2" && $2 == k { print $4 }' "$out/pipetrain.$r.txt")
    awk -v r="$r" -v t="$torch" -v f="$fp32" -v a="$two" -v b="$one" -v k="$kernel" \
        'BEGIN { printf "%-6s %11d %15d %12d %15d %10.2fx %12.2fx\n", r, t, f, a, b, a / t, b / t }'
done | tee "$out/rounds.txt"
echo "(bf16 on $(sed -n "s/.*bf16's products by default: \([a-z0-9]*\).*/\1/p" "$out/pipetrain.1.txt"); tokens/s)"
for col in 6 7; do
    awk -v c="$col" '{ print $c }' "$out/rounds.txt" | tr -d x | sort -g |
        awk -v what="$([ $col = 6 ] && echo "P=2" || echo "P=1 x 2")" '{ v[NR] = $1 }
            END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                  printf "pipetrain bf16 %s / torch autocast bf16, median of %d rounds: %.2fx\n", what, NR, m }'
done
