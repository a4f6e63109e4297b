#!/usr/bin/env bash
# Creates (once) the Python venv used by the MinAtar parity traces and the env
# benchmark's Python reference, then runs the trace generator.
# Usage: scripts/parity/minatar_venv.sh [--venv-only]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.deps/venv-parity"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    # minatar's declared dependencies pull in torch, pandas and seaborn; its
    # environments only need numpy, so install it without them.
    "$venv/bin/pip" install --quiet "numpy==2.2.6"
    "$venv/bin/pip" install --quiet --no-deps "minatar==1.0.15"
    "$venv/bin/pip" install --quiet "opencv-python-headless==4.12.0.88"
fi
if [ "${1:-}" = "--venv-only" ]; then exit 0; fi
"$venv/bin/python" "$root/scripts/parity/minatar_traces.py" "$root/crates/tandem-env/tests/fixtures"
