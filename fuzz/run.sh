#!/usr/bin/env bash
# fuzz/run.sh BUILD SECONDS [RUNS]: runs every fuzzer of BUILD (fuzz_<name>,
# built by `make fuzz`) one after the other, each for SECONDS seconds, or
# for RUNS executions when RUNS is given (then SECONDS only caps the time),
# with one worker, on its committed seeds (fuzz/corpus/<name>) and every
# crash kept (fuzz/crashes/<name>). New inputs go to BUILD/fuzz-corpus/<name>
# and crash files to BUILD/fuzz-crashes/<name>, never into the repository:
# a crash, once fixed, is copied into fuzz/crashes/<name>/ by hand.
# FUZZ_TARGETS="json schedule" picks some. An allocation over 512 MB counts
# as a crash: no input a fuzzer makes describes that much. Prints each
# fuzzer's executions; exits 1 if any crashed, leaked, timed out or tripped
# a sanitizer.
set -u
build=$1 seconds=$2 runs=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
targets=${FUZZ_TARGETS:-$(cd "$here" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')}
status=0
summary=""
for name in $targets; do
    exe=$(realpath -m "$build/fuzz/fuzz_$name")
    [[ -x $exe ]] || { echo "no fuzzer $exe (make fuzz builds it)"; status=1; continue; }
    scratch=$(realpath -m "$build/fuzz-corpus/$name") crashes=$(realpath -m "$build/fuzz-crashes/$name")
    mkdir -p "$scratch" "$crashes"
    dict=()
    [[ -f $here/dict/$name.dict ]] && dict=(-dict="$here/dict/$name.dict")
    limit=(-max_total_time="$seconds")
    [[ -n $runs ]] && limit+=(-runs="$runs")
    dirs=("$scratch" "$here/corpus/$name")
    [[ -d $here/crashes/$name ]] && dirs+=("$here/crashes/$name")
    # one job in one worker process, which logs to fuzz-0.log in its folder
    logs=$build/fuzz-logs/$name
    rm -rf "$logs" && mkdir -p "$logs"
    echo "== fuzz_$name"
    (cd "$logs" && "$exe" -jobs=1 -workers=1 "${limit[@]}" "${dict[@]}" -timeout=10 \
        -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
        -artifact_prefix="$crashes/" "${dirs[@]}" > driver.log 2>&1)
    rc=$?
    log=$logs/fuzz-0.log
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    corpus=$(ls "$scratch" "$here/corpus/$name" | wc -l)
    found=$(ls "$crashes" | wc -l)
    line=$(printf '%-14s %12s execs %6s s  corpus %5s  rc %d  crash files %d' "$name" \
        "${execs:-?}" "${secs:-?}" "$corpus" "$rc" "$found")
    echo "$line"
    summary+="$line"$'\n'
    if [[ $rc -ne 0 ]]; then
        status=1
        grep -E 'ERROR|SUMMARY|property broken|Test unit written' "$log" | head -20
        echo "(the whole log: $log)"
    fi
done
echo "== summary"
printf '%s' "$summary"
exit $status
