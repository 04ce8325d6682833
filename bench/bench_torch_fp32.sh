#!/usr/bin/env bash
# bench_torch_fp32: pipetrain in fp32 against PyTorch in fp32 on the same
# machine, back to back: bench/gpt_torch.py --fp32, eager and through
# torch.compile (GPT 4 layers / 384 / 6 heads, context 256, vocabulary 256,
# 16 samples a step, 2 threads), then build/bench/bench_pipeline (the same
# model, 32 samples a step in micro-batches of 2: P = 1 on one and two
# threads, P = 2 under 1f1b with one thread each, and the two cores' FMA
# peak measured in the same run), and the ratios of pipetrain's P = 2 and
# P = 1 on two threads to PyTorch's best. PyTorch lives only in the bench
# venv under build/ (torch_venv.sh).
# Usage: bench/bench_torch_fp32.sh [steps] (default 4)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-4}
source "$here/bench/torch_venv.sh"
torch_venv "$here"
[ -x "$here/build/bench/bench_pipeline" ] || cmake --build "$here/build" --target bench_pipeline >/dev/null
out="$here/build/bench_torch_fp32.txt"
{
    "$venv/bin/python" "$here/bench/gpt_torch.py" "$steps" --fp32
    "$venv/bin/python" "$here/bench/gpt_torch.py" "$steps" --fp32 --compile
    "$here/build/bench/bench_pipeline" 3
} | tee "$out"
awk '/^torch .* tokens\/s/ { for (i = 1; i < NF; i++) if ($i == "tokens/s" && $(i + 1) > best) best = $(i + 1) }
     /^P=1, 2 BLAS threads/ { p1 = $(NF - 4) }
     /^P=2, 1f1b/ { p2 = $(NF - 4) }
     END { printf "\nPyTorch best %d tokens/s; pipetrain P=2 %d (%.2fx), P=1 on 2 threads %d (%.2fx)\n",
                  best, p2, p2 / best, p1, p1 / best }' "$out"
