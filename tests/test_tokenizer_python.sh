#!/usr/bin/env bash
# test_tokenizer_python: `pipetrain tokenize` gives, byte for byte, the ids
# of PyPI's tokenizers (Hugging Face's Rust library) for the same tokenizer
# files and the same documents. tests/tokenizer_check.py trains a
# byte-level BPE with GPT-2's pre-tokenizer (a few thousand merges) on a
# corpus of code (this repository's src/), prose (Debian's fortunes and
# common licenses, where installed) and generated Unicode (many scripts,
# CJK, emoji, combining marks, digits of several scripts, whitespace runs,
# \r\n, contractions with straight and curly quotes, added tokens with
# every option), saves it as tokenizer.json and as vocab.json + merges.txt,
# and checks both loaders, a vocabulary past 65536 (llm.c's version 2
# file), a document past the command's 4 MB blocks, that --decode gives
# every document back, and the command's refusals and default output name.
# Skipped (77) when tokenizers cannot be installed
# (scripts/install-test-python.sh).
set -euo pipefail
source "$PT_SOURCE_DIR/tests/python_env.sh" "PyPI's tokenizers"
check=$PT_SOURCE_DIR/tests/tokenizer_check.py
"$py" "$check" make "$dir"
size=$(du -sb "$dir/corpus" | cut -f1)
[ "$size" -ge 1000000 ] || { echo "FAIL: the corpus has $size bytes, less than 1 MB"; exit 1; }

for tok in "$dir/tok/tokenizer.json" "$dir/pair"; do
    "$PIPETRAIN" tokenize --quiet --tokenizer "$tok" -o "$dir/ids.bin" "$dir/corpus" >/dev/null
    "$py" "$check" check "$tok" "$dir/corpus" "$dir/ids.bin"
done
"$PIPETRAIN" tokenize --tokenizer "$dir/tok" --decode "$dir/ids.bin" >"$dir/decoded"
"$py" "$check" text "$dir/corpus" "$dir/decoded"

# a vocabulary past 65536: uint32 tokens (version 2)
mkdir "$dir/one"
cp "$dir/corpus/unicode.txt" "$dir/one/"
"$PIPETRAIN" tokenize --quiet --tokenizer "$dir/wide" -o "$dir/wide.bin" "$dir/one" >/dev/null
"$py" "$check" check "$dir/wide/tokenizer.json" "$dir/one" "$dir/wide.bin"

# one document of 5 MB, encoded by the command in blocks of 4 MB
mkdir "$dir/big"
cat "$dir"/corpus/* >"$dir/big/all.txt"
"$PIPETRAIN" tokenize --quiet --tokenizer "$dir/tok" -o "$dir/big.bin" "$dir/big/all.txt" >/dev/null
"$py" "$check" check "$dir/tok/tokenizer.json" "$dir/big" "$dir/big.bin"
# refusals: the status and the problem named; nothing is written
refused() { # STATUS TEXT ARGS...
    local want=$1 text=$2 status=0
    shift 2
    "$PIPETRAIN" tokenize "$@" >/dev/null 2>"$dir/err" || status=$?
    [ "$status" -eq "$want" ] && grep -qF -- "$text" "$dir/err" ||
        { echo "FAIL: tokenize $*: status $status, $(cat "$dir/err")"; exit 1; }
}
mkdir "$dir/empty"
refused 2 "--tokenizer PATH is required" "$dir/corpus"
refused 2 "give the text files or folders" --tokenizer "$dir/tok"
refused 1 "no-such: No such file" --tokenizer "$dir/tok" -o "$dir/e.bin" "$dir/no-such"
refused 1 "no tokenizer in this folder" --tokenizer "$dir/empty" -o "$dir/e.bin" "$dir/corpus"
refused 2 "no text found" --tokenizer "$dir/tok" -o "$dir/e.bin" "$dir/empty"
refused 2 "is one of the inputs" --tokenizer "$dir/tok" -o "$dir/corpus/unicode.txt" "$dir/corpus"
refused 2 "--output does nothing with --decode" --tokenizer "$dir/tok" --decode -o x "$dir/ids.bin"
[ ! -e "$dir/e.bin" ] || { echo "FAIL: a refused command wrote $dir/e.bin"; exit 1; }
# without -o: the first input's name and .bin, in the current folder
(cd "$dir" && "$PIPETRAIN" tokenize --quiet --tokenizer tok one/ >/dev/null)
"$PIPETRAIN" tokenize --quiet --tokenizer "$dir/tok" -o "$dir/two.bin" "$dir/one" >/dev/null
cmp -s "$dir/one.bin" "$dir/two.bin" || { echo "FAIL: one/ did not give one.bin"; exit 1; }
echo "ok"
