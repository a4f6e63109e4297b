#!/usr/bin/env bash
# Creates (once) the Python venv with gymnasium's classic-control games used for the
# classic-control parity traces, then writes the traces.
# Usage: scripts/parity/classic_venv.sh [--venv-only]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.deps/venv-gym-classic"
if ! "$venv/bin/python" -c "import gymnasium, numpy" >/dev/null 2>&1; then
    # numpy 2.5 needs Python 3.12 or later.
    python="$("$root/scripts/find-python.sh" --at-least 3.12 GYM_PYTHON "${GYM_PYTHON:-}")"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    # The games' dynamics need only numpy; pygame (rendering) is left out.
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        "numpy==2.5.5" "gymnasium==1.4.0" "farama-notifications==0.0.6" \
        "cloudpickle==3.1.3" "typing-extensions==4.16.0"
fi
if [ "${1:-}" = "--venv-only" ]; then exit 0; fi
"$venv/bin/python" "$root/scripts/parity/classic_traces.py" "$root/crates/tandem-env/tests/fixtures"
