#!/usr/bin/env bash
# bench_bf16_torch: pipetrain's bf16 against PyTorch's mixed precision on
# the same machine, back to back: bench/gpt_torch.py (GPT-small, 4096 tokens
# a step, torch.autocast("cpu", dtype=torch.bfloat16), 2 threads, and the
# same in float32), then build/bench/bench_bf16 (the same model and tokens a
# step, P = 2). PyTorch lives only in a bench venv under build/ (made here
# once: the CPU wheel, or PyPI's torch where that index cannot be reached);
# nothing of the project imports it.
# Usage: bench/bench_bf16_torch.sh [steps] (default 4)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-4}
source "$here/bench/torch_venv.sh"
torch_venv "$here"
[ -x "$here/build/bench/bench_bf16" ] || cmake --build "$here/build" --target bench_bf16 >/dev/null
"$venv/bin/python" "$here/bench/gpt_torch.py" "$steps" | tee /dev/stderr > "$here/build/torch_bf16.txt"
"$venv/bin/python" "$here/bench/gpt_torch.py" "$steps" --fp32
"$here/build/bench/bench_bf16" "$steps" | tee "$here/build/pipetrain_bf16.txt"
torch=$(sed -n 's/.*tokens\/s \([0-9]*\).*/\1/p' "$here/build/torch_bf16.txt")
# the row of the kernel bf16 takes by default: "bf16 KERNEL step_s tokens/s ..."
kernel=$(sed -n "s/.*bf16's products by default: \([a-z0-9]*\).*/\1/p" "$here/build/pipetrain_bf16.txt")
ours=$(awk -v k="$kernel" '$1 == "bf16" && $2 == k { print $4 }' "$here/build/pipetrain_bf16.txt")
awk -v o="$ours" -v t="$torch" -v k="$kernel" 'BEGIN { printf "\npipetrain bf16 (%s) %d tokens/s, torch autocast bf16 %d: %.2fx\n", k, o, t, o / t }'
