#!/usr/bin/env bash
# The main job (make run): a small GPT trained on the fortunes corpus for
# about two minutes on a 2-core machine, as a 2-stage 1F1B pipeline (one
# worker per core, 8 micro-batches per step), the loss printed as it falls,
# then a sample of generated text from the checkpoint it saved: a folder
# each stage writes its shard of, which --resume continues and Hugging
# Face's transformers loads as a GPT-2 (docs/huggingface.md).
set -euo pipefail
pipetrain=${1:-build/pipetrain}
corpus=/usr/share/games/fortunes
out=${PT_DEMO_DIR:-build/demo}
mkdir -p "$out"
echo "== training a 4-layer GPT (128 channels, 4 heads, 64-byte context) on $corpus"
echo "   2 pipeline stages, schedule 1f1b, 8 micro-batches of 4 per step"
"$pipetrain" train --model gpt --layers 4 --heads 4 --embd 128 --seq 64 \
    --batch 32 --microbatches 8 --stages 2 --schedule 1f1b \
    --steps 1000 --lr 5e-3 --warmup 20 --seed 1 \
    --data "$corpus" --eval-every 200 \
    --save "$out/gpt" --metrics "$out/metrics.jsonl" --trace "$out/trace.json"
echo
echo "== a sample from $out/gpt ($(ls "$out/gpt" | tr '\n' ' '))"
"$pipetrain" generate --load "$out/gpt" --prompt "The " --tokens 300 \
    --temperature 0.8 --seed 1
echo
echo "metrics: $out/metrics.jsonl; trace of the last step (chrome://tracing, Perfetto): $out/trace.json"
