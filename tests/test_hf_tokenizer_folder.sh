#!/usr/bin/env bash
# test_hf_tokenizer_folder: a model trained through a BPE tokenizer saves a
# model folder that carries the tokenizer: transformers' AutoTokenizer
# loads the folder and encodes text to the ids `pipetrain tokenize` writes
# with the folder, and GPT2Config's vocab_size is the tokenizer's (its
# bos_token_id and eos_token_id the tokenizer's <|endoftext|>). Started
# from the folder (--init-from), training encodes its text with the
# folder's tokenizer without being told, and the loss starts where the
# saved model left off, not at ln(vocab); eval and generate take the folder
# and print decoded text. A tokenizer whose size is not the model's
# vocabulary is refused. Skipped (77) without the Python packages.
set -euo pipefail
corpus=/usr/share/games/fortunes
newtext=/usr/share/common-licenses
[ -d "$corpus" ] && [ -d "$newtext" ] ||
    { echo "skipped: $corpus or $newtext is missing (scripts/install-deps.sh)"; exit 77; }
source "$PT_SOURCE_DIR/tests/python_env.sh" "PyPI's tokenizers and transformers"
export TRANSFORMERS_VERBOSITY=error
check=$PT_SOURCE_DIR/tests/tokenizer_check.py
"$py" "$check" bpe "$dir/tok" 800 "$corpus"/art "$corpus"/computers "$corpus"/fortunes

model=(--layers 2 --heads 4 --embd 64 --seq 64 --batch 8)
"$PIPETRAIN" train "${model[@]}" --tokenizer "$dir/tok" --steps 60 --lr 3e-3 --data "$corpus" \
    --save "$dir/m" --quiet >/dev/null
[ -f "$dir/m/tokenizer.json" ] || { echo "FAIL: the saved folder has no tokenizer.json"; exit 1; }

# transformers reads the folder's tokenizer and config; its ids are pipetrain's
head -c 20000 "$newtext/GPL-3" >"$dir/sample.txt"
"$PIPETRAIN" tokenize --quiet --tokenizer "$dir/m" -o "$dir/sample.bin" "$dir/sample.txt" >/dev/null
"$py" - "$dir/m" "$dir/sample.txt" "$dir/sample.bin" <<'EOF'
import sys
import numpy as np
from transformers import AutoTokenizer, GPT2Config
folder, text, bin_path = sys.argv[1:]
tok = AutoTokenizer.from_pretrained(folder)
cfg = GPT2Config.from_pretrained(folder)
assert cfg.vocab_size == len(tok), f"config vocab_size {cfg.vocab_size}, tokenizer {len(tok)}"
ids = tok(open(text, encoding="utf-8").read())["input_ids"]
with open(bin_path, "rb") as f:
    head = np.frombuffer(f.read(1024), dtype="<i4")
    ours = np.frombuffer(f.read(), dtype="<u2")[: head[2]].tolist()
eot = tok.convert_tokens_to_ids("<|endoftext|>")
assert ours[0] == eot and ours[1:] == ids, "pipetrain's ids differ from AutoTokenizer's"
assert cfg.bos_token_id == eot and cfg.eos_token_id == eot, \
    f"config bos/eos {cfg.bos_token_id}/{cfg.eos_token_id}, <|endoftext|> is {eot}"
print(f"ok: AutoTokenizer ({type(tok).__name__}) encodes {len(ids)} ids as pipetrain does")
EOF

# from the folder: its tokenizer encodes the new text, unasked
"$PIPETRAIN" train --init-from "$dir/m" --stages 2 --microbatches 2 --steps 10 --lr 1e-3 \
    --data "$newtext" --metrics "$dir/tuned.jsonl" --save "$dir/tuned" --quiet \
    >/dev/null 2>"$dir/err"
grep -q "encoded with the tokenizer in $dir/m" "$dir/err" ||
    { echo "FAIL: --init-from did not take the folder's tokenizer: $(cat "$dir/err")"; exit 1; }
first=$(head -1 "$dir/tuned.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/')
awk -v a="$first" 'BEGIN { exit !(a < 6.0) }' || # ln 800 = 6.68 for a fresh model
    { echo "FAIL: the first loss $first is not the loaded model's"; exit 1; }
[ -f "$dir/tuned/tokenizer.json" ] || { echo "FAIL: the tuned folder lost the tokenizer"; exit 1; }
"$PIPETRAIN" eval --load "$dir/tuned" --data "$newtext" --batches 2
out=$("$PIPETRAIN" generate --load "$dir/tuned" --prompt "The " --tokens 40 --seed 3)
echo "generated: $out"
# decoded text has letters after the prompt; ids would be numbers
grep -q '[[:alpha:]]' <<< "${out:4}" && ! grep -Eq '^The( [0-9]+)+$' <<< "$out" ||
    { echo "FAIL: generate did not decode the ids"; exit 1; }

# a tokenizer that is not the model's
"$py" "$check" bpe "$dir/other" 500 "$corpus"/art
status=0
"$PIPETRAIN" eval --load "$dir/m" --data "$newtext" --tokenizer "$dir/other" 2>"$dir/err" || status=$?
[ "$status" -ne 0 ] && grep -q "500 tokens" "$dir/err" ||
    { echo "FAIL: a tokenizer of 500 ids for a model of 800: $status $(cat "$dir/err")"; exit 1; }
echo "ok: the model folder carries its tokenizer, both ways"
