#!/usr/bin/env bash
# PPO CartPole, tandem vs Stable-Baselines3, same settings, one run (see cartpole_vs_sb3.py).
# Usage (repo root): [TANDEM=path/to/tandem] [SEEDS="1 2 3"] scripts/bench/cartpole_vs_sb3.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="$("$root/scripts/bench/sb3_venv.sh")"
exec "$python" "$root/scripts/bench/cartpole_vs_sb3.py"
