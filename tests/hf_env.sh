# hf_env.sh, sourced by the shell tests that compare with Hugging Face's
# libraries: $py, the test environment's interpreter (the test is skipped,
# 77, when it cannot be had); $hf, tests/hf_gpt2.py run by it; $dir, a
# scratch folder removed on exit.
build=$(cd "$(dirname "$PIPETRAIN")" && pwd)
py=$(bash "$PT_SOURCE_DIR/scripts/install-test-python.sh" "$build/test-python") ||
    { echo "skipped: PyPI's transformers, safetensors and numpy cannot be installed here"; exit 77; }
hf="$py $PT_SOURCE_DIR/tests/hf_gpt2.py"
export TRANSFORMERS_VERBOSITY=error
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
