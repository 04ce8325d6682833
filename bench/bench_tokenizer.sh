#!/usr/bin/env bash
# bench_tokenizer: encoding speed of `pipetrain tokenize` against PyPI's
# tokenizers (Hugging Face's Rust library) on ONE thread, on the same text
# with the same tokenizer, in the same run. The tokenizer is a byte-level
# BPE of GPT-2's size (50257 ids, GPT-2's pre-tokenizer) trained here on
# the corpus of tests/tokenizer_check.py (this repository's src/, Debian's
# fortunes and common licenses where installed, generated Unicode), which
# is then encoded COPIES times over (default 4). pipetrain's time is the
# whole command (loading the tokenizer, reading the files, writing the
# token file); tokenizers' is encode_batch_fast alone, with every document
# whole and cut into parts of about 16 kB at lines (it is faster on short
# strings). Both take the best of 3 runs; the ratio is pipetrain's MB/s
# over tokenizers' best. A bench, not a test: run it with nothing else
# heavy running, and write its figures into docs/tokenizer.md.
# Usage: bench/bench_tokenizer.sh [path to pipetrain] [COPIES]
set -euo pipefail
P=$(realpath "${1:-build/pipetrain}")
copies=${2:-4}
here=$(cd "$(dirname "$0")/.." && pwd)
py=$(bash "$here/scripts/install-test-python.sh") || { echo "bench_tokenizer: no tokenizers"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" "$here/bench/bench_tokenizer.py" prepare "$out" "$copies" >/dev/null
bytes=$(cat "$out"/corpus/* | wc -c)

best=0
for run in 1 2 3; do
    start=$(date +%s.%N)
    "$P" tokenize --quiet --tokenizer "$out/tok" -o "$out/ids.bin" "$out/corpus" >"$out/log"
    end=$(date +%s.%N)
    best=$(awk -v b="$best" -v s="$start" -v e="$end" -v n="$bytes" \
        'BEGIN { r = n / 1e6 / (e - s); print (r > b ? r : b) }')
done
ids=$(( ($(stat -c %s "$out/ids.bin") - 1024) / 2 ))
hf=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false "$py" "$here/bench/bench_tokenizer.py" \
    encode "$out" 3)
docs=$(ls "$out/corpus" | wc -l)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "text: $docs documents, $(awk -v n="$bytes" 'BEGIN { printf "%.1f", n / 1e6 }') MB; tokenizer: 50257 ids"
printf "%-36s %10s %12s %8s\n" "encoder (one thread)" "MB/s" "ids" "ratio"
printf "%-36s %10.2f %12d %8s\n" "pipetrain tokenize (whole command)" "$best" "$ids" "1.00"
while read -r name rate count; do
    printf "%-36s %10.2f %12d %8.1f\n" "tokenizers encode_batch_fast, $name" "$rate" "$count" \
        "$(awk -v a="$best" -v b="$rate" 'BEGIN { print a / b }')"
done <<<"$hf"
echo "(ratio: pipetrain's MB/s over the row's; pipetrain's ids include one <|endoftext|> per document)"
