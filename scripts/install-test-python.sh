#!/usr/bin/env bash
# Makes the Python environment that some tests read pipetrain's output with
# (independent second implementations): a virtual environment in DIR
# (default build/test-python) holding PyPI's tensorboard (its own reader
# checks the event files of --tensorboard), numpy (reference forwards),
# safetensors, tokenizers and transformers without torch (Hugging Face's own
# readers and writers of model folders and tokenizers). Prints the interpreter's path;
# exits 1 with a message when the packages cannot be installed (no network).
# Installs only what is missing, so tests may call it every time.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/build/test-python}
packages=(tensorboard numpy safetensors tokenizers transformers)
modules=(tensorboard numpy safetensors tokenizers transformers)
py="$dir/bin/python3"
if [ ! -x "$py" ]; then
  python3 -m venv "$dir" >&2 || { echo "install-test-python: python3 -m venv failed" >&2; exit 1; }
fi
missing=()
for i in "${!modules[@]}"; do
  "$py" -c "import ${modules[$i]}" >/dev/null 2>&1 || missing+=("${packages[$i]}")
done
if [ ${#missing[@]} -gt 0 ]; then
  "$py" -m pip install -q --disable-pip-version-check "${missing[@]}" >&2 ||
    { echo "install-test-python: pip could not install ${missing[*]}" >&2; exit 1; }
fi
echo "$py"
