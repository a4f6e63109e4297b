#!/usr/bin/env bash
# Creates (once) the Python venv with mpe2 1.1.1 (PettingZoo's multi-particle environments) that
# the native MPE ports are checked against, then writes the traces
# (crates/tandem-env/tests/fixtures/mpe_*.json.gz) that crates/tandem-env/tests/mpe_parity.rs
# replays. With --bench, runs the step-rate benchmark's Python side instead (scripts/bench/mpe_vs_mpe2.sh).
# Usage: scripts/parity/mpe_venv.sh [--venv-only]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.deps/venv-mpe"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import mpe2, pettingzoo' 2>/dev/null; then
    # numpy 2.5 needs Python 3.12 or later.
    python="$("$root/scripts/find-python.sh" --at-least 3.12 MPE_PYTHON "${MPE_PYTHON:-}")"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        "mpe2==1.1.1" "pettingzoo==1.27.0" "gymnasium==1.4.0" "numpy==2.5.5" "pygame==2.6.1"
fi
if [ "${1:-}" = "--venv-only" ]; then exit 0; fi
"$venv/bin/python" "$root/scripts/parity/mpe_traces.py" "$root/crates/tandem-env/tests/fixtures"
