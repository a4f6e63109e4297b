#!/usr/bin/env bash
# Creates (once) .deps/venv-sb3: Stable-Baselines3 2.9.2 on the PyPI build of
# torch 2.13.0, runnable on CPU without the NVIDIA wheels torch declares.
# torch is installed --no-deps with only its pure-Python dependencies, the CUDA
# runtime and CUPTI wheels (libtorch_cpu needs them), and stand-ins for the
# other CUDA libraries (scripts/torch_cpu_stubs.py), plus MuJoCo and MinAtar. Wheels already in
# .deps/wheels are used instead of downloading them again.
# Usage: scripts/bench/sb3_venv.sh   (prints the venv's python on success)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.deps/venv-sb3"
if ! "$venv/bin/python" -c "import torch, stable_baselines3" >/dev/null 2>&1; then
    # The cached torch wheel is cp312.
    python="$("$root/scripts/find-python.sh" 3.12 SB3_PYTHON "${SB3_PYTHON:-}")"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
    "${pip[@]}" --no-deps --find-links "$root/.deps/wheels" \
        torch==2.13.0 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cupti==13.0.85 stable-baselines3==2.9.2
    # pip warns here that torch's NVIDIA requirements are not installed: expected.
    "${pip[@]}" filelock==4.3.1 typing-extensions==4.16.0 setuptools==84.2.1 sympy==1.14.0 \
        mpmath==1.3.0 networkx==3.7 jinja2==3.1.6 markupsafe==3.0.4 fsspec==2026.9.0 \
        gymnasium==1.4.0 farama-notifications==0.0.6 numpy==2.5.5 cloudpickle==3.1.3
    site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    "$venv/bin/python" "$root/scripts/torch_cpu_stubs.py" "$site" >&2
    "$venv/bin/python" -c "import torch, stable_baselines3" 
fi
# MuJoCo for scripts/bench/gym_bridge.sh's HalfCheetah-v5 (added to an existing venv too).
if ! "$venv/bin/python" -c "import gymnasium.envs.mujoco" >/dev/null 2>&1; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        mujoco==4.0.0 imageio==2.38.1 pillow==13.0.0 packaging==26.3 >&2
    "$venv/bin/python" -c "import gymnasium.envs.mujoco"
fi
# MinAtar for scripts/bench/parity/parity.py's minatar-breakout-dqn (added to an existing venv
# too). --no-deps: the matplotlib, pandas, scipy and seaborn it declares are only for rendering
# (imported in try/except; without them it logs a warning). Its envs register only through
# minatar.gym.register_envs() (gymnasium 1.x no longer loads the package's entry point).
minatar_check='import gymnasium, minatar.gym; minatar.gym.register_envs(); gymnasium.make("MinAtar/Breakout-v1").reset(seed=0)'
if ! "$venv/bin/python" -c "$minatar_check" >/dev/null 2>&1; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps minatar==1.0.15 >&2
    "$venv/bin/python" -c "$minatar_check"
fi
echo "$venv/bin/python"
