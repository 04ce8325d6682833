# python_env.sh: sourced by the shell tests that read pipetrain's output
# with Python, an independent second implementation. Sets py to the test
# environment's interpreter (scripts/install-test-python.sh makes it once,
# in the build folder) and dir to a temporary folder removed at exit; exits
# 77 (skipped) when the environment cannot be installed, naming $1, what
# the test needs from it.
build=$(cd "$(dirname "$PIPETRAIN")" && pwd)
py=$(bash "$PT_SOURCE_DIR/scripts/install-test-python.sh" "$build/test-python") ||
    { echo "skipped: ${1:-the test Python environment} cannot be installed here"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
