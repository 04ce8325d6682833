#!/usr/bin/env bash
# bench_tcp_links: pipetrain over TCP between 2 test hosts (tests/testhosts.sh)
# with each link unlimited, at 1 Gb/s and at 100 Mb/s (tc tbf), against the
# same run through shared memory, and 100 Mb/s again with Open MPI's default
# eager limit (64 KiB: each message between stages waits for its receiver's
# handshake; the test hosts' recipe raises it to 1 MiB) and without the MPI
# transport's progress thread (PIPETRAIN_MPI_PROGRESS=0), and with 9000-byte
# frames (TH_MTU=9000: the shaped link's packets, which these test hosts
# process on the training's own cores, six times fewer), and with the
# first stage's weight passes deferred (--defer-w). The runs are
# repeated ROUNDS times, interleaved, so that a change in the machine's other
# load falls on all of them. Per run: tokens/s and the step time (medians of
# the steps after the first), the link it measured by its own ping-pong at
# the start, and the step time the simulator predicts for its measured F, B,
# W times and that link (the slowest worker of the last step). Per row: the
# medians over the rounds; ratio is tokens/s over the unlimited link's, and
# meas/pred the last step's time over its prediction (from that step's own
# compute times, so that a change in load between steps does not count),
# each the median of the rounds' own ratios. Needs root.
#   [SCHEDULE=zb2p] [TRAIN_FLAGS=...] [CASES="unlimited 100mbit"] \
#     bash bench/bench_tcp_links.sh build/pipetrain [STEPS] [ROUNDS]
# GPT 4 layers / 384 / 6 heads / context 256, P = 2 (--balance 3,3), M = 16,
# --threads 1, the schedule SCHEDULE (default 1f1b), TRAIN_FLAGS added to
# every run; CASES picks rows (their names below; unlimited is always run).
set -euo pipefail
pipetrain=$(realpath "${1:?usage: bench_tcp_links.sh PIPETRAIN [STEPS]}")
steps=${2:-6}
here=$(dirname "$0")
corpus=/usr/share/games/fortunes
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run=(train --stages 2 --balance 3,3 --layers 4 --embd 384 --heads 6 --seq 256 --batch 16
     --microbatches 16 --schedule "${SCHEDULE:-1f1b}" --steps "$steps" --lr 1e-4 --seed 1 --threads 1 --quiet
     --data "$corpus")
read -r -a extra <<<"${TRAIN_FLAGS:-}"
run+=("${extra[@]}")

dir=$(mktemp -d)
trap 'rc=$?; [ $rc = 0 ] || tail -n 20 "$dir/out" 2>/dev/null; rm -rf "$dir"' EXIT
rounds=${3:-3}
all_cases=(shm unlimited 1gbit 100mbit 100mbit-rendezvous 100mbit-noprogress 100mbit-jumbo
           100mbit-defer)
all_names=("shared memory" "TCP unlimited" "TCP 1 Gb/s" "TCP 100 Mb/s" "TCP 100 Mb/s, rendezvous"
           "TCP 100 Mb/s, no progress" "TCP 100 Mb/s, MTU 9000" "TCP 100 Mb/s, --defer-w")
cases=() names=()
for i in "${!all_cases[@]}"; do
    c=${all_cases[$i]}
    # --defer-w takes only the schedules with fused backwards
    [ "$c" = 100mbit-defer ] && [[ ! " gpipe 1f1b interleaved loopedbfs " == *" ${SCHEDULE:-1f1b} "* ]] &&
        continue
    if [ -z "${CASES:-}" ] || [ "$c" = unlimited ] || [[ " $CASES " == *" $c "* ]]; then
        cases+=("$c") names+=("${all_names[$i]}")
    fi
done
for ((k = 0; k < rounds; k++)); do
    for c in "${cases[@]}"; do
        log=$dir/$c.$k.jsonl
        if [ "$c" = shm ]; then
            mpirun --oversubscribe --bind-to none -np 2 "$pipetrain" "${run[@]}" --metrics "$log" \
                >>"$dir/out" 2>&1
            continue
        fi
        rate=${c%-*}
        [ "$rate" = unlimited ] && rate=
        progress=1 eager= mtu=1500 defer=
        [ "$c" = 100mbit-defer ] && defer=--defer-w
        [ "$c" = 100mbit-noprogress ] && progress=0
        [ "$c" = 100mbit-jumbo ] && mtu=9000
        [ "$c" = 100mbit-rendezvous ] && eager=65536 # Open MPI's default
        TH_EAGER_LIMIT=$eager TH_MTU=$mtu bash "$here/../tests/testhosts.sh" 2 ${rate:+--rate $rate} -- bash -c \
            "\$TH_MPIRUN_LINE -x PIPETRAIN_MPI_PROGRESS=$progress -np 2 $pipetrain ${run[*]} $defer --metrics $log" \
            >>"$dir/out" 2>&1
    done
done
python3 - "$dir" "$rounds" "$steps" "${cases[@]}" -- "${names[@]}" <<'PY'
import json, statistics as st, sys
d, rounds, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rest = sys.argv[4:]
cases, names = rest[:rest.index("--")], rest[rest.index("--") + 1:]
def figures(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    last, rows = rows[-1], rows[1:]
    return {"tok": st.median(r["tokens_per_s"] for r in rows),
            "ms": st.median(r["step_ms"] for r in rows),
            "link": last.get("link_bytes_per_s", 0) * 8 / 1e6,
            "last": last["step_ms"],
            "pred": 1e3 * max(v for k, v in last.items() if k.endswith("_predicted_step_s"))}
f = {c: [figures("%s/%s.%d.jsonl" % (d, c, k)) for k in range(rounds)] for c in cases}
print("%-26s %9s %6s %9s %12s %10s %9s" % ("link", "tokens/s", "ratio", "step ms", "link Mbit/s",
                                           "predicted", "meas/pred"))
for c, name in zip(cases, names):
    med = lambda key: st.median(x[key] for x in f[c])
    ratio = "-" if c == "shm" else "%.2f" % st.median(
        x["tok"] / u["tok"] for x, u in zip(f[c], f["unlimited"]))
    link = med("link")
    print("%-26s %9.0f %6s %9.0f %12s %10.0f %9.2f" % (
        name, med("tok"), ratio, med("ms"), ">1e5" if link > 1e5 else "%.0f" % link, med("pred"),
        st.median(x["last"] / x["pred"] for x in f[c])))
print("(%d rounds, interleaved, of %s steps per run, the first left out; medians)" % (rounds, steps))
PY
