# test_schedule_tensor: `pipetrain schedule --program --tensor T` lowers a
# gpt's passes into their slices' pieces with the tensor group's sums
# between them, as the pipeline does (tests/test_tensor_trace.c checks that
# a training step issues them in this order):
#   - every F and B of every worker is followed by its sums (AFc.m/k,
#     ABc.m/k), one fewer than the pass's pieces, on each worker's line;
#   - the timeline draws them (AF, AB) and the simulator costs them: the
#     makespan grows with --cost-collective, and with --link-bandwidth by a
#     block input's bytes per sum;
#   - T not dividing the heads, and --tensor without --program, are refused.
set -u
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gpt=(--layers 2 --heads 4 --embd 32 --seq 16 --vocab 64)
run() { "$PIPETRAIN" schedule --schedule 1f1b --stages 2 --microbatches 2 --program "$@"; }

run --tensor 2 "${gpt[@]}" > "$dir/t2" || { echo "FAIL: --tensor 2"; cat "$dir/t2"; exit 1; }
for token in "F0.0 AF0.0/0" "AF0.0/2 SF0.0>1" "F1.0 AF1.0/0" "AF1.0/3 B1.0" "B0.1 AB0.1/0" "AB1.1/2 SB1.1>0"; do
    grep -qF -- "$token" "$dir/t2" || { echo "FAIL: no '$token' in the program"; cat "$dir/t2"; exit 1; }
done
run "${gpt[@]}" --tensor 1 > "$dir/t1" 2>&1 && { echo "FAIL: gpt flags taken without --tensor 2 or --memory"; exit 1; }
grep -q "AF" "$dir/t1" && { echo "FAIL: sums without --tensor"; exit 1; }

span() { awk '/^makespan/ { print $2 }' "$1"; }
run --tensor 2 "${gpt[@]}" --cost-collective 0.5 > "$dir/c" || { echo "FAIL: --cost-collective"; exit 1; }
grep -q '^worker 0:.* AF .* AB ' "$dir/c" || { echo "FAIL: the timeline draws no sums"; cat "$dir/c"; exit 1; }
# transfers of 1 byte: what the slow link adds to the run without one ($dir/t2)
# is the sums' bytes (16 x 32 x 4 each: about 16 ms at 1 Mbit/s)
run --tensor 2 "${gpt[@]}" --link-bandwidth 1mbit --transfer-bytes 1 > "$dir/slow" ||
    { echo "FAIL: --link-bandwidth"; cat "$dir/slow"; exit 1; }
awk -v c="$(span "$dir/c")" -v a="$(span "$dir/t2")" 'BEGIN { exit !(c > a) }' ||
    { echo "FAIL: sums costing 0.5 do not lengthen the step"; exit 1; }
awk -v f="$(span "$dir/t2")" -v s="$(span "$dir/slow")" 'BEGIN { exit !(s > f + 0.04) }' ||
    { echo "FAIL: the link does not cost the sums: $(span "$dir/slow") vs $(span "$dir/t2")"; exit 1; }

run --tensor 3 "${gpt[@]}" > "$dir/bad" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "does not divide the 4 attention heads" "$dir/bad" ||
    { echo "FAIL: --tensor 3 over 4 heads: rc $rc"; cat "$dir/bad"; exit 1; }
"$PIPETRAIN" schedule --schedule 1f1b --stages 2 --tensor 2 > "$dir/bad" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "add --program" "$dir/bad" ||
    { echo "FAIL: --tensor without --program: rc $rc"; cat "$dir/bad"; exit 1; }
echo "ok"
