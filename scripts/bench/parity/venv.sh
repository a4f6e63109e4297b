#!/usr/bin/env bash
# Creates (once) the Python environments of the parity suite (scripts/bench/parity/parity.py):
#
#   .deps/venv-parity-cleanrl  Python 3.10: CleanRL 1.2.0 (the newest on PyPI) with the
#       versions of CleanRL's own lock (scripts/bench/cleanrl-envpool-pins.txt as
#       constraints: gym 0.23.1, torch 1.12.1, numpy 1.21.6, tensorboard 2.11.2), plus
#       Box2D for LunarLander. CleanRL 1.2.0's ppo.py, dqn.py, ppo_continuous_action.py,
#       sac/td3_continuous_action.py run unmodified only on gym 0.23's API (env.seed,
#       4-tuple step), so the peer sees gym 0.23.1's environments (LunarLander-v2, not v3).
#       MuJoCo cases of the peer need gym 0.23's mujoco bindings and are not set up here
#       (see parity.py's cases).
#   .deps/venv-parity-cleanrl-gymnasium  Python 3.10: the same CleanRL 1.2.0 and lock versions
#       for the files already ported to gymnasium (dqn.py, ppo_continuous_action.py): gymnasium
#       0.28.1 (their `final_info` API predates gymnasium 1.0), MuJoCo 2.3.3 (CleanRL's bound;
#       gymnasium's MuJoCo module imports imageio),
#       and stable-baselines3 2.0.0a1, whose ReplayBuffer dqn.py imports and whose version it
#       insists on.
#   .deps/venv-parity-gym      Python 3.12: gymnasium 1.4.0 (the version tandem's classic
#       games are exact to, scripts/gym-venv-setup.sh's pins) plus Box2D, for tandem's
#       gymnasium bridge (LunarLander-v3). MuJoCo cases use .deps/venv-gym instead.
#
# box2d-py 2.3.5 is an sdist that runs swig while building; the swig PyPI wheel provides it,
# installed into the venv first and put on PATH for the build. The build runs without pip's
# build isolation, because the isolated build's Python cannot import the venv's swig module
# that the `swig` launcher needs. Needs gcc.
# Idempotent: a venv whose check imports pass is left alone.
# Usage: scripts/bench/parity/venv.sh [cleanrl|cleanrl-gymnasium|gym|all]   (prints the pythons on success)
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
which="${1:-all}"
pip_flags=(install --quiet --disable-pip-version-check)

command -v gcc >/dev/null || { echo "parity/venv.sh: gcc is needed to build box2d-py (apt-get install gcc)" >&2; exit 1; }

if [ "$which" = cleanrl ] || [ "$which" = all ]; then
    venv="$root/.deps/venv-parity-cleanrl"
    pins="$root/scripts/bench/cleanrl-envpool-pins.txt"
    check='import gym, torch, Box2D, tensorboard, importlib.util as u
assert gym.__version__ == "0.23.1", gym.__version__
assert u.find_spec("cleanrl.ppo") and u.find_spec("cleanrl.dqn")
gym.make("LunarLander-v2").reset()'
    if ! "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
        python="$("$root/scripts/find-python.sh" 3.10 PARITY_PYTHON_310 "${PARITY_PYTHON_310:-}")"
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/pip" "${pip_flags[@]}" --constraint "$pins" gym torch numpy tensorboard protobuf setuptools >&2
        "$venv/bin/pip" "${pip_flags[@]}" --constraint "$pins" swig==4.3.1 wheel >&2
        PATH="$venv/bin:$PATH" "$venv/bin/pip" "${pip_flags[@]}" --no-build-isolation box2d-py==2.3.5 >&2
        # gym 0.23's Box2D games import pygame at module level for rendering.
        "$venv/bin/pip" "${pip_flags[@]}" --constraint "$pins" pygame==2.1.0 >&2
        # CleanRL's package declares wandb, SB3 1.2.0, moviepy and more for its other scripts;
        # the single files run here import none of them.
        "$venv/bin/pip" "${pip_flags[@]}" --no-deps cleanrl==1.2.0 >&2
        "$venv/bin/python" -c "$check"
    fi
    echo "$venv/bin/python"
fi

if [ "$which" = cleanrl-gymnasium ] || [ "$which" = all ]; then
    venv="$root/.deps/venv-parity-cleanrl-gymnasium"
    pins="$root/scripts/bench/cleanrl-envpool-pins.txt"
    check='import gymnasium, torch, mujoco, stable_baselines3, importlib.util as u
assert gymnasium.__version__ == "0.28.1", gymnasium.__version__
assert u.find_spec("cleanrl.dqn") and u.find_spec("cleanrl.ppo_continuous_action")
gymnasium.make("HalfCheetah-v4").reset(seed=0)'
    if ! "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
        python="$("$root/scripts/find-python.sh" 3.10 PARITY_PYTHON_310 "${PARITY_PYTHON_310:-}")"
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/pip" "${pip_flags[@]}" --constraint "$pins" torch numpy tensorboard protobuf \
            setuptools gymnasium==0.28.1 mujoco==2.3.3 imageio==2.31.1 pillow==9.5.0 \
            pandas==1.5.3 matplotlib==3.5.3 >&2
        # SB3 2.0.0a1 (whose logger imports pandas and matplotlib) declares torch >= 1.11 and
        # gymnasium 0.28.1, both present; --no-deps keeps pip from upgrading them.
        "$venv/bin/pip" "${pip_flags[@]}" --no-deps stable-baselines3==2.0.0a1 cleanrl==1.2.0 >&2
        "$venv/bin/python" -c "$check"
    fi
    echo "$venv/bin/python"
fi

if [ "$which" = gym ] || [ "$which" = all ]; then
    venv="$root/.deps/venv-parity-gym"
    check='import gymnasium, Box2D, numpy
assert gymnasium.__version__ == "1.4.0", gymnasium.__version__
gymnasium.make("LunarLander-v3").reset(seed=0)'
    if ! "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
        python="$("$root/scripts/find-python.sh" 3.12 PARITY_PYTHON_312 "${PARITY_PYTHON_312:-}")"
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/pip" "${pip_flags[@]}" swig==4.3.1 setuptools==84.2.1 wheel==0.45.1 >&2
        PATH="$venv/bin:$PATH" "$venv/bin/pip" "${pip_flags[@]}" --no-build-isolation box2d-py==2.3.5 >&2
        "$venv/bin/pip" "${pip_flags[@]}" gymnasium==1.4.0 numpy==2.5.5 pygame==2.6.1 \
            cloudpickle==3.1.2 farama-notifications==0.0.6 typing-extensions==4.16.0 >&2
        "$venv/bin/python" -c "$check"
    fi
    echo "$venv/bin/python"
fi
