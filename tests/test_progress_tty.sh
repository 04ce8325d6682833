#!/usr/bin/env bash
# test_progress_tty: the progress of `pipetrain train`, on a terminal and
# off one. Under a pseudo-terminal (util-linux `script`) one line is redrawn
# in place (after a first line naming the product kernel): every step
# starts with \r and draws the bar, step k/N, the loss,
# tokens/s, the time elapsed and left; a validation ends the line with a
# newline, so the output before the summary ends with one. Through a pipe
# there is no \r: plain lines, one per step (every second one past 20
# steps, the first and each validation), each compared field by field with
# the metrics log. --quiet on a terminal prints only the summary.
set -euo pipefail
corpus=/usr/share/games/fortunes
[ -d "$corpus" ] || { echo "skipped: $corpus is missing (scripts/install-deps.sh installs it)"; exit 77; }
script -V 2>/dev/null | grep -q util-linux ||
    { echo "skipped: no util-linux script to run the command under a pseudo-terminal"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: no python3 to read the output"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--layers 2 --heads 2 --embd 16 --seq 16 --batch 8 --microbatches 2 --stages 2
        --lr 3e-3 --seed 2 --data "$corpus")
on_tty() { # OUT ARGS...: runs ARGS under a pseudo-terminal, its output in OUT
    local out=$1
    shift
    script -qfec "$(printf '%q ' "$@")" /dev/null > "$out"
}

on_tty "$dir/tty.out" "$PIPETRAIN" train "${common[@]}" --steps 6 --eval-every 3 \
    --metrics "$dir/tty.jsonl"
"$PIPETRAIN" train "${common[@]}" --steps 6 --eval-every 3 --metrics "$dir/plain.jsonl" \
    > "$dir/plain.out"
"$PIPETRAIN" train "${common[@]}" --steps 40 --metrics "$dir/long.jsonl" > "$dir/long.out"
on_tty "$dir/quiet.out" "$PIPETRAIN" train "${common[@]}" --steps 6 --quiet

python3 - "$dir" <<'PY'
import json, re, struct, sys
d = sys.argv[1]

def f32(x):  # the log writes a float so that it reads back as that float
    return struct.unpack("<f", struct.pack("<f", x))[0]

TIME = r"(\d+s|\d+m\d\ds|\d+h\d\dm)"
TTY = re.compile(r"\[(=*)( *)\] step (\d+)/(\d+)  loss (\d+\.\d{4})  \d+ tok/s  elapsed "
                 + TIME + "  ETA " + TIME + r"(  val_loss (\d+\.\d{4}))?( *)(\n?)$")
PLAIN = re.compile(r"step (\d+)/(\d+)  loss (\d+\.\d{4})  lr (\S+)  \d+ tok/s  \d+ ms/step  "
                   r"elapsed " + TIME + "  ETA " + TIME + r"(  val_loss (\d+\.\d{4}))?$")

def log(name):
    return {r["step"]: r for r in map(json.loads, open(f"{d}/{name}.jsonl"))}

def text(name):  # the output after the start-up line naming the product kernel
    out = open(f"{d}/{name}.out", "rb").read().decode()
    if name == "quiet":  # --quiet prints the summary alone
        return out
    first = out.split("\n", 1)
    assert re.fullmatch(r"products: \S+ on \S+.*\r?", first[0]), f"{name}: {first[0]!r}"
    return first[1]

# on a terminal (the pseudo-terminal turns each \n into \r\n)
out = text("tty").replace("\r\n", "\n")
progress = out[: out.index("done:")]
assert progress.startswith("\r") and progress.endswith("\n"), repr(progress[-80:])
rows = log("tty")
draws = progress.split("\r")[1:]
assert len(draws) == 6, f"{len(draws)} redraws, expected one per step: {draws!r}"
for k, draw in enumerate(draws, 1):
    m = TTY.match(draw)
    assert m, f"redraw {k}: {draw!r}"
    bar, blank, step, steps, loss = m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), m.group(5)
    assert (step, steps) == (k, 6) and len(bar) == 30 * k // 6 and len(bar + blank) == 30, draw
    assert loss == "%.4f" % f32(rows[k]["loss"]), (draw, rows[k])
    val = m.group(9)
    assert (val is not None) == (k in (3, 6)) and (m.group(11) == "\n") == (k in (3, 6)), draw
    assert val is None or val == "%.4f" % f32(rows[k]["val_loss"]), (draw, rows[k])
assert "\n" not in progress.replace(draws[2], "").replace(draws[5], ""), "a newline between redraws"

# through a pipe: plain lines, the same as the log
def plain(name, want_steps, val_steps):
    out = text(name)
    assert "\r" not in out, f"{name}: a carriage return off a terminal"
    lines = out[: out.index("done:")].split("\n")
    assert lines[-1] == "", f"{name}: the progress does not end with a newline"
    rows, got = log(name), []
    for line in lines[:-1]:
        m = PLAIN.match(line)
        assert m, f"{name}: {line!r}"
        step, steps, loss, lr, val = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4), m.group(8)
        row = rows[step]
        assert steps == max(rows) and loss == "%.4f" % f32(row["loss"]), (line, row)
        assert lr == "%.2e" % f32(row["lr"]), (line, row)
        assert (val is not None) == (step in val_steps), line
        assert val is None or val == "%.4f" % f32(row["val_loss"]), (line, row)
        got.append(step)
    assert got == want_steps, f"{name}: lines for steps {got}, expected {want_steps}"
    print(f"{name}: {len(got)} plain lines as the log says")

plain("plain", [1, 2, 3, 4, 5, 6], {3, 6})
plain("long", [1] + list(range(2, 41, 2)), {40})

quiet = text("quiet")
assert "\rstep" not in quiet and "step " not in quiet.split("done:")[0] and "done:" in quiet, repr(quiet)
print("tty: 6 redraws in place, a newline at each validation and at the end; --quiet: the summary")
PY
echo "ok"
