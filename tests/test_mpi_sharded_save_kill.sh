#!/usr/bin/env bash
# test_mpi_sharded_save_kill: `mpirun -np 2 pipetrain train --stages 2
# --save DIR --save-every 1` writes a checkpoint set after every step, each
# rank its own shard; rank 1 is killed with SIGKILL at a random moment (after
# the first set exists), KILLS times (default 3; PT_KILLS=100 for a long
# run). After each kill:
#   - DIR loads (the index names only complete shards: the loader checks
#     every shard it names), and `pipetrain merge` turns it into one file;
#   - that file is byte for byte what an uninterrupted threads run saves at
#     the step the set records (the set is a complete save, not a mix);
#   - at most one staging folder of the killed save is left beside DIR, and
#     the next save into DIR removes it.
# The kills that land while a staging folder exists hit a save in progress.
source "$(dirname "$0")/mpi_kill.sh"
kills=${PT_KILLS:-3}
model=(--layers 2 --heads 4 --embd 128 --seq 32 --batch 8 --microbatches 4 --lr 1e-3
       --decay-steps 1000 --seed 3 --data "$corpus" --balance 2,2)
ck="$dir/ck"

state_sum() { { cat "$ck/trainer_state.json" 2>/dev/null || true; } | md5sum; }

mid_save=0
for k in $(seq "$kills"); do
    # each job continues the set the last one left (or starts it)
    resume=()
    [ -d "$ck" ] && resume=(--resume "$ck")
    mpirun --oversubscribe -np 2 "$PIPETRAIN" train --stages 2 "${model[@]}" --steps 100000 \
        --save "$ck" --save-every 1 "${resume[@]}" > "$dir/out" 2>&1 &
    job=$!
    before=$(state_sum)
    for _ in $(seq 600); do
        now=$(state_sum)
        [ -f "$ck/trainer_state.json" ] && [ "$now" != "$before" ] && break
        kill -0 "$job" 2>/dev/null || { echo "FAIL: the job ended early"; cat "$dir/out"; exit 1; }
        sleep 0.02
    done
    victim=$(rank_pid "$job" 1)
    [ -n "$victim" ] || { echo "FAIL: rank 1's process not found"; cat "$dir/out"; exit 1; }
    sleep "0.$(printf '%03d' $((RANDOM % 400)))"
    staging_then=$( (ls -d "$ck".staging.* 2>/dev/null || true) | wc -l)
    kill -9 "$victim" 2>/dev/null || true
    set +e
    wait "$job"
    rc=$?
    set -e
    job=
    [ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0 after losing a rank"; cat "$dir/out"; exit 1; }
    [ "$staging_then" -gt 0 ] && mid_save=$((mid_save + 1))
    left=$( (ls -d "$ck".staging.* 2>/dev/null || true) | wc -l)
    [ "$left" -le 1 ] || { echo "FAIL: $left staging folders left beside the set"; ls -a "$dir"; exit 1; }

    rm -f "$dir/merged.safetensors"
    "$PIPETRAIN" merge "$ck" "$dir/merged.safetensors" > "$dir/merge.out" 2>&1 ||
        { echo "FAIL: kill $k: the set does not load:"; cat "$dir/merge.out"; ls -la "$ck"; exit 1; }
    step=$(sed -n 's/.*"step": *\([0-9]*\).*/\1/p' "$ck/trainer_state.json" | head -1)
    [ -n "$step" ] || { echo "FAIL: no step in trainer_state.json"; exit 1; }
    rm -f "$dir/ref.safetensors"
    "$PIPETRAIN" train --stages 2 "${model[@]}" --steps "$step" --save "$dir/ref.safetensors" \
        > "$dir/ref.out" 2>&1 || { echo "FAIL: the reference run"; cat "$dir/ref.out"; exit 1; }
    cmp -s "$dir/merged.safetensors" "$dir/ref.safetensors" ||
        { echo "FAIL: kill $k: the set at step $step differs from an uninterrupted run's"; exit 1; }
    echo "kill $k: rank 1 killed ($([ "$staging_then" -gt 0 ] && echo during || echo between) a save); the set at step $step loads and equals the uninterrupted run"
done
echo "$mid_save of $kills kills landed while a save was in progress"
echo ok
