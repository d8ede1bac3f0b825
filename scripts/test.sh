#!/usr/bin/env bash
# Run the test suite in .venv (make test). Slow end-to-end tests are marked `slow` and run here too.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m pytest -q "$@"
