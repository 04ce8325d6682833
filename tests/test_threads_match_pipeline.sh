# test_threads_match_pipeline: one worker on several threads stores what a
# pipeline of one-thread workers stores. `pipetrain train` at 1 stage with
# --threads 3 (the products' tiles, attention's heads and the passes outside
# the products shared between three threads) and at 2 stages with
# --threads 1 save byte-identical checkpoints, in fp32 and in bf16. The
# model is large enough that LayerNorm, GELU and the loss are cut into
# ranges (tests/test_pass_threads checks each pass alone).
set -u
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 4 --embd 128 --seq 256 --vocab 256 --batch 4 --microbatches 2
        --steps 2 --lr 1e-3 --seed 3 --eval-every 0 --data "$corpus")

for prec in fp32 bf16; do
    "$PIPETRAIN" train "${common[@]}" --precision $prec --stages 1 --threads 3 \
        --save "$dir/one.safetensors" >/dev/null || { echo "FAIL: 1 stage, 3 threads ($prec)"; exit 1; }
    "$PIPETRAIN" train "${common[@]}" --precision $prec --stages 2 --threads 1 \
        --save "$dir/two.safetensors" >/dev/null || { echo "FAIL: 2 stages ($prec)"; exit 1; }
    cmp -s "$dir/one.safetensors" "$dir/two.safetensors" ||
        { echo "FAIL: $prec: 1 stage on 3 threads differs from 2 stages on 1 thread each"; exit 1; }
    echo "$prec: 1 stage on 3 threads = 2 stages on 1 thread each, byte for byte"
done
echo ok
