# test_mpi_train_zero: `pipetrain train --replicas D --zero 1|2`, on threads and
# under mpirun: at --zero 1 the checkpoint is byte-identical to --zero 0's
# (fp32 and bf16); at --zero 2 (each micro-batch's gradient reduce-scattered,
# so summed in another order: tests/test_zero_matches_unsharded holds it close
# to zero 0) the threads and mpirun checkpoints are byte-identical to each
# other at one partition (given: the shards follow the chunks' spans, and
# the automatic partition follows timings); a sharded checkpoint set resumes under another layout; in bf16
# (where each replica keeps the float master weights of its shards alone) a
# run resumed at zero 1 from a set saved at zero 1 ends byte-identical to
# the uninterrupted run, on threads and under mpirun; --zero
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

fixed=(--stages 2 --replicas 2 --balance 2,2)
for prec in fp32 bf16; do
    "$PIPETRAIN" train "${common[@]}" --precision $prec "${fixed[@]}" \
        --save "$dir/z0.safetensors" >/dev/null || { echo "FAIL: zero 0 ($prec)"; exit 1; }
    for z in 1 2; do
        "$PIPETRAIN" train "${common[@]}" --precision $prec "${fixed[@]}" --zero $z \
            --save "$dir/z$z.safetensors" >/dev/null || { echo "FAIL: zero $z ($prec)"; exit 1; }
        want="$dir/z0.safetensors"
        [ $z = 2 ] && want="$dir/z2.safetensors"
        [ $z = 1 ] && { cmp -s "$want" "$dir/z1.safetensors" ||
            { echo "FAIL: $prec zero 1 on threads differs from zero 0"; exit 1; }; }
        if command -v mpirun >/dev/null; then
            mpirun --oversubscribe -np 4 "$PIPETRAIN" train "${common[@]}" --precision $prec \
                "${fixed[@]}" --zero $z --save "$dir/m$z.safetensors" >/dev/null ||
                { echo "FAIL: zero $z ($prec) under mpirun"; exit 1; }
            cmp -s "$want" "$dir/m$z.safetensors" ||
                { echo "FAIL: $prec zero $z under mpirun differs from $want"; exit 1; }
        fi
    done
    echo "$prec: --zero 1 byte-identical to --zero 0, --zero 2 on threads to --zero 2 ($where)"
done

# a sharded set resumes at another layout
"$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 --zero 1 --save "$dir/set" >/dev/null &&
    "$PIPETRAIN" train "${common[@]}" --steps 5 --replicas 2 --resume "$dir/set" >/dev/null ||
    { echo "FAIL: a set saved at zero 1 does not resume at 1 stage x 2 replicas, zero 0"; exit 1; }
echo "a set saved at P=2 D=2 zero 1 resumes at P=1 D=2 zero 0"
"$PIPETRAIN" train "${common[@]}" --stages 2 --replicas 2 --zero 2 --save "$dir/set2" >/dev/null &&
    "$PIPETRAIN" train "${common[@]}" --steps 5 --stages 2 --replicas 2 --zero 1 \
        --resume "$dir/set2" >/dev/null ||
    { echo "FAIL: a set saved at zero 2 does not resume at zero 1"; exit 1; }
echo "a set saved at P=2 D=2 zero 2 resumes at zero 1"

# bf16, zero 1: the float master is sharded; saves gather it, loads shard it
sched=(--precision bf16 --stages 2 --replicas 2 --zero 1 --warmup 2 --decay-steps 6)
launchers=("")
command -v mpirun >/dev/null && launchers+=("mpirun --oversubscribe -np 4")
for launch in "${launchers[@]}"; do
    $launch "$PIPETRAIN" train "${common[@]}" "${sched[@]}" --steps 6 \
        --save "$dir/bf_full.safetensors" >/dev/null &&
        $launch "$PIPETRAIN" train "${common[@]}" "${sched[@]}" --steps 3 \
            --save "$dir/bf_half" >/dev/null &&
        $launch "$PIPETRAIN" train "${common[@]}" "${sched[@]}" --steps 6 \
            --resume "$dir/bf_half" --save "$dir/bf_resumed.safetensors" >/dev/null ||
        { echo "FAIL: bf16 zero 1 save and resume (${launch:-threads})"; exit 1; }
    cmp -s "$dir/bf_full.safetensors" "$dir/bf_resumed.safetensors" ||
        { echo "FAIL: bf16 zero 1 resumed differs from the uninterrupted run (${launch:-threads})"
          exit 1; }
    # saves during the run gather the master and give it back: the run goes on unchanged
    $launch "$PIPETRAIN" train "${common[@]}" "${sched[@]}" --steps 6 --save-every 2 \
        --save "$dir/bf_every.safetensors" >/dev/null ||
        { echo "FAIL: bf16 zero 1 with --save-every (${launch:-threads})"; exit 1; }
    cmp -s "$dir/bf_full.safetensors" "$dir/bf_every.safetensors" ||
        { echo "FAIL: bf16 zero 1: saving every 2 steps changes the run (${launch:-threads})"
          exit 1; }
    rm -rf "$dir/bf_half"
done
echo "bf16 zero 1: resumed from a set, and saved every 2 steps, byte-identical to the uninterrupted run ($where)"

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
