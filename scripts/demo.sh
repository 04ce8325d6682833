#!/usr/bin/env bash
# The main job (make run): a small GPT trained on the fortunes corpus for
# about two minutes on a 2-core machine, the loss printed as it falls, then a
# sample of generated text from the checkpoint it saved.
set -euo pipefail
pipetrain=${1:-build/pipetrain}
corpus=/usr/share/games/fortunes
out=${PT_DEMO_DIR:-build/demo}
mkdir -p "$out"
echo "== training a 4-layer GPT (128 channels, 4 heads, 128 tokens) on $corpus"
"$pipetrain" train --model gpt --layers 4 --heads 4 --embd 128 --seq 128 \
    --batch 16 --microbatches 1 --steps 400 --lr 3e-3 --warmup 20 --seed 1 \
    --data "$corpus" --eval-every 100 \
    --save "$out/gpt.safetensors" --metrics "$out/metrics.jsonl"
echo
echo "== a sample from $out/gpt.safetensors"
"$pipetrain" generate --load "$out/gpt.safetensors" --prompt "The " --tokens 300 \
    --temperature 0.8 --seed 1
