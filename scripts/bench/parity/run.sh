#!/usr/bin/env bash
# The learning parity suite of issue 35: tandem against CleanRL / Stable-Baselines3 / BenchMARL on
# the same settings (scripts/bench/parity/parity.py says what it runs and prints).
#   scripts/bench/parity/run.sh --cases cartpole-ppo --seeds 1-5 [--jobs 2] [--steps N]
#   scripts/bench/parity/run.sh --report
#   scripts/bench/parity/run.sh --list
#   scripts/bench/parity/run.sh --progress   (runs without a saved result: how far they got)
# The runner itself needs only a Python with tensorboard (to read both sides' event files):
# TB_PYTHON, default .deps/venv-tb (scripts/tb-read-setup.sh makes it). The peers' and the
# bridge's venvs are checked per case, with the script that makes each named when missing.
# tandem: TANDEM, default .deps/parity-bin/tandem (a copy, so that rebuilding target/ does
# not change the binary under a run).
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
tb_python="${TB_PYTHON:-$root/.deps/venv-tb/bin/python}"
if ! "$tb_python" -c 'import tensorboard' >/dev/null 2>&1; then
    echo "parity/run.sh: $tb_python cannot import tensorboard; run scripts/tb-read-setup.sh or set TB_PYTHON" >&2
    exit 1
fi
exec "$tb_python" "$root/scripts/bench/parity/parity.py" "$@"
