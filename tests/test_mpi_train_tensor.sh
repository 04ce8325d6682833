#!/usr/bin/env bash
# test_mpi_train_tensor: `pipetrain train --tensor T` from the command line,
# on threads and under `mpirun -np P*T*D`:
#   - (P, T, D, zero) = (1, 2, 1, 0), (2, 2, 1, 0), (1, 4, 1, 0), (2, 4, 1, 0),
#     (1, 2, 2, 0), (2, 2, 2, 1), (1, 4, 2, 2) and (2, 4, 2, 1) on threads, and
#     (2, 2, 1, 0), (1, 4, 1, 0), (2, 2, 2, 1), (1, 4, 2, 2) and (2, 4, 2, 1),
#     16 ranks, under MPI (every value of
#     each axis; tests/test_tensor_pipeline.c runs every layout on threads):
#     the loss of every one of 20 steps within 1e-5 relative of the
#     P = T = D = 1 run;
#   - the same layout on threads and under MPI, and two runs of one layout:
#     the same losses, digit for digit;
#   - the rank mapping is printed at start (rank = (stage D + replica) T + t);
#   - a spec of column_linear / row_linear pairs, and gpt in bf16 (with
#     and without --sequence-parallel), at (2, 2, 1): the same losses on
#     threads and under MPI;
#   - a set saved at (2, 2, 1) (threads, and under MPI byte for byte the
#     same) resumes at (1, 1, 2, zero 1) as the one-worker set does, within
#     1e-5; the weights saved as one file with slices start a one-worker run;
#   - with --sequence-parallel at (2, 2, 1) and (1, 4, 2, zero 1): within
#     1e-5 of one worker, threads and MPI digit for digit, and a set saved
#     at (2, 2, 1) resumes at (1, 1, 2, zero 1) as the one-worker set does;
#   - refused with a message: T not dividing the heads, P x T x D not the
#     number of MPI ranks, --sequence-parallel without a tensor group.
# ctest: slow
set -euo pipefail
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PIPETRAIN_TIMEOUT=60
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 4 --embd 32 --seq 16 --batch 8 --microbatches 4 --steps 20
        --lr 3e-3 --seed 2 --data "$corpus")
losses() { sed 's/.*"loss":\([0-9.]*\).*/\1/' "$1" | tr '\n' ' '; }
close() { # two loss lists agree to 1e-5 relative
    awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x); m = split(b, y); if (n != m || n == 0) exit 1;
        for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-5 * x[i]) exit 1 } }'
}
"$PIPETRAIN" train "${common[@]}" --metrics "$dir/one.jsonl" >/dev/null 2>&1
ref=$(losses "$dir/one.jsonl")
echo "one worker: $ref"
run() { # name, launcher..., -- flags...
    local name=$1
    shift
    local launch=()
    while [ "$1" != "--" ]; do launch+=("$1"); shift; done
    shift
    "${launch[@]}" "$PIPETRAIN" train "${common[@]}" "$@" --metrics "$dir/$name.jsonl" \
        > "$dir/$name.out" 2> "$dir/$name.err" || { echo "FAIL: $name"; cat "$dir/$name.err"; exit 1; }
    got=$(losses "$dir/$name.jsonl")
    close "$ref" "$got" || { echo "FAIL: $name: $got"; exit 1; }
    echo "$name: $got"
}
run t2 -- --tensor 2
grep -q "rank 1: stage 0, tensor slice 1, replica 0" "$dir/t2.err" ||
    { echo "FAIL: no rank mapping"; cat "$dir/t2.err"; exit 1; }
run p2t2 -- --stages 2 --tensor 2
run p2t2_again -- --stages 2 --tensor 2
[ "$(losses "$dir/p2t2.jsonl")" = "$(losses "$dir/p2t2_again.jsonl")" ] ||
    { echo "FAIL: two runs at (2, 2, 1) differ"; exit 1; }
run t4 -- --tensor 4
run p2t4 -- --stages 2 --tensor 4
run t2d2 -- --tensor 2 --replicas 2
grep -q "rank 3: stage 0, tensor slice 1, replica 1" "$dir/t2d2.err" ||
    { echo "FAIL: the mapping of replicas"; cat "$dir/t2d2.err"; exit 1; }
run p2t2d2z1 -- --stages 2 --tensor 2 --replicas 2 --zero 1
run t4d2z2 -- --tensor 4 --replicas 2 --zero 2
run p2t4d2z1 -- --stages 2 --tensor 4 --replicas 2 --zero 1
refuse() { # what the message says, flags...
    local says=$1
    shift
    if "$@" > "$dir/r.out" 2>&1; then echo "FAIL: accepted: $*"; exit 1; fi
    grep -q "$says" "$dir/r.out" || { echo "FAIL: '$says' not in:"; cat "$dir/r.out"; exit 1; }
}
refuse "does not divide the 4 attention heads" "$PIPETRAIN" train "${common[@]}" --tensor 3
run sp_p2t2 -- --stages 2 --tensor 2 --sequence-parallel
run sp_t4d2z1 -- --tensor 4 --replicas 2 --zero 1 --sequence-parallel
refuse "needs --tensor 2 or more" "$PIPETRAIN" train "${common[@]}" --sequence-parallel
# a set saved with tensor slices holds the whole model: a run resumed from
# it at another layout continues as one resumed from the one-worker set
"$PIPETRAIN" train "${common[@]}" --steps 10 --stages 2 --tensor 2 --save "$dir/set_t" \
    > /dev/null 2>&1 || { echo "FAIL: --save with --tensor 2"; exit 1; }
"$PIPETRAIN" train "${common[@]}" --steps 10 --save "$dir/set_1" > /dev/null 2>&1 ||
    { echo "FAIL: --save"; exit 1; }
"$PIPETRAIN" train "${common[@]}" --steps 10 --stages 2 --tensor 2 --sequence-parallel \
    --save "$dir/set_sp" > /dev/null 2>&1 || { echo "FAIL: --save with --sequence-parallel"; exit 1; }
for set in set_t set_sp set_1; do
    "$PIPETRAIN" train "${common[@]}" --resume "$dir/$set" --replicas 2 --zero 1 \
        --metrics "$dir/r_$set.jsonl" > /dev/null 2>&1 || { echo "FAIL: resume $set"; exit 1; }
done
close "$(losses "$dir/r_set_1.jsonl")" "$(losses "$dir/r_set_t.jsonl")" ||
    { echo "FAIL: resumed from the sliced set: $(losses "$dir/r_set_t.jsonl")"; exit 1; }
close "$(losses "$dir/r_set_1.jsonl")" "$(losses "$dir/r_set_sp.jsonl")" ||
    { echo "FAIL: resumed from the sequence-parallel set: $(losses "$dir/r_set_sp.jsonl")"; exit 1; }
echo "a set saved at (2, 2, 1) resumes at (1, 1, 2, zero 1) as the one-worker set does"
# the weights alone, as one file, from slices: a one-worker run starts from them
"$PIPETRAIN" train "${common[@]}" --steps 3 --stages 2 --tensor 2 --save "$dir/w.safetensors" \
    > "$dir/w.out" 2>&1 || { echo "FAIL: --save FILE.safetensors with --tensor 2"; cat "$dir/w.out"; exit 1; }
"$PIPETRAIN" train "${common[@]}" --steps 1 --init-from "$dir/w.safetensors" > "$dir/w1.out" 2>&1 ||
    { echo "FAIL: --init-from the file saved with slices"; cat "$dir/w1.out"; exit 1; }
if command -v mpirun >/dev/null; then
    mpi=(mpirun --oversubscribe -np)
    run mpi_p2t2 "${mpi[@]}" 4 -- --stages 2 --tensor 2
    [ "$(losses "$dir/p2t2.jsonl")" = "$(losses "$dir/mpi_p2t2.jsonl")" ] ||
        { echo "FAIL: (2, 2, 1): threads and MPI differ"; exit 1; }
    run mpi_t4 "${mpi[@]}" 4 -- --tensor 4
    [ "$(losses "$dir/t4.jsonl")" = "$(losses "$dir/mpi_t4.jsonl")" ] ||
        { echo "FAIL: (1, 4, 1): threads and MPI differ"; exit 1; }
    run mpi_p2t2d2z1 "${mpi[@]}" 8 -- --stages 2 --tensor 2 --replicas 2 --zero 1 --threads 1
    [ "$(losses "$dir/p2t2d2z1.jsonl")" = "$(losses "$dir/mpi_p2t2d2z1.jsonl")" ] ||
        { echo "FAIL: (2, 2, 2, zero 1): threads and MPI differ"; exit 1; }
    run mpi_sp_p2t2 "${mpi[@]}" 4 -- --stages 2 --tensor 2 --sequence-parallel
    [ "$(losses "$dir/sp_p2t2.jsonl")" = "$(losses "$dir/mpi_sp_p2t2.jsonl")" ] ||
        { echo "FAIL: sequence-parallel (2, 2, 1): threads and MPI differ"; exit 1; }
    run mpi_sp_t4d2z1 "${mpi[@]}" 8 -- --tensor 4 --replicas 2 --zero 1 --sequence-parallel \
        --threads 1
    [ "$(losses "$dir/sp_t4d2z1.jsonl")" = "$(losses "$dir/mpi_sp_t4d2z1.jsonl")" ] ||
        { echo "FAIL: sequence-parallel (1, 4, 2, zero 1): threads and MPI differ"; exit 1; }
    run mpi_t4d2z2 "${mpi[@]}" 8 -- --tensor 4 --replicas 2 --zero 2 --threads 1
    [ "$(losses "$dir/t4d2z2.jsonl")" = "$(losses "$dir/mpi_t4d2z2.jsonl")" ] ||
        { echo "FAIL: (1, 4, 2, zero 2): threads and MPI differ"; exit 1; }
    run mpi_p2t4d2z1 "${mpi[@]}" 16 -- --stages 2 --tensor 4 --replicas 2 --zero 1 --threads 1
    [ "$(losses "$dir/p2t4d2z1.jsonl")" = "$(losses "$dir/mpi_p2t4d2z1.jsonl")" ] ||
        { echo "FAIL: (2, 4, 2, zero 1): threads and MPI differ"; exit 1; }
    "${mpi[@]}" 4 "$PIPETRAIN" train "${common[@]}" --steps 10 --stages 2 --tensor 2 --threads 1 \
        --save "$dir/set_mpi" > /dev/null 2>&1 || { echo "FAIL: --save under mpirun"; exit 1; }
    for f in "$dir"/set_t/*.safetensors; do # the tensors, after the header (its run id differs)
        skip=$((8 + $(od -An -t u8 -N8 "$f")))
        cmp -s -i "$skip" "$f" "$dir/set_mpi/$(basename "$f")" ||
            { echo "FAIL: $(basename "$f") saved under mpirun differs from threads'"; exit 1; }
    done
    echo "a set saved under mpirun at (2, 2, 1): the threads' set byte for byte"
    # bf16 slices: threads and MPI bit for bit
    bf=(--stages 2 --tensor 2 --precision bf16)
    "$PIPETRAIN" train "${common[@]}" "${bf[@]}" --metrics "$dir/bf16_t.jsonl" > /dev/null 2>&1 ||
        { echo "FAIL: bf16 on threads"; exit 1; }
    "${mpi[@]}" 4 "$PIPETRAIN" train "${common[@]}" "${bf[@]}" --threads 1 \
        --metrics "$dir/bf16_m.jsonl" > /dev/null 2>&1 || { echo "FAIL: bf16 under mpirun"; exit 1; }
    [ -n "$(losses "$dir/bf16_t.jsonl")" ] && [ "$(losses "$dir/bf16_t.jsonl")" = "$(losses "$dir/bf16_m.jsonl")" ] ||
        { echo "FAIL: bf16 (2, 2, 1): threads and MPI differ"; exit 1; }
    bf+=(--sequence-parallel)
    "$PIPETRAIN" train "${common[@]}" "${bf[@]}" --metrics "$dir/bf16_st.jsonl" > /dev/null 2>&1 ||
        { echo "FAIL: bf16 sequence-parallel on threads"; exit 1; }
    "${mpi[@]}" 4 "$PIPETRAIN" train "${common[@]}" "${bf[@]}" --threads 1 \
        --metrics "$dir/bf16_sm.jsonl" > /dev/null 2>&1 ||
        { echo "FAIL: bf16 sequence-parallel under mpirun"; exit 1; }
    [ -n "$(losses "$dir/bf16_st.jsonl")" ] && [ "$(losses "$dir/bf16_st.jsonl")" = "$(losses "$dir/bf16_sm.jsonl")" ] ||
        { echo "FAIL: bf16 sequence-parallel (2, 2, 1): threads and MPI differ"; exit 1; }
    # a spec of Megatron's column / row pairs, threads and MPI bit for bit
    spec='input 32; column_linear 32 64; gelu; row_linear 64 32; column_linear 32 16; relu; row_linear 16 8; mse'
    sflags=(--model-spec "$spec" --data-format synthetic-regression --batch 8 --microbatches 4
            --steps 20 --lr 3e-3 --seed 2 --stages 2 --tensor 2)
    "$PIPETRAIN" train "${sflags[@]}" --metrics "$dir/spec_t.jsonl" > /dev/null 2>&1 ||
        { echo "FAIL: spec on threads"; exit 1; }
    "${mpi[@]}" 4 "$PIPETRAIN" train "${sflags[@]}" --threads 1 --metrics "$dir/spec_m.jsonl" \
        > "$dir/spec_m.out" 2>&1 || { echo "FAIL: spec under mpirun"; cat "$dir/spec_m.out"; exit 1; }
    [ -n "$(losses "$dir/spec_t.jsonl")" ] && [ "$(losses "$dir/spec_t.jsonl")" = "$(losses "$dir/spec_m.jsonl")" ] ||
        { echo "FAIL: spec at (2, 2, 1): threads and MPI differ"; exit 1; }
    echo "spec of column_linear / row_linear at (2, 2, 1): threads and MPI the same losses"
    refuse "need 4 MPI ranks, but mpirun started 2" "${mpi[@]}" 2 "$PIPETRAIN" train \
        "${common[@]}" --stages 2 --tensor 2
else
    echo "mpirun is not installed: the MPI half skipped"
fi
echo ok
