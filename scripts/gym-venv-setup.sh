#!/usr/bin/env bash
# Creates the Python venv that the shipped gymnasium experiments name (`python
# "../.deps/venv-gym/bin/python"`, relative to the experiment file) and the gymnasium bridge
# tests (crates/tandem-env/tests/gym_bridge.rs, pettingzoo_bridge.rs) drive: gymnasium with
# classic-control, MuJoCo and Box2D (LunarLander, BipedalWalker), PettingZoo with mpe2 (the
# native MPE games' reference, driven through the bridge), numpy pinned, and the example user package
# examples/gymnasium-package installed editable, as docs/environments.md walks through.
# scripts/setup runs it. Idempotent: a venv that already has the pinned versions and the
# package is left alone.
# Usage: scripts/gym-venv-setup.sh   (prints the venv's python on success)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${repo_root}/.deps/venv-gym"
# Pinned so the environments the parity tests compare against do not move under us.
pins=(gymnasium==1.4.0 numpy==2.5.5 mujoco==4.0.0 pygame==2.6.1 cloudpickle==3.1.2
    farama-notifications==0.0.6 typing-extensions==4.16.0 imageio==2.38.1 pillow==13.0.0 packaging==26.3
    pettingzoo==1.27.0 mpe2==1.1.1)
check='import gymnasium, gymnasium.envs.mujoco, numpy, mujoco, Box2D, sys, tandem_corridor, pettingzoo, mpe2.simple_spread_v3
from importlib.metadata import version
want = {"gymnasium": "1.4.0", "numpy": "2.5.5", "mujoco": "4.0.0", "pettingzoo": "1.27.0", "mpe2": "1.1.1"}
have = {"gymnasium": gymnasium.__version__, "numpy": numpy.__version__, "mujoco": mujoco.__version__,
    "pettingzoo": version("pettingzoo"), "mpe2": version("mpe2")}
sys.exit(have != want)'

if [[ -x "${venv}/bin/python" ]] && "${venv}/bin/python" -c "$check" 2>/dev/null; then
    echo "${venv}/bin/python"
    exit 0
fi

# numpy 2.5 needs Python 3.12 or later.
python="$("${repo_root}/scripts/find-python.sh" --at-least 3.12 GYM_PYTHON "${GYM_PYTHON:-}")"
mkdir -p "${repo_root}/.deps"
rm -rf "${venv}"
"$python" -m venv "${venv}"
"${venv}/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2
# box2d-py 2.3.5 is an sdist whose build runs swig (the PyPI wheel provides it) and a C++ compiler.
"${venv}/bin/python" -m pip install --quiet --disable-pip-version-check swig==4.3.1 setuptools==84.2.1 wheel==0.45.1 >&2
PATH="${venv}/bin:$PATH" "${venv}/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-build-isolation box2d-py==2.3.5 >&2
# A user's own environment package, the way docs/environments.md installs it.
"${venv}/bin/python" -m pip install --quiet --disable-pip-version-check -e "${repo_root}/examples/gymnasium-package" >&2
"${venv}/bin/python" -c "$check"
# The MuJoCo environments must build (the wheels ship the simulator and the models;
# gymnasium's MuJoCo module imports imageio for rendering).
"${venv}/bin/python" -c 'import gymnasium; gymnasium.make("HalfCheetah-v5").reset(seed=0)'
"${venv}/bin/python" -c 'import gymnasium; gymnasium.make("LunarLander-v3").reset(seed=0)'
echo "${venv}/bin/python"
