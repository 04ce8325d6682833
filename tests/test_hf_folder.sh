#!/usr/bin/env bash
# test_hf_folder: GPT-2 folders written by Hugging Face's own libraries
# (transformers' GPT2Config.save_pretrained, safetensors' save_file:
# tests/hf_gpt2.py) load in pipetrain, and pipetrain's loss on fixed batches
# equals an independent float64 forward (numpy) to 1e-6 relative, for every
# GPT2Config field that changes the arithmetic: n_inner, each activation,
# layer_norm_epsilon, scale_attn_weights, scale_attn_by_inverse_layer_idx,
# tie_word_embeddings, n_positions longer than the context; also sharded
# folders, GPT2Model's names and F16/BF16 weights. The weights pipetrain
# loaded, written back by `pipetrain merge`, equal the originals exactly.
# What pipetrain does not compute is refused, naming the field; model flags
# that contradict config.json are refused. Skipped (77) when the Python
# packages cannot be installed (scripts/install-test-python.sh).
set -euo pipefail
source "$PT_SOURCE_DIR/tests/python_env.sh" "PyPI's transformers, safetensors and numpy"
hf="$py $PT_SOURCE_DIR/tests/hf_gpt2.py"
export TRANSFORMERS_VERBOSITY=error
$hf tokens "$dir/tokens.bin" 4000 64
B=4 T=16 K=3
fail=0

# close A B: |A - B| <= 1e-6 |B| (gelu and gelu_new differ by 6e-6 here)
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b;
                                          exit !(d <= 1e-6 * m) }'; }

compare() { # name, folder
    local ours theirs
    ours=$("$PIPETRAIN" eval --load "$2" --data "$dir/tokens.bin" --batch $B --batches $K \
        --seq $T) || { echo "FAIL: $1: pipetrain eval refused the folder"; fail=1; return; }
    ours=$(echo "$ours" | awk '{ print $2 }')
    theirs=$($hf loss "$2" "$dir/tokens.bin" $B $T $K)
    if close "$ours" "$theirs"; then
        printf 'ok   %-22s pipetrain %s  numpy %s\n' "$1" "$ours" "$theirs"
    else
        printf 'FAIL %-22s pipetrain %s  numpy %s\n' "$1" "$ours" "$theirs"
        fail=1
    fi
    [ -f "$2" ] && return
    "$PIPETRAIN" merge "$2" "$dir/export.safetensors" >/dev/null &&
        $hf same-weights "$2" "$dir/export.safetensors" >/dev/null ||
        { echo "FAIL: $1: the weights pipetrain read are not the folder's"; fail=1; }
}

for v in default n_inner gelu gelu_pytorch_tanh relu silu epsilon unscaled inverse_layer_idx \
         untied positions; do
    $hf write "$dir/$v" "$v"
    compare "$v" "$dir/$v"
done
$hf write "$dir/sharded" untied --sharded
compare "sharded, untied" "$dir/sharded"
$hf write "$dir/gpt2model" gelu --gpt2model
compare "GPT2Model names" "$dir/gpt2model"
$hf write "$dir/f16" n_inner --dtype f16
compare "F16 weights" "$dir/f16"
$hf write "$dir/bf16" default --dtype bf16 --sharded
compare "BF16 weights, sharded" "$dir/bf16"
# one file with its config.json beside it
mkdir "$dir/file" && cp "$dir/gelu/model.safetensors" "$dir/gelu/config.json" "$dir/file/"
compare "file beside config" "$dir/file/model.safetensors"

# refusals: status, text the message must hold, command...
expect() {
    local want=$1 needle=$2 out rc=0
    shift 2
    out=$("$@" 2>&1) || rc=$?
    if [ "$rc" -ne "$want" ] || ! grep -q -- "$needle" <<< "$out"; then
        echo "FAIL: $* -> status $rc (expected $want) and '$needle' in: $out"
        fail=1
    else
        echo "ok   refused: $out" | head -1
    fi
}
edit() { # folder, python expression on the config dict c
    cp -r "$dir/default" "$dir/$1"
    "$py" - "$dir/$1/config.json" "$2" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"))
EOF
}
ev=("$PIPETRAIN" eval --data "$dir/tokens.bin" --batch 2 --batches 1 --load)
edit llama 'c["model_type"] = "llama"'
expect 1 'model_type' "${ev[@]}" "$dir/llama"
edit act 'c["activation_function"] = "gelu_10"'
expect 1 'activation_function.*gelu_10' "${ev[@]}" "$dir/act"
edit cross 'c["add_cross_attention"] = True'
expect 1 'add_cross_attention' "${ev[@]}" "$dir/cross"
edit arch 'c["architectures"] = ["GPT2ForSequenceClassification"]'
expect 1 'GPT2ForSequenceClassification' "${ev[@]}" "$dir/arch"
edit heads_text 'c["n_head"] = "4"'
expect 1 '"n_head" is a string' "${ev[@]}" "$dir/heads_text"
edit eps 'c["layer_norm_epsilon"] = 0'
expect 1 'layer_norm_epsilon' "${ev[@]}" "$dir/eps"
edit inner 'c["n_inner"] = 64'
expect 1 "mlp.c_fc.weight' has shape \[32, 128\]; the model's 'transformer.h.0.mlp.c_fc.weight' is \[32, 64\]" \
    "${ev[@]}" "$dir/inner"
expect 2 'contradicts' "${ev[@]}" "$dir/default" --heads 2
expect 2 'n_positions 16' "${ev[@]}" "$dir/default" --seq 32
expect 2 'contradicts' "$PIPETRAIN" train --init-from "$dir/default" --layers 3 \
    --data "$dir/tokens.bin" --steps 1
expect 2 'contradicts' "$PIPETRAIN" generate --load "$dir/default" --heads 8 --tokens 1
rm "$dir/file/config.json"
expect 2 'give --heads' "$PIPETRAIN" generate --load "$dir/file/model.safetensors" --tokens 1

[ "$fail" -eq 0 ] || exit 1
echo "ok: Hugging Face's GPT-2 folders load and compute what transformers' GPT-2 computes"
