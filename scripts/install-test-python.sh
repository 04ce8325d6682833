#!/usr/bin/env bash
# Makes the Python environment that some tests read pipetrain's output with
# (independent second implementations): a virtual environment in DIR
# (default build/test-python) holding PyPI's tensorboard, whose own reader
# checks the event files of --tensorboard. Prints the interpreter's path;
# exits 1 with a message when the packages cannot be installed (no network).
# Installs only what is missing, so tests may call it every time.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/build/test-python}
packages=(tensorboard)
modules=(tensorboard)
py="$dir/bin/python3"
if [ ! -x "$py" ]; then
  python3 -m venv "$dir" >&2 || { echo "install-test-python: python3 -m venv failed" >&2; exit 1; }
fi
for m in "${modules[@]}"; do
  if ! "$py" -c "import $m" >/dev/null 2>&1; then
    "$py" -m pip install -q --disable-pip-version-check "${packages[@]}" >&2 ||
      { echo "install-test-python: pip could not install ${packages[*]}" >&2; exit 1; }
    break
  fi
done
echo "$py"
