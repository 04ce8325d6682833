#!/bin/bash
# test_schedule_cli: `pipetrain schedule` end to end: the ASCII pictures of
# gpipe and 1f1b at P=4, M=4 match the golden fill-drain and 1F1B pictures;
# --json carries the fields scripts read; --svg and --trace write a chart and
# a trace with one bar / event per action; --program prints the lowered
# program; --from loads a hand-written file and reports a bad one naming the
# worker, and --json reports even a file that does not parse; parameters a
# schedule cannot take and flags that would do nothing exit 2 with a message.
set -u
PT=${PIPETRAIN:?PIPETRAIN not set}
DATA=${PT_TEST_DATA:?PT_TEST_DATA not set}/sched
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

for s in gpipe 1f1b; do
    "$PT" schedule --schedule $s --stages 4 --microbatches 4 > "$TMP/$s.txt" || bad "$s exited $?"
    diff -u "$DATA/${s}_p4_m4.txt" "$TMP/$s.txt" || bad "$s picture differs from the golden one"
done

json=$("$PT" schedule --schedule 1f1b --stages 4 --microbatches 8 --json) || bad "--json exited $?"
for field in '"schedule":"1f1b"' '"stages":4' '"microbatches":8' '"virtual":1' \
             '"bubble_fraction":0.2727272727' '"peak_activations":[4,3,2,1]' '"valid":true' \
             '"makespan":33'; do
    [[ $json == *"$field"* ]] || bad "--json lacks $field: $json"
done
[[ $(printf '%s\n' "$json" | wc -l) -eq 1 && $json == \{*\} ]] || bad "--json is not one object"

"$PT" schedule --schedule zbh1 --stages 4 --microbatches 8 --svg "$TMP/z.svg" \
    --trace "$TMP/z.json" > /dev/null || bad "--svg/--trace exited $?"
# 4 workers x 8 micro-batches x (F, B, W) = 96 actions
[[ $(grep -c 'stroke="white"' "$TMP/z.svg") -eq 96 ]] || bad "svg: bars != 96"
grep -q '^<svg ' "$TMP/z.svg" && grep -q '</svg>' "$TMP/z.svg" || bad "svg: not an svg"
grep -q 'W weight gradient' "$TMP/z.svg" || bad "svg: no legend"
[[ $(grep -c '"ph":"X"' "$TMP/z.json") -eq 96 ]] || bad "trace: events != 96"
[[ $(grep -c '"thread_name"' "$TMP/z.json") -eq 4 ]] || bad "trace: tracks != 4"
tail -c 4 "$TMP/z.json" | grep -q ']}' || bad "trace: not closed"

# --save writes the text format; --from reads it back to the same picture
"$PT" schedule --schedule interleaved --stages 2 --microbatches 4 --virtual 2 \
    --save "$TMP/i.sched" > "$TMP/i1.txt" || bad "--save exited $?"
"$PT" schedule --from "$TMP/i.sched" > "$TMP/i2.txt" || bad "--from saved file exited $?"
diff -q "$TMP/i1.txt" "$TMP/i2.txt" > /dev/null || bad "--save/--from changed the schedule"

out=$("$PT" schedule --from "$DATA/good_1f1b_p2_m3.sched" 2>&1) || bad "--from good file: $out"
[[ $out == *"bubble fraction 0.2500"* ]] || bad "--from good file: $out"
out=$("$PT" schedule --from "$DATA/bad_deadlock.sched" 2>&1); rc=$?
[[ $rc -eq 1 && $out == *"worker 0 waits at BW0.0"* ]] || bad "--from deadlock: rc $rc: $out"
out=$("$PT" schedule --from "$DATA/bad_missing.sched" --json 2>/dev/null); rc=$?
[[ $rc -eq 1 && $out == *'"valid":false'* ]] || bad "--from bad --json: rc $rc: $out"
# a file that does not even parse still gives --json readers one object
printf 'workers 2\nnonsense here\n' > "$TMP/unparsed.sched"
out=$("$PT" schedule --from "$TMP/unparsed.sched" --json 2>/dev/null); rc=$?
[[ $rc -eq 1 && $(printf '%s\n' "$out" | wc -l) -eq 1 && $out == \{*'"valid":false,"error":"'*'line 2'*\} ]] ||
    bad "--from unparsable --json: rc $rc: $out"

# per-chunk costs: a slow last stage (F 3, BW 6) sets the pace: forwards
# reach it at 2 and run to 8, its backwards to 20, the other two stages' last
# backwards (2 each) end at 22 and 24
printf '1 1 1\n1 1 1\n3 3 3\n' > "$TMP/costs"
out=$("$PT" schedule --schedule gpipe --stages 3 --microbatches 2 --costs "$TMP/costs" --json)
[[ $out == *'"makespan":24'* ]] || bad "--costs: $out"

# --program prints the lowered program, which reads back as a program
out=$("$PT" schedule --schedule 1f1b --stages 2 --microbatches 2 --tied 0-1 --program) ||
    bad "--program exited $?"
[[ $out == *"program train"* && $out == *"0: F0.0 SF0.0>1 F0.1 SF0.1>1 RB0.0<1 BW0.0 RB0.1<1 BW0.1 T0-1 N S"* ]] ||
    bad "--program: $out"

# --program draws the program's timeline, collectives where they take time;
# it is lowered as a pipeline lowers it: worker 1's backward sends its input
# gradient before its weight pass (B, SB, W), so worker 0's B0 starts a unit
# earlier than the schedule's fused BW would let it
out=$("$PT" schedule --schedule 1f1b --stages 2 --microbatches 3 --tied 0-1 --program \
      --cost-collective 1) || bad "--program --cost-collective exited $?"
[[ $out == *"1: RF1.0<0 F1.0 B1.0 SB1.0>0 W1.0 "* && $out == *"worker 1: .... F0   B0   W0   F1"*"T0-1 N"* &&
   $out == *"makespan 13 with collectives of 1"* ]] ||
    bad "--program picture: $out"

# costs 1e18 apart make a timeline too long to draw: refused, no crash
err=$("$PT" schedule --schedule 1f1b --stages 2 --microbatches 4 --cost-b 1e9 --cost-f 1e-9 2>&1 >/dev/null)
rc=$?
[[ $rc -eq 1 && $err == *"too long to draw"* ]] || bad "--cost-b 1e9 --cost-f 1e-9: exit $rc, '$err'"

# --memory: each worker's predicted bytes for a gpt: 12 layers of 768 cut
# 4,3,3,4 hold 82 MiB of parameters on worker 0 and more activations on the
# first 1f1b worker than on the last
out=$("$PT" schedule --schedule 1f1b --stages 4 --microbatches 8 --memory --layers 12 --heads 12 \
      --embd 768 --seq 64 --balance 4,3,3,4) || bad "--memory exited $?"
row0=$(echo "$out" | awk '$1 == "0" && NF == 8')
row3=$(echo "$out" | awk '$1 == "3" && NF == 8')
[[ $row0 == *"82.05"* ]] && awk -v a="$row0" -v b="$row3" 'BEGIN { split(a, x); split(b, y);
    exit !(x[6] > y[6]) }' || bad "--memory: $out"

# --memory of a spec: --balance counts its layers (the loss joins the last):
# linear 1024 1024 and relu (4.00 MiB of parameters), then linear 1024 10;
# without --repack-weights pipetrain's own products keep the first matrix
# packed both ways (8 MiB more; none on OpenBLAS's)
spec='linear 1024 1024; relu; linear 1024 10; mse'
out=$("$PT" schedule --schedule 1f1b --stages 2 --microbatches 4 --memory \
      --model-spec "$spec" --balance 2,1 --repack-weights) ||
    bad "--memory --model-spec exited $?"
row0=$(echo "$out" | awk '$1 == "0" && NF == 8')
row1=$(echo "$out" | awk '$1 == "1" && NF == 8')
[[ $out == *"spec of 3 layers"* && $(echo "$row0" | awk '{print $2}') == 4.00 &&
   $(echo "$row1" | awk '{print $2}') == 0.04 ]] || bad "--memory --model-spec: $out"
out=$("$PT" schedule --schedule 1f1b --stages 2 --microbatches 4 --memory \
      --model-spec "$spec" --balance 2,1) || bad "--memory --model-spec exited $?"
kept=$(echo "$out" | awk '$1 == "0" && NF == 8 {print $2}')
[[ $kept == 12.00 || $kept == 4.00 ]] || bad "--memory, panels kept: $out"

# --defer-w: worker 0's W after its next forward, one more micro-batch at its peak
out=$("$PT" schedule --schedule 1f1b --stages 2 --microbatches 6 --defer-w) ||
    bad "--defer-w exited $?"
[[ $out == *"worker 0: F0 F1 .. .. B0 F2 W0 B1 F3 W1"* &&
   $out == *"worker 0: busy 18, idle 3, peak activations 3"* ]] || bad "--defer-w: $out"

expect2() {
    local want=$1; shift
    local err
    err=$("$PT" schedule "$@" 2>&1 >/dev/null); local rc=$?
    [[ $rc -eq 2 ]] || bad "'$*' exited $rc, want 2"
    [[ $err == *"$want"* ]] || bad "'$*' said '$err', want '$want'"
}
expect2 "--stages '0': expected an integer in [1, 1024]" --schedule 1f1b --stages 0 --microbatches 4
expect2 "multiple of stages" --schedule interleaved --stages 4 --microbatches 6 --virtual 2
expect2 "has no chunks" --schedule gpipe --stages 4 --microbatches 4 --virtual 2
expect2 "has no chunks" --schedule 1f1b --stages 4 --microbatches 4 --virtual 3
expect2 "exactly 2 chunks" --schedule zbv --stages 4 --microbatches 4 --virtual 3
expect2 "--microbatches '0': expected an integer in [1, " --schedule gpipe --stages 2 --microbatches 0
expect2 "unknown schedule" --schedule nonesuch --stages 2 --microbatches 2
expect2 "--cost-f '-1': expected a finite number in [0, 1e+09]" --schedule 1f1b --cost-f -1
expect2 "unknown flag" --schedule 1f1b --bogus 1
expect2 "pairs of chunks" --schedule 1f1b --tied 0
expect2 "needs chunks of the schedule" --schedule 1f1b --stages 2 --microbatches 2 --tied 0-5 --program
expect2 "drop --schedule" --from "$DATA/good_1f1b_p2_m3.sched" --stages 2
expect2 "add --memory" --schedule 1f1b --stages 2 --layers 3
expect2 "not go with --json" --schedule 1f1b --stages 2 --memory --json
expect2 "need at least 8 blocks" --schedule 1f1b --stages 8 --memory --layers 2
expect2 "adamw, sgd or none" --schedule 1f1b --stages 2 --memory --optimizer lamb
expect2 "balance sums to 4 layers, but the model has 3 layers" --schedule 1f1b --stages 2 \
    --memory --model-spec 'linear 4 8; relu; linear 8 2; mse' --balance 2,2
expect2 "spec layer 2: unknown layer 'relux'" --schedule 1f1b --stages 2 --memory --model-spec 'linear 4 8; relux; mse'
expect2 "the spec (--model-spec) gives every layer's shape" --schedule 1f1b --stages 2 --memory \
    --model-spec 'linear 4 8; relu; linear 8 2; mse' --embd 64
expect2 "--layers '0': expected an integer in [1, 1024]" --schedule 1f1b --stages 2 --memory --layers 0

expect2 "--tied does nothing without --program" --schedule 1f1b --stages 2 --tied 0-1
expect2 "--cost-collective does nothing without --program" --schedule 1f1b --cost-collective 1
expect2 "do nothing with --costs" --schedule 1f1b --stages 2 --costs "$TMP/costs" --cost-b 2
expect2 "not go with --json" --schedule 1f1b --stages 2 --program --json
expect2 "this one splits them and orders its weight passes itself" --schedule zbh1 --stages 2 \
    --defer-w
expect2 "pipedream's backwards carry their weight updates" --schedule pipedream --stages 2 --defer-w
expect2 "drop --schedule, --stages, --microbatches, --virtual, --replicas and --defer-w" \
    --from "$DATA/good_1f1b_p2_m3.sched" --defer-w

exit $fail
