#!/usr/bin/env bash
# tandem's Atari Breakout PPO against CleanRL 1.2.0 + envpool 0.6.6, interleaved
# (see atari_vs_cleanrl.py for what is measured and the settings).
# Usage (repo root): [STEPS=20480] [ROUNDS=2] [VARIANTS="shipped;threads=2"] [CPUS=0,1] \
#     scripts/bench/atari_vs_cleanrl.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
CLEANRL_PYTHON_VENV="$("$root/scripts/bench/cleanrl_venv.sh")"
export CLEANRL_PYTHON_VENV
exec python3 "$root/scripts/bench/atari_vs_cleanrl.py"
