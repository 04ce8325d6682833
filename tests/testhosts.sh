#!/usr/bin/env bash
# testhosts.sh: several test hosts on one machine, joined by TCP, for MPI
# runs that cross a real network stack instead of shared memory. Each test
# host is a network namespace with a veth pair onto one bridge and an address
# of its own; Open MPI reaches it through an rsh agent that runs the command
# inside the namespace named by the host's address. Needs root (or
# CAP_NET_ADMIN) and `ip`; `tc` for rate limits.
#
# Sourced by the tests (tests/test_mpi_tcp_*.sh), it defines
#   testhosts_up N [RATE]   make N hosts (RATE, e.g. 100mbit, limits every
#                           link both ways with tc's tbf; TH_MTU in the
#                           environment sets the links' MTU, 1500 unless
#                           given, 9000 for jumbo frames); exits 77 with a
#                           message where namespaces cannot be made
#   testhosts_down          remove everything testhosts_up made (the
#                           caller's EXIT trap calls it)
#   testhosts_cut I         take host I's link down (a cable pulled)
#   testhosts_need_training skip (77) where mpirun or the fortunes corpus
#                           is missing; sets $corpus, lets mpirun run as root
# and after testhosts_up sets
#   TH_DIR       folder of the agent, the hostfile and the address map
#   TH_HOSTFILE  one line per host: "ADDRESS slots=1"
#   TH_NET       the hosts' subnet (for btl_tcp_if_include)
#   TH_MPIRUN    an array: mpirun with the options these hosts need
#                (append -np N and the command)
# Run, it brings up N hosts, runs a command with TH_HOSTFILE, TH_NET and
# TH_MPIRUN_LINE (TH_MPIRUN as one string) exported, and tears the hosts down:
#   tests/testhosts.sh N [--rate 100mbit] -- COMMAND ...
# docs/multi-host.md explains the mpirun options.

TH_ID=
TH_DIR=
TH_N=0

# A subnet 10.213.X.0/24 not yet routed on this machine (another run of the
# tests may hold one at the same time).
testhosts_pick_net() {
    local x
    for x in $(seq $((20 + $$ % 200)) 254) $(seq 20 254); do
        if ! ip -4 route show | grep -q "^10\.213\.$x\."; then
            echo "$x"
            return
        fi
    done
}

# Hosts left by a run that was killed outright (SIGKILL leaves no trap to
# run): their names carry the creator's process id, which is gone.
testhosts_sweep() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(pt[0-9]*h[0-9]*\).*/\1/p'); do
        pid=${ns#pt}
        pid=${pid%h*}
        kill -0 "$pid" 2>/dev/null && continue
        ip link del "pt${pid}br" 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    return 0
}

# tbf's bucket for RATE (tc's units: kbit, mbit, gbit): 2 ms at that rate,
# 16 KiB at least. A bucket lets its size through at the line's own speed
# after the link was idle; a large one (256 KiB) made a 100 Mb/s link pass
# most of each 0.4 MB pipeline transfer at once, faster than any real link.
testhosts_burst() {
    local r=${1,,} n unit mult
    n=${r%%[a-z]*}
    unit=${r#"$n"}
    case $unit in
    bit | "") mult=1 ;;
    kbit) mult=1000 ;;
    mbit) mult=1000000 ;;
    gbit) mult=1000000000 ;;
    *) echo 262144; return ;;
    esac
    awk -v n="$n" -v m="$mult" 'BEGIN { b = n * m / 8 * 0.002; printf "%d", b < 16384 ? 16384 : b }'
}

testhosts_up() {
    local n=$1 rate=${2:-}
    if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
        echo "skipped: test hosts need root and iproute2 (ip netns)"
        exit 77
    fi
    testhosts_sweep
    TH_ID=pt$$
    TH_DIR=$(mktemp -d)
    if ! ip netns add "${TH_ID}h0" 2>"$TH_DIR/err"; then
        echo "skipped: this machine does not allow network namespaces: $(cat "$TH_DIR/err")"
        rm -rf "$TH_DIR"
        exit 77
    fi
    TH_N=1
    local x
    x=$(testhosts_pick_net)
    TH_NET=10.213.$x.0/24
    ip link add "${TH_ID}br" mtu "${TH_MTU:-1500}" type bridge
    ip addr add "10.213.$x.254/24" dev "${TH_ID}br"
    ip link set "${TH_ID}br" up
    : > "$TH_DIR/hostfile"
    : > "$TH_DIR/hosts"
    local i ns addr
    for ((i = 0; i < n; i++)); do
        ns=${TH_ID}h$i
        addr=10.213.$x.$((i + 1))
        [ "$i" -eq 0 ] || { ip netns add "$ns"; TH_N=$((i + 1)); }
        ip link add "${TH_ID}v$i" mtu "${TH_MTU:-1500}" type veth peer name "${TH_ID}e$i" \
            mtu "${TH_MTU:-1500}"
        ip link set "${TH_ID}e$i" netns "$ns"
        ip link set "${TH_ID}v$i" master "${TH_ID}br" up
        ip -n "$ns" addr add "$addr/24" dev "${TH_ID}e$i"
        ip -n "$ns" link set "${TH_ID}e$i" up
        ip -n "$ns" link set lo up
        if [ -n "$rate" ]; then
            # both directions: the host's sends leave through its own end,
            # its receives through the bridge's end
            burst=$(testhosts_burst "$rate")
            tc qdisc add dev "${TH_ID}v$i" root tbf rate "$rate" burst "$burst" latency 100ms
            ip netns exec "$ns" tc qdisc add dev "${TH_ID}e$i" root tbf rate "$rate" \
                burst "$burst" latency 100ms
            # TCP's segments stay whole up to the bucket (tbf cuts a larger
            # one into packets of the MTU), as a NIC's segmentation offload
            # keeps them off the host's cores: at 100 Mb/s the test hosts'
            # kernel then handles about 15 times fewer packets on the
            # training's cores (TH_GSO=0 keeps the kernel's default, 64 KiB)
            if [ "${TH_GSO:-1}" != 0 ]; then
                gso=$((burst - 2 * ${TH_MTU:-1500}))
                [ "$gso" -gt 65536 ] && gso=65536
                { ip link set dev "${TH_ID}v$i" gso_max_size "$gso" &&
                    ip -n "$ns" link set dev "${TH_ID}e$i" gso_max_size "$gso"; } ||
                    echo "testhosts: cannot set gso_max_size here; tbf cuts segments to the MTU" >&2
            fi
        fi
        echo "$addr slots=1" >> "$TH_DIR/hostfile"
        echo "$addr $ns" >> "$TH_DIR/hosts"
    done
    # the agent: Open MPI calls it as `AGENT [options] HOST COMMAND...`. The
    # hosts share one /tmp and one host name, so each gets a session folder
    # of its own (orteds of two hosts racing to make the same one fail).
    cat > "$TH_DIR/agent" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
ns=\$(awk -v h="\$1" '\$1 == h { print \$2 }' "$TH_DIR/hosts")
[ -n "\$ns" ] || { echo "testhosts agent: unknown host \$1" >&2; exit 1; }
shift
mkdir -p "$TH_DIR/tmp/\$ns"
OMPI_MCA_orte_tmpdir_base="$TH_DIR/tmp/\$ns" exec ip netns exec "\$ns" sh -c "\$*"
EOF
    chmod +x "$TH_DIR/agent"
    TH_HOSTFILE=$TH_DIR/hostfile
    # rtc ^hwloc: orted's shared-memory topology write crashes now and then
    # when hosts share one machine; --bind-to none: they share its cores;
    # the keepalives: mpirun notices a lost host within 14 s and ends the
    # job, before the ranks' own 30 s deadline; the eager limit: messages
    # between stages up to TH_EAGER_LIMIT bytes (default 1 MiB) go out
    # without waiting for the receiver's handshake (docs/multi-host.md)
    local eager=${TH_EAGER_LIMIT:-1048576}
    TH_MPIRUN=(mpirun --oversubscribe --mca plm_rsh_agent "$TH_DIR/agent" --hostfile "$TH_HOSTFILE"
               --mca routed direct --mca rtc ^hwloc --mca btl tcp,self
               --mca btl_tcp_if_include "$TH_NET" --mca oob_tcp_if_include "$TH_NET"
               --mca btl_tcp_eager_limit "$eager" --mca btl_tcp_rndv_eager_limit "$eager"
               --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 3
               --mca oob_tcp_keepalive_probes 3 --bind-to none)
}

testhosts_need_training() {
    command -v mpirun >/dev/null || { echo "skipped: mpirun is not installed"; exit 77; }
    corpus=/usr/share/games/fortunes
    [ -d "$corpus" ] || { echo "skipped: $corpus is missing"; exit 77; }
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

testhosts_cut() {
    ip link set "${TH_ID}v$1" down
}

testhosts_down() {
    [ -n "$TH_ID" ] || return 0
    local i
    for ((i = 0; i < TH_N; i++)); do
        # a process still inside would keep the namespace's devices alive
        for pid in $(ip netns pids "${TH_ID}h$i" 2>/dev/null); do
            kill -9 "$pid" 2>/dev/null
        done
        ip link del "${TH_ID}v$i" 2>/dev/null
        ip netns del "${TH_ID}h$i" 2>/dev/null
    done
    ip link del "${TH_ID}br" 2>/dev/null
    rm -rf "$TH_DIR"
    TH_ID=
    return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    n=${1:?usage: testhosts.sh N [--rate RATE] -- COMMAND ...}
    shift
    rate=
    if [ "${1:-}" = --rate ]; then
        rate=$2
        shift 2
    fi
    [ "${1:-}" = -- ] && shift
    trap testhosts_down EXIT
    trap 'exit 130' INT TERM
    testhosts_up "$n" "$rate"
    export TH_HOSTFILE TH_NET TH_DIR
    TH_MPIRUN_LINE="${TH_MPIRUN[*]}"
    export TH_MPIRUN_LINE
    "$@"
fi
