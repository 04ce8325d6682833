#!/usr/bin/env bash
# test_hf_finetune: the round trip a Hugging Face user makes. pipetrain
# trains a small GPT-2 and saves a folder; transformers' GPT2Config loads
# it and safetensors' safe_open finds weights only, metadata format "pt"
# (tests/hf_gpt2.py check-saved). The folder, re-saved the way transformers
# saves a model (GPT2Config.save_pretrained, safetensors' save_file under
# GPT2LMHeadModel's names), is what `train --init-from DIR --stages 2`
# fine-tunes on another text: its first loss is the loaded model's (well
# below a fresh model's), the loss falls, and the saved folder loads back
# and scores lower on the new text than the model it started from.
# Skipped (77) when the Python packages cannot be installed.
set -euo pipefail
corpus=/usr/share/games/fortunes
newtext=/usr/share/common-licenses
[ -d "$corpus" ] && [ -d "$newtext" ] ||
    { echo "skipped: $corpus or $newtext is missing (scripts/install-deps.sh)"; exit 77; }
source "$PT_SOURCE_DIR/tests/python_env.sh" "PyPI's transformers, safetensors and numpy"
hf="$py $PT_SOURCE_DIR/tests/hf_gpt2.py"
export TRANSFORMERS_VERBOSITY=error
model=(--layers 2 --heads 4 --embd 64 --seq 64)
"$PIPETRAIN" train "${model[@]}" --batch 8 --steps 60 --lr 3e-3 --data "$corpus" \
    --save "$dir/pre" --quiet >/dev/null
$hf check-saved "$dir/pre"

# the folder as transformers would save it: its config, its weights file
"$py" - "$dir/pre" "$dir/hf" <<'EOF'
import os, sys
from safetensors import safe_open
from safetensors.numpy import save_file
from transformers import GPT2Config
src, dst = sys.argv[1], sys.argv[2]
GPT2Config.from_pretrained(src).save_pretrained(dst)
with safe_open(os.path.join(src, "model.safetensors"), "np") as f:
    w = {k: f.get_tensor(k) for k in f.keys()}
save_file(w, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
EOF

loss() { "$PIPETRAIN" eval --load "$1" --data "$newtext" --batch 8 --batches 4 | awk '{ print $2 }'; }
start=$(loss "$dir/hf")
"$PIPETRAIN" train --init-from "$dir/hf" --stages 2 --microbatches 4 --batch 8 --steps 30 \
    --lr 1e-3 --data "$newtext" --metrics "$dir/m.jsonl" --save "$dir/tuned" --quiet >/dev/null
first=$(head -1 "$dir/m.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/')
last=$(tail -1 "$dir/m.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/')
end=$(loss "$dir/tuned")
echo "eval on the new text: $start before, $end after; training loss $first at step 1, $last at 30"
# a fresh byte-level model starts near ln 256 = 5.55; the loaded one far below
awk -v a="$first" 'BEGIN { exit !(a < 4.5) }' ||
    { echo "FAIL: the first loss $first is not the loaded model's"; exit 1; }
awk -v a="$last" -v b="$first" 'BEGIN { exit !(a < b) }' ||
    { echo "FAIL: fine-tuning did not lower the loss ($first -> $last)"; exit 1; }
awk -v a="$end" -v b="$start" 'BEGIN { exit !(a < b) }' ||
    { echo "FAIL: the tuned model scores $end, not below the loaded model's $start"; exit 1; }
$hf check-saved "$dir/tuned"
"$PIPETRAIN" generate --load "$dir/tuned" --prompt "the " --tokens 20 --stages 2 >/dev/null
echo "ok: a transformers-saved GPT-2 fine-tunes at P = 2 and the saved folder loads back"
