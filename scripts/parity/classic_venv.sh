#!/usr/bin/env bash
# Creates (once) the Python venv with gymnasium's classic-control games used for the
# classic-control parity traces, then writes the traces.
# Usage: scripts/parity/classic_venv.sh [--venv-only]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.deps/venv-gym-classic"
# numpy 2.5 needs Python 3.12: pyenv's 3.12 is used when python3 is older.
python="${GYM_PYTHON:-}"
if [ -z "$python" ]; then
    for candidate in python3.12 /root/.pyenv/versions/3.12.1/bin/python3 python3; do
        # pyenv shims exist for versions that are not selected: check the command runs.
        if "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' >/dev/null 2>&1; then
            python="$candidate"; break
        fi
    done
fi
if ! "$venv/bin/python" -c "import gymnasium, numpy" >/dev/null 2>&1; then
    rm -rf "$venv"
    "${python:?no Python 3.12 found (set GYM_PYTHON)}" -m venv "$venv"
    # The games' dynamics need only numpy; pygame (rendering) is left out.
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        "numpy==2.5.5" "gymnasium==1.4.0" "farama-notifications==0.0.6" \
        "cloudpickle==3.1.3" "typing-extensions==4.16.0"
fi
if [ "${1:-}" = "--venv-only" ]; then exit 0; fi
"$venv/bin/python" "$root/scripts/parity/classic_traces.py" "$root/crates/tandem-env/tests/fixtures"
