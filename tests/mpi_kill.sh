# mpi_kill.sh: what the shell tests that kill an MPI rank share; sourced,
# not run. It skips the test (exit 77) where mpirun, pgrep or the fortunes
# corpus are missing, makes $dir (removed at exit, with the job $job killed
# if it still runs) and defines rank_pid JOB RANK: the process of that rank
# among mpirun's descendants (its children with Open MPI 4; an orted in
# between elsewhere), or nothing after 5 s.
set -euo pipefail
command -v mpirun >/dev/null || { echo "skipped: mpirun is not installed"; exit 77; }
command -v pgrep >/dev/null || { echo "skipped: pgrep is not installed"; exit 77; }
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PIPETRAIN_TIMEOUT=5
dir=$(mktemp -d)
job=
cleanup() {
    [ -n "$job" ] && kill -9 "$job" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

descendants() {
    local kid
    for kid in $(pgrep -P "$1" || true); do
        echo "$kid"
        descendants "$kid"
    done
}

rank_pid() {
    local pid
    for _ in $(seq 100); do
        for pid in $(descendants "$1"); do
            if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
                echo "$pid"
                return
            fi
        done
        sleep 0.05
    done
}
