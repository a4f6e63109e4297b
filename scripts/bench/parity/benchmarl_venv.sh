#!/usr/bin/env bash
# Creates (once) .deps/venv-benchmarl, the peer of the parity case spread-ippo
# (scripts/bench/parity/parity.py, benchmarl_peer.py): BenchMARL 1.5.2 with the versions it
# allows, pinned.
#   - BenchMARL 1.5.2 requires torchrl >=0.10,<0.12: torchrl 0.11.1 (the newest of those), whose
#     tensordict bound is >=0.11,<0.12: tensordict 0.11.0. hydra-core 1.3.8 (BenchMARL's
#     config classes import it), tqdm.
#   - BenchMARL also declares torchvision and av (<14), for its video logging; nothing of the
#     training path imports either, so they are left out (installed with --no-deps, as are
#     torchrl and tensordict, so that pip does not pull the CUDA build of torch).
#   - torch 2.13.0 on CPU, as scripts/torch-venv-setup.sh installs it (the libtorch tandem is
#     built on; the wheel from .deps/wheels, the CUDA runtime and CUPTI wheels libtorch_cpu
#     needs, stand-ins for the other NVIDIA libraries): torchrl 0.11.1 asks for torch >= 2.1.
#     torchrl 0.11.1's compiled extension (torchrl._torchrl: the prioritised replay buffer's
#     segment trees) was built against an older torch and does not load on 2.13 (undefined
#     symbol); nothing of the on-policy path imports it (SamplerWithoutReplacement is Python).
#   - mpe2's own requirements (pygame-ce, scipy, lazy-importer) are pinned at what pip chose.
#   - The environment: PettingZoo 1.27.0 with mpe2 1.1.1, the MPE that tandem's simple_spread is
#     exact to. BenchMARL's pettingzoo extra asks for pettingzoo >= 1.24.3; from 1.25 on,
#     PettingZoo's MPE lives in mpe2, and benchmarl_peer.py registers mpe2's simple_spread_v3 in
#     PettingZoo's environment table, where torchrl's PettingZooEnv looks tasks up.
# Python 3.12 (the torch wheel is cp312), found by scripts/find-python.sh.
# Idempotent: a venv whose check passes is left alone.
# Usage: scripts/bench/parity/benchmarl_venv.sh   (prints the venv's python on success)
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
venv="$root/.deps/venv-benchmarl"
wheels="$root/.deps/wheels"
check='import importlib.metadata as m
want = {"benchmarl": "1.5.2", "torchrl": "0.11.1", "tensordict": "0.11.0", "torch": "2.13.0",
        "pettingzoo": "1.27.0", "mpe2": "1.1.1"}
got = {k: m.version(k).split("+")[0] for k in want}
assert got == want, got
import benchmarl.algorithms, benchmarl.experiment, torchrl.envs, mpe2.simple_spread_v3'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
    echo "$venv/bin/python"
    exit 0
fi
python="$("$root/scripts/find-python.sh" 3.12 BENCHMARL_PYTHON "${BENCHMARL_PYTHON:-}")"
mkdir -p "$wheels"
rm -rf "$venv"
"$python" -m venv "$venv"
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
"${pip[@]}" --no-deps --find-links "$wheels" \
    torch==2.13.0 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cupti==13.0.85 >&2
# pip warns here and below that torch's NVIDIA requirements are not installed: expected.
"${pip[@]}" filelock==4.3.1 typing-extensions==4.16.0 setuptools==84.2.1 sympy==1.14.0 \
    mpmath==1.3.0 networkx==3.7 jinja2==3.1.6 markupsafe==3.0.4 fsspec==2026.9.0 \
    numpy==2.5.5 cloudpickle==3.1.3 packaging==26.3 importlib-metadata==10.2.0 zipp==4.1.2 \
    orjson==3.13.0 pyvers==0.2.3 hydra-core==1.3.8 omegaconf==2.3.0 \
    antlr4-python3-runtime==4.9.3 pyyaml==6.0.3 tqdm==4.70.1 \
    gymnasium==1.4.0 farama-notifications==0.0.6 pygame==2.6.1 pettingzoo==1.27.0 mpe2==1.1.1 \
    pygame-ce==2.5.8 scipy==1.18.1 lazy-importer==0.1.0 >&2
"${pip[@]}" --no-deps tensordict==0.11.0 torchrl==0.11.1 benchmarl==1.5.2 >&2
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$venv/bin/python" "$root/scripts/torch_cpu_stubs.py" "$site" >&2
"$venv/bin/python" -c "$check"
echo "$venv/bin/python"
