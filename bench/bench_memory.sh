#!/usr/bin/env bash
# bench_memory: what each worker of a pipeline holds, against one process
# training the whole model alone. GPT 12 layers, 768 channels, 12 heads,
# vocab 256, seq 64, batch 4, M = 4, one AdamW step (and the end-of-run
# validation), on the fortunes corpus:
#   one process, one worker          the baseline
#   threads, --stages 4              one process holding the model once
#   mpirun -np 4, --stages 4         each rank its own stage
#   mpirun -np 2, --stages 2
# For each run: every worker's allocated bytes (parameters, gradients,
# moments, activations, buffers), the planner's prediction of them, and the
# peak resident memory of its process, as `pipetrain train` reports them at
# the end; then each rank's peak RSS as a share of the baseline's, and how
# far each rank's peak RSS is from its worker's predicted bytes.
# The stage cuts are the memory-balanced ones (--balance 4,3,3,4 and 7,7:
# 14 blocks = embedding, 12 transformer blocks, head).
# Usage: bench/bench_memory.sh [path to pipetrain] (default build/pipetrain)
set -euo pipefail
P=${1:-build/pipetrain}
corpus=/usr/share/games/fortunes
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
model=(--layers 12 --heads 12 --embd 768 --seq 64 --vocab 256 --batch 4 --microbatches 4
       --steps 1 --eval-batches 1 --data "$corpus")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() { # name, then the command
    local name=$1
    shift
    "$@" > "$out/$name" 2>&1 || { echo "bench_memory: $name failed:"; cat "$out/$name"; exit 1; }
    echo "== $name: $*"
    sed -n '/^memory per /,/^(MiB/p' "$out/$name" | sed '1d'
}

run single "$P" train "${model[@]}"
run threads4 "$P" train "${model[@]}" --stages 4 --balance 4,3,3,4
run mpi4 mpirun --oversubscribe -np 4 "$P" train "${model[@]}" --stages 4 --balance 4,3,3,4
run mpi2 mpirun --oversubscribe -np 2 "$P" train "${model[@]}" --stages 2 --balance 7,7

# the rows of a run's memory table (its other tables' rows start with a
# number too); the last two columns are the predicted bytes and the peak RSS
memory_rows() { sed -n '/^memory per /,/^(MiB/p' "$out/$1" | awk '$1 ~ /^[0-9]+$/'; }
rss_of() { memory_rows "$1" | awk '{ print $NF }'; }
base=$(rss_of single | head -1)
echo
echo "peak RSS per process, as a share of one process training alone ($base MiB):"
for r in threads4 mpi4 mpi2; do
    printf '%-9s' "$r"
    for x in $(rss_of "$r" | sort -u -n -r); do
        awk -v x="$x" -v b="$base" 'BEGIN { printf " %.3fx", x / b }'
    done
    echo
done
echo
echo "each MPI rank's peak RSS against its worker's predicted bytes:"
for r in mpi4 mpi2; do
    memory_rows "$r" | awk -v run="$r" '{
        printf "%s rank %d: RSS %.1f MiB, predicted %.1f MiB (%+.1f%%)\n", run, $1, $NF, $(NF - 1),
               100 * ($NF - $(NF - 1)) / $(NF - 1) }'
done
