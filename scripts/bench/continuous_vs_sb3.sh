#!/usr/bin/env bash
# SAC and PPO on Pendulum-v1 and HalfCheetah-v5, tandem vs Stable-Baselines3, same settings,
# one run (see continuous_vs_sb3.py for what is measured and how).
# Usage (repo root): [TANDEM=path/to/tandem] scripts/bench/continuous_vs_sb3.sh
#     [--steps N] [--seeds "1 2 3"] [--cases pendulum-sac,pendulum-ppo,halfcheetah-sac,halfcheetah-ppo]
#     [--sides tandem,sb3] [--threads N] [--out DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="$("$root/scripts/bench/sb3_venv.sh")"
# tandem's episode scores are read from its TensorBoard events; HalfCheetah's workers need MuJoCo.
"$root/scripts/tb-read-setup.sh" >&2
"$root/scripts/gym-venv-setup.sh" >/dev/null
# continuous_vs_sb3.py sets OMP_NUM_THREADS and MKL_NUM_THREADS from --threads (default 1).
exec "$python" "$root/scripts/bench/continuous_vs_sb3.py" "$@"
