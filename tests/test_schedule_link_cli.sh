#!/bin/bash
# test_schedule_link_cli: `pipetrain schedule` and `plan` with a link:
# --link-bandwidth in its units (100mbit, 12.5MB/s and 12500000 bytes/s are
# one rate), the makespan of gpipe with one micro-batch against its closed
# form (two transfers, each its bytes over the bandwidth plus the latency),
# the transfer's bytes from --memory's gpt, a slower link never faster, and
# the flags that make no sense refused (exit 2, the flag named).
set -u
PT=${PIPETRAIN:?PIPETRAIN not set}
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
makespan() { "$PT" schedule --json "$@" | sed -n 's/.*"makespan":\([^,]*\),.*/\1/p'; }
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-9 * (1 + b)) }'; }

base=(--schedule gpipe --stages 2 --microbatches 1 --cost-f 0.01 --cost-b 0.02 --cost-w 0.005)
# 1250000 bytes at 100 Mb/s: 0.1 s on the wire, twice, plus 2 ms latency each way
want=$(awk 'BEGIN { print 0.01 + 0.102 + 0.01 + 0.025 + 0.102 + 0.025 }')
for rate in 100mbit 12.5MB/s 12500000 0.1Gbit; do
    got=$(makespan "${base[@]}" --link-bandwidth $rate --link-latency 2ms --transfer-bytes 1250000)
    near "$got" "$want" || bad "--link-bandwidth $rate: makespan '$got', want $want"
done
free=$(makespan "${base[@]}")
near "$free" 0.07 || bad "no link: makespan '$free', want 0.07"

# the gpt's boundary: 4 x 256 x 384 x 4 bytes = 1572864; at 1 Gb/s 12.58 ms
m=(--memory --layers 4 --embd 384 --heads 6 --seq 256 --batch 4)
out=$("$PT" schedule "${base[@]}" "${m[@]}" --link-bandwidth 1gbit) || bad "--memory with a link exited $?"
grep -q "a transfer of 1572864 bytes 0.01258 s on the wire" <<< "$out" ||
    bad "the gpt's transfer is not 1572864 bytes: $(grep link: <<< "$out")"

prev=0
for rate in 10gbit 1gbit 100mbit; do
    t=$(makespan --schedule 1f1b --stages 4 --microbatches 8 --cost-f 0.01 --cost-b 0.01 \
        --cost-w 0.01 --link-bandwidth $rate --transfer-bytes 400000)
    awk -v a="$t" -v b="$prev" 'BEGIN { exit !(a >= b) }' || bad "1f1b at $rate: $t, faster than $prev"
    prev=$t
done

refuse() {
    local want=$1
    shift
    "$PT" "$@" >/dev/null 2>"$TMPERR"
    local rc=$?
    [[ $rc -eq 2 ]] && grep -q -- "$want" "$TMPERR" || bad "$* -> exit $rc: $(cat "$TMPERR")"
}
TMPERR=$(mktemp)
trap 'rm -f "$TMPERR"' EXIT
refuse "--link-bandwidth '10xbit'" schedule --link-bandwidth 10xbit --transfer-bytes 5
refuse "--link-bandwidth '0mbit'" schedule --link-bandwidth 0mbit --transfer-bytes 5
refuse "--transfer-bytes N" schedule --link-bandwidth 1gbit
refuse "--transfer-bytes does nothing" schedule --transfer-bytes 5
refuse "say the same" schedule --latency 1 --link-latency 1ms
refuse "--link-latency '5 parsecs'" schedule --link-latency "5 parsecs"
refuse "--link-bandwidth 'fast'" plan --link-bandwidth fast

out=$("$PT" plan --stages 2 --layers 2 --embd 64 --heads 2 --seq 32 --microbatches 4 --reps 1 \
    --link-bandwidth 1mbit --link-latency 1ms) || bad "plan with a link exited $?"
grep -q "link between workers: 1 Mbit/s" <<< "$out" || bad "plan does not say the link"
slow=$(awk '$1 == "1f1b" && $2 == 4 { print $4 }' <<< "$out")
# 32 x 64 x 4 bytes at 1 Mbit/s: 16.4 ms per transfer, at least 2 on the path
awk -v t="$slow" 'BEGIN { exit !(t >= 32.7) }' || bad "plan's 1f1b step at 1 Mbit/s is $slow ms"
# 1f1b with its first stage's weight passes deferred is ranked too, and the
# link costs it no more
deferred=$(awk '$1 == "1f1b" && $2 == "--defer-w" && $3 == 4 { print $5 }' <<< "$out")
awk -v d="$deferred" -v t="$slow" 'BEGIN { exit !(d != "" && d <= t) }' ||
    bad "plan's 1f1b --defer-w step at 1 Mbit/s is '$deferred' ms (1f1b: $slow)"

[ $fail -eq 0 ] && echo ok
exit $fail
