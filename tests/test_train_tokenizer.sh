#!/usr/bin/env bash
# test_train_tokenizer: a small gpt trained on text through a BPE tokenizer
# (train --tokenizer): its vocabulary is the tokenizer's size, the loss
# starts near ln(vocab) and falls, and a --vocab that contradicts the
# tokenizer, or a tokenizer with token files, is refused. Generation with
# --tokenizer prints the prompt and decoded text: UTF-8 with words in it,
# where without the tokenizer the same model prints ids. The tokenizer is
# trained by PyPI's tokenizers (tests/tokenizer_check.py): skipped (77)
# when it cannot be installed (scripts/install-test-python.sh).
set -euo pipefail
source "$PT_SOURCE_DIR/tests/python_env.sh" "PyPI's tokenizers"
check=$PT_SOURCE_DIR/tests/tokenizer_check.py
mkdir "$dir/corpus"
for i in $(seq 1 300); do
    echo "The quick brown fox jumps over the lazy dog number $i."
    echo "A stitch in time saves nine; a bird in the hand is worth two in the bush."
    echo "Ünïcödé wörds: naïve café, 日本語のテキスト, and an emoji 🙂 now and then."
done >"$dir/corpus/a.txt"
cp "$PT_SOURCE_DIR/README.md" "$dir/corpus/b.txt"
"$py" "$check" bpe "$dir/tok" 600 "$dir"/corpus/*

common=(--layers 2 --heads 2 --embd 64 --seq 64 --batch 8 --lr 3e-3 --tokenizer "$dir/tok")
"$PIPETRAIN" train "${common[@]}" --data "$dir/corpus" --steps 40 --eval-every 20 --metrics "$dir/m.jsonl" \
    --tensorboard "$dir/tb" --save "$dir/m.safetensors" >"$dir/out"
first=$(sed -n '1s/.*"loss":\([0-9.]*\).*/\1/p' "$dir/m.jsonl")
last=$(sed -n '40s/.*"loss":\([0-9.]*\).*/\1/p' "$dir/m.jsonl")
echo "loss $first -> $last"
# ln 600 = 6.4: the first loss is near it, and the last well below
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.5 && a < 7.5 && b < a - 1.0) }' ||
    { echo "FAIL: the loss did not start near ln(600) and fall"; exit 1; }
grep -q '"step":40,.*"val_loss":' "$dir/m.jsonl" || { echo "FAIL: no val_loss at the end"; exit 1; }

status=0
"$PIPETRAIN" train "${common[@]}" --data "$dir/corpus" --steps 1 --vocab 256 2>"$dir/err" >/dev/null || status=$?
[ "$status" -eq 2 ] && grep -q "\-\-vocab 256 contradicts --tokenizer .*600 tokens" "$dir/err" ||
    { echo "FAIL: --vocab 256 with a tokenizer of 600: $status $(cat "$dir/err")"; exit 1; }
"$PIPETRAIN" tokenize --quiet --tokenizer "$dir/tok" -o "$dir/t.bin" "$dir/corpus" >/dev/null
status=0
"$PIPETRAIN" train "${common[@]}" --data "$dir/t.bin" --steps 1 2>"$dir/err" >/dev/null || status=$?
[ "$status" -eq 2 ] && grep -q "tokenizer does nothing for token data" "$dir/err" ||
    { echo "FAIL: a tokenizer with token data: $status $(cat "$dir/err")"; exit 1; }

gen=(--load "$dir/m.safetensors" --prompt "The quick" --tokens 40 --temperature 0)
"$PIPETRAIN" generate "${gen[@]}" --tokenizer "$dir/tok" >"$dir/text"
echo "generated: $(cat "$dir/text")"
head -c 9 "$dir/text" | grep -q "^The quick" || { echo "FAIL: the prompt is not printed"; exit 1; }
iconv -f UTF-8 -t UTF-8 "$dir/text" >/dev/null || { echo "FAIL: the text is not UTF-8"; exit 1; }
letters=$(tail -c +10 "$dir/text" | tr -cd 'A-Za-z' | wc -c)
[ "$letters" -ge 20 ] || { echo "FAIL: $letters letters after the prompt"; exit 1; }
"$PIPETRAIN" generate "${gen[@]}" >"$dir/ids" 2>"$dir/err"
grep -q "printing token ids" "$dir/err" && grep -Eq "^The quick( [0-9]+){40}$" "$dir/ids" ||
    { echo "FAIL: without --tokenizer: $(cat "$dir/ids" "$dir/err")"; exit 1; }
