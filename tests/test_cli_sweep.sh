#!/usr/bin/env bash
# test_cli_sweep: a sweep of bad command lines. Every numeric flag of train,
# generate, schedule and plan (merge has none) is given -1, 0, huge values,
# nan, inf, junk, an empty string, a leading space and hex: each must exit 1
# or 2 with a message naming the flag, never crash (a status of 128 or more
# is a signal) and never run with a meaningless value; the values that do
# mean something (0 for --grad-clip, --warmup, ...) must run (exit 0). Then
# the defects of issue 13: values accepted silently, sizes that crashed
# instead of being refused, flags that did nothing, and wrong messages.
set -u
PT=${PIPETRAIN:?PIPETRAIN not set}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

echo "some text to train on, long enough for a few windows of tokens." > "$dir/t.txt"
for _ in 1 2 3 4 5; do cat "$dir/t.txt" "$dir/t.txt" > "$dir/u.txt"; mv "$dir/u.txt" "$dir/t.txt"; done
tiny=(--layers 1 --heads 2 --embd 8 --seq 8)
"$PT" train "${tiny[@]}" --batch 4 --steps 1 --data "$dir/t.txt" \
    --save "$dir/g.safetensors" > /dev/null || { echo "FAIL: cannot make the checkpoint"; exit 1; }

values=(-1 0 1e30 99999999999999999999 nan inf -inf 12abc abc '' ' 5' 0x10)

# run WANT FLAG ARGS...: WANT is ok (exit 0) or refused (exit 1 or 2, a
# message naming FLAG)
run() {
    local want=$1 flag=$2; shift 2
    local out rc
    out=$(timeout 60 "$PT" "$@" 2>&1 > /dev/null); rc=$?
    if [ "$rc" -ge 124 ] || [[ $out == *"runtime error"* || $out == *Sanitizer* ]]; then
        fail "pipetrain $* -> status $rc (a crash, a hang or a sanitizer's report): $out"
    elif [ "$want" = ok ] && [ "$rc" -ne 0 ]; then
        fail "pipetrain $* -> status $rc, expected it to run: $out"
    elif [ "$want" = refused ] && { [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ] ||
                                    [[ $out != *"$flag"* ]]; }; then
        fail "pipetrain $* -> status $rc, expected 1 or 2 and a message naming $flag: $out"
    fi
}

# The table: the base command line (bases[]: a run fast enough to run whole
# when the value is accepted), the flag given last, and the one sweep value
# that flag accepts ('-': none; only 0 ever means something).
declare -A bases=(
    [train]="train ${tiny[*]} --batch 4 --steps 1 --eval-batches 1 --data $dir/t.txt"
    [sgd]="train ${tiny[*]} --batch 4 --steps 1 --data $dir/t.txt --optimizer sgd"
    [save]="train ${tiny[*]} --batch 4 --steps 1 --data $dir/t.txt --save $dir/s.safetensors"
    [trace]="train ${tiny[*]} --batch 4 --steps 1 --data $dir/t.txt --trace $dir/x.json"
    [gen]="generate --load $dir/g.safetensors --tokens 2"
    [sched]="schedule --schedule 1f1b --stages 2 --microbatches 2"
    [inter]="schedule --schedule interleaved --stages 2 --microbatches 2"
    [mem]="schedule --schedule 1f1b --stages 2 --microbatches 2 --memory"
    [prog]="schedule --schedule 1f1b --stages 2 --microbatches 2 --program"
    [plan]="plan --stages 2 --layers 1 --heads 1 --embd 8 --seq 8 --reps 1 --microbatches 2"
    [mlp_plan]="plan --stages 2 --model mlp --reps 1 --microbatches 2"
)
table="
train     layers            -
train     heads             -
train     embd              -
train     seq               -
train     vocab             -
train     batch             -
train     microbatches      -
train     steps             -
train     lr                -
train     min-lr            0
train     warmup            0
train     decay-steps       0
train     weight-decay      0
train     beta1             0
train     beta2             0
sgd       momentum          0
train     grad-clip         0
train     seed              0
train     eval-every        0
train     eval-batches      -
save      save-every        0
trace     trace-steps       -
train     stages            -
train     replicas          -
train     virtual           -
train     max-stage-memory  0
train     threads           0
train     balance           -
train     widths            -
gen       tokens            -
gen       temperature       0
gen       seed              0
gen       stages            -
gen       heads             -
sched     stages            -
sched     microbatches      -
inter     virtual           -
sched     replicas          -
sched     cost-f            0
sched     cost-b            0
sched     cost-w            0
sched     latency           0
prog      cost-collective   0
prog      tied              -
mem       layers            -
mem       heads             -
mem       embd              -
mem       seq               -
mem       vocab             -
mem       batch             -
mem       balance           -
plan      stages            -
plan      microbatches      -
plan      virtual           -
plan      balance           -
plan      max-stage-memory  0
plan      reps              -
plan      layers            -
plan      heads             -
plan      embd              -
plan      seq               -
plan      vocab             -
plan      batch             -
mlp_plan  widths            -
"
n=0
while read -r base flag accepts; do
    [ -n "$base" ] || continue
    read -ra args <<< "${bases[$base]}"
    for v in "${values[@]}"; do
        want=refused
        [ "$v" = "$accepts" ] && want=ok
        run "$want" "--$flag" "${args[@]}" "--$flag" "$v"
        n=$((n + 1))
    done
done <<< "$table"
echo "swept $n command lines"

# issue 13, accepted silently: each is refused, naming the flag
read -ra train <<< "${bases[train]}"
run refused --min-lr "${train[@]}" --min-lr nan
run refused --min-lr "${train[@]}" --lr 1e-3 --min-lr 1e-2
run refused --weight-decay "${train[@]}" --weight-decay nan
run refused --weight-decay "${train[@]}" --weight-decay -1
run refused --decay-steps "${train[@]}" --decay-steps -1
run refused --lr "${train[@]}" --lr 1e20
run refused --steps "${train[@]}" --steps 2147483648
run refused --val-data "${train[@]}" --val-data /nonexistent
run refused --batch "${train[@]}" --batch=0x10
run refused --batch "${train[@]}" --batch=' 5'
# sizes that crashed: refused before anything is allocated, naming the
# flag and the bytes
for cmd in "plan --stages 2 --layers 1 --heads 1 --embd 8 --seq 1000000 --reps 1" \
           "train --layers 1 --heads 2 --embd 8 --seq 100000 --stages 2 --steps 1 --data $dir/t.txt"; do
    out=$(timeout 60 "$PT" $cmd 2>&1 > /dev/null); rc=$?
    [[ ($rc -eq 1 || $rc -eq 2) && $out == *"--seq"* && $out == *"bytes"* ]] ||
        fail "pipetrain $cmd -> status $rc: $out"
done
run refused --cost-b schedule --schedule 1f1b --stages 2 --microbatches 4 --cost-b 1e20
out=$("$PT" schedule --schedule 1f1b --stages 2 --microbatches 4 --cost-f 1e-300 2>&1); rc=$?
[[ $rc -eq 1 && $out == *"too long to draw"* ]] || fail "--cost-f 1e-300 -> status $rc: $out"
# flags that would do nothing in the mode chosen
run refused --widths "${train[@]}" --widths 64,10
run refused --layers train --model mlp --widths 64,10 --data "$dir/d.csv.gz" --layers 2
run refused --eval-batches train --model mlp --widths 64,10 --data "$dir/d.csv.gz" \
    --eval-batches 2
run refused --fresh-optimizer "${train[@]}" --fresh-optimizer
run refused --save-every "${train[@]}" --save-every 5
run refused --momentum "${train[@]}" --momentum 0.5
run refused --beta2 "${train[@]}" --optimizer sgd --beta2 0.9
run refused --schedule "${train[@]}" --stages 2 --schedule gpipe \
    --schedule-file "$PT_TEST_DATA/pipeline/v_shape_2x3.txt"
run refused --max-stage-memory "${train[@]}" --stages 2 --balance 1,2 --max-stage-memory 100
run refused --heads generate --load "$dir/g.safetensors" --tokens 2 --heads 4
run refused --stages generate --load "$dir/g.safetensors" --stages 0
run refused --min-lr "${train[@]}" --decay-steps 0 --min-lr 1e-5
run refused --seed generate --load "$dir/g.safetensors" --tokens 2 --temperature 0 --seed 3
# a checkpoint that does not record its heads needs --heads, and takes it
if python3 "$(dirname "$0")/hf_gpt2_writer.py" "$dir/hf.safetensors" 1 16 8 40; then
    run refused --heads generate --load "$dir/hf.safetensors" --tokens 2
    run ok --heads generate --load "$dir/hf.safetensors" --tokens 2 --heads 4
fi
# wrong messages: the error of the pipeline, not "holds an mlp"
out=$("$PT" generate --load "$dir/g.safetensors" --stages 4 2>&1); rc=$?
[[ $rc -eq 2 && $out == *"need at least 4 blocks"* && $out != *mlp* ]] ||
    fail "generate --stages 4 on 3 blocks -> status $rc: $out"

echo "$fails failures"
exit $((fails > 0))
