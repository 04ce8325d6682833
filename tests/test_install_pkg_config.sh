#!/usr/bin/env bash
# cmake --install puts the header, the static and shared libraries, the
# command and pipetrain.pc under a prefix; an example builds out of tree
# with `cc $(pkg-config --cflags --libs pipetrain)` against that prefix
# alone, and runs (its two-stage run equals its one-stage run).
set -euo pipefail
build=$(dirname "$PIPETRAIN")
grep -q "^PT_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null &&
  { echo "a sanitizer build: its library needs the sanitizer runtime to link: skipped"; exit 77; }
command -v pkg-config >/dev/null || { echo "pkg-config not found: skipped"; exit 77; }
command -v cc >/dev/null || { echo "no C compiler (cc): skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
for f in include/pipetrain.h bin/pipetrain; do
  [ -e "$tmp/prefix/$f" ] || { echo "FAIL: $f not installed"; cat "$tmp/install.log"; exit 1; }
done
pc=$(find "$tmp/prefix" -name pipetrain.pc)
libdir=$(dirname "$(dirname "$pc")")
for f in libpipetrain.a libpipetrain.so; do
  [ -e "$libdir/$f" ] || { echo "FAIL: $libdir/$f not installed"; exit 1; }
done

# out of tree: a copy of the example, nothing of the source tree on the path
cp "$PT_SOURCE_DIR/examples/pipe_classifier.c" "$tmp/"
cd "$tmp"
export PKG_CONFIG_PATH="$(dirname "$pc")"
flags=$(pkg-config --cflags --libs pipetrain)
case "$flags" in *"$PT_SOURCE_DIR"*) echo "FAIL: pkg-config points into the source tree: $flags"; exit 1;; esac
cc -std=c11 -o pipe_classifier pipe_classifier.c $flags
# (ldd's whole output first: grep -q leaving early would end ldd by SIGPIPE,
# which pipefail counts as a failure)
libs=$(ldd ./pipe_classifier)
grep -q "libpipetrain.so.* => $tmp/prefix/" <<<"$libs" ||
  { echo "FAIL: the program does not load the installed shared library"; echo "$libs"; exit 1; }
./pipe_classifier 12 >run.log || { echo "FAIL: the installed example failed"; cat run.log; exit 1; }
grep -q "equal one stage bit for bit" run.log || { echo "FAIL: unexpected output"; cat run.log; exit 1; }
"$tmp/prefix/bin/pipetrain" --help >/dev/null
echo "ok: installed under a prefix, built out of tree with pkg-config, ran"
