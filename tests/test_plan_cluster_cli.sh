#!/bin/bash
# test_plan_cluster_cli: `pipetrain plan --cluster` and `plan --check` end to
# end: the check of the published runs passes and marks its fitted rows; a
# search on an example cluster prints the ranked layouts (--top of them,
# fastest first) and --draw a schedule; a Hugging Face config.json serves as
# the model; a broken cluster file, a published figure without its source,
# and flags that make no sense are refused with the file, field or flag
# named (exit 1 for files, 2 for flags).
set -u
PT=${PIPETRAIN:?PIPETRAIN not set}
DATA=${PT_TEST_DATA:?PT_TEST_DATA not set}
SRC=${PT_SOURCE_DIR:?PT_SOURCE_DIR not set}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

out=$("$PT" plan --check "$DATA/published_runs.json") || bad "--check exited $?"
[[ $out == *"worst bubble difference"* && $out == *"worst error of the predicted rows"* ]] ||
    bad "--check lacks its summaries"
[[ $(grep -c '(fitted)' <<< "$out") -eq 2 ]] || bad "--check marks $(grep -c '(fitted)' <<< "$out") fitted rows, want 2"
out=$("$PT" plan --check "$DATA/published_runs.json" --fit-rows 3,7) || bad "--fit-rows 3,7 exited $?"
grep -q '^3 .*(fitted)' <<< "$out" && grep -q '^7 .*(fitted)' <<< "$out" || bad "--fit-rows 3,7 not marked"

cluster=$SRC/examples/clusters/h100-64.json
out=$("$PT" plan --cluster "$cluster" --model gpt2-xl --global-batch 64 --top 3) ||
    bad "--cluster exited $?"
ranks=$(grep -E '^[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ ' <<< "$out")
[[ $(wc -l <<< "$ranks") -eq 3 ]] || bad "--top 3 printed: $ranks"
times=$(awk '{print $11}' <<< "$ranks")
[[ $(sort -g <<< "$times") == "$times" ]] || bad "not fastest first: $times"
[[ $out == *"cluster h100-64: 8 nodes x 8 h100"* ]] || bad "the cluster line: $out"

out=$("$PT" plan --cluster "$cluster" --model megatron-39.1b --global-batch 256 --top 1 --draw) ||
    bad "--draw exited $?"
grep -qE '^worker +0: ' <<< "$out" || bad "--draw drew no schedule: $out"

cat > "$TMP/config.json" <<'JSON'
{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 6, "n_head": 8,
 "n_embd": 512, "n_positions": 512, "vocab_size": 32000}
JSON
out=$("$PT" plan --cluster "$cluster" --model "$TMP/config.json" --global-batch 32 --top 1) ||
    bad "--model config.json exited $?"
[[ $out == *"6 layers, 8 heads, width 512, sequence 512, vocabulary 32000"* ]] ||
    bad "the config's model: $out"

echo '{"device": "h100", "nodes": 2, "devices_per_node": 8, "intra_node": {"bandwidth_gbs": 450}}' > "$TMP/c.json"
msg=$("$PT" plan --cluster "$TMP/c.json" --model gpt2 --global-batch 8 2>&1); rc=$?
[[ $rc -eq 1 && $msg == *c.json* && $msg == *inter_node* ]] || bad "a cluster without its network: $rc $msg"

sed 's/\[137, "narayanan2021 Table 1, row 1 (1.7 billion parameters)"\]/137/' \
    "$DATA/published_runs.json" > "$TMP/runs.json"
msg=$("$PT" plan --check "$TMP/runs.json" 2>&1); rc=$?
[[ $rc -eq 1 && $msg == *"tflops_per_gpu"* && $msg == *source* ]] || bad "a figure without its source: $rc $msg"

for args in "--cluster $cluster --model gpt2" "--cluster $cluster --model gpt2 --global-batch 8 --precision fp4" \
            "--check $DATA/published_runs.json --fit-rows 1" "--cluster $cluster --model nope --global-batch 8" \
            "--cluster $cluster --model gpt2 --global-batch 8 --top 0"; do
    msg=$("$PT" plan $args 2>&1); rc=$?
    [[ $rc -eq 2 && $msg == "pipetrain plan: "* ]] || bad "plan $args: exit $rc: $msg"
done
grep -q -- '--global-batch' <<< "$("$PT" plan --cluster x --help)" || bad "--help does not list --global-batch"
exit $fail
