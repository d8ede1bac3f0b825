#!/usr/bin/env bash
# Run the test suite in .venv (what `make test` and CI run). Slow end-to-end tests are marked `slow` and run
# here too. As root it also installs the Debian packages the tests use and starts the local SLURM cluster
# (scripts/slurm-up.sh), stopping it again afterwards if it was not already running.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export LADDER_CACHE=${LADDER_CACHE:-$PWD/.cache/ladder}
# one inductor (torch.compile) cache for the whole run: every test, worker and subprocess compiles into it
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$PWD/.cache/inductor}
mkdir -p "$TORCHINDUCTOR_CACHE_DIR"

slurm_started=0
if [ "$(id -u)" = 0 ]; then
    bash scripts/test-deps.sh
    SLURM_HOME=${SLURM_HOME:-${TMPDIR:-/tmp}/ladder-slurm}
    if ! { [ -f "$SLURM_HOME/env.sh" ] && (source "$SLURM_HOME/env.sh" && scontrol ping >/dev/null 2>&1); }; then
        slurm_started=1
    fi
    mkdir -p .cache
    bash scripts/slurm-up.sh > .cache/slurm-up.log 2>&1 || { tail -30 .cache/slurm-up.log; exit 1; }
    source "$SLURM_HOME/env.sh"
    export LADDER_TEST_SLURM=1
fi
stop_slurm() { [ "$slurm_started" = 1 ] && bash scripts/slurm-down.sh >/dev/null 2>&1 || true; }
trap stop_slurm EXIT
# two workers (pytest-xdist): the tests that start workers or SLURM jobs in order on one, the rest spread
# (tests/conftest.py's XDIST_GROUPS)
workers=${LADDER_TEST_WORKERS:-2}
xdist=()
if [ "$workers" -gt 1 ] && .venv/bin/python -c "import xdist" 2>/dev/null; then
    xdist=(-n "$workers" --dist loadgroup)
fi
.venv/bin/python -m pytest -q "${xdist[@]}" "$@"
