# test_mpi_train_zero: `pipetrain train --replicas D --zero 1|2`, on threads and
# under mpirun: the checkpoint is byte-identical to --zero 0's (fp32 and
# bf16), and a sharded checkpoint set resumes under another layout; --zero
# without replicas, --zero 3 and --zero under pipedream are refused with a
# message naming the problem.
set -u
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PIPETRAIN_TIMEOUT=60
where="threads"
command -v mpirun >/dev/null && where="threads and mpirun"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 2 --embd 16 --seq 16 --batch 8 --microbatches 4 --steps 3
        --lr 3e-3 --seed 2 --data "$corpus")

for prec in fp32 bf16; do
    "$PIPETRAIN" train "${common[@]}" --precision $prec --stages 2 --replicas 2 \
        --save "$dir/z0.safetensors" >/dev/null || { echo "FAIL: zero 0 ($prec)"; exit 1; }
    for z in 1 2; do
        "$PIPETRAIN" train "${common[@]}" --precision $prec --stages 2 --replicas 2 --zero $z \
            --save "$dir/z$z.safetensors" >/dev/null || { echo "FAIL: zero $z ($prec)"; exit 1; }
        cmp -s "$dir/z0.safetensors" "$dir/z$z.safetensors" ||
            { echo "FAIL: $prec zero $z on threads differs from zero 0"; exit 1; }
        if command -v mpirun >/dev/null; then
            mpirun --oversubscribe -np 4 "$PIPETRAIN" train "${common[@]}" --precision $prec \
                --stages 2 --replicas 2 --zero $z --save "$dir/m$z.safetensors" >/dev/null ||
                { echo "FAIL: zero $z ($prec) under mpirun"; exit 1; }
            cmp -s "$dir/z0.safetensors" "$dir/m$z.safetensors" ||
                { echo "FAIL: $prec zero $z under mpirun differs from zero 0"; exit 1; }
        fi
    done
    echo "$prec: --zero 1 and 2 byte-identical to --zero 0 ($where)"
done

# a sharded set resumes at another layout
"$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 --zero 1 --save "$dir/set" >/dev/null &&
    "$PIPETRAIN" train "${common[@]}" --steps 5 --replicas 2 --resume "$dir/set" >/dev/null ||
    { echo "FAIL: a set saved at zero 1 does not resume at 1 stage x 2 replicas, zero 0"; exit 1; }
echo "a set saved at P=2 D=2 zero 1 resumes at P=1 D=2 zero 0"

refuse() { # expected words, then the flags
    local want=$1; shift
    if "$PIPETRAIN" train "${common[@]}" "$@" >"$dir/out" 2>&1; then
        echo "FAIL: $* was accepted"; exit 1
    fi
    grep -q -- "$want" "$dir/out" || { echo "FAIL: $*: message lacks '$want':"; cat "$dir/out"; exit 1; }
}
refuse "replicas" --stages 2 --zero 1
refuse "zero" --stages 1 --replicas 2 --zero 3
refuse "asynchronous" --stages 2 --replicas 2 --zero 1 --schedule pipedream --microbatches 4
echo "refused: --zero without replicas, --zero 3, --zero under pipedream"
