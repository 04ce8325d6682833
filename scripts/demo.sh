#!/usr/bin/env bash
# The main job: a short training run on the fortunes corpus.
set -euo pipefail
exec "$1" train --help
