# torch_venv.sh: sourced by the benches that run PyTorch beside pipetrain.
# Sets $venv to build/bench-venv under the source tree given, with torch
# installed once: the CPU wheel, or PyPI's torch where that index cannot be
# reached. Nothing of the project imports it; no build or test needs it.
torch_venv() {
    venv="$1/build/bench-venv"
    if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q torch --index-url https://download.pytorch.org/whl/cpu ||
            "$venv/bin/pip" install -q torch
    fi
}
