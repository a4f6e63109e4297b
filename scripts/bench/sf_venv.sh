#!/usr/bin/env bash
# Creates (once) .deps/venv-sf: sample-factory 2.1.1 with its Atari example, on the PyPI build
# of torch 2.13.0 made runnable on CPU as in sb3_venv.sh (no NVIDIA wheels but the CUDA runtime
# and CUPTI; stand-ins for the rest), gymnasium 0.29.1 (sample-factory 2.1.1 predates 1.0) and
# ale-py 0.9.0, the newest ALE for that gymnasium, whose wheel carries the ROMs (nothing is
# downloaded at run time). sf_atari.py starts the example with ale-py's ids registered.
# Usage: scripts/bench/sf_venv.sh   (prints the venv's python on success)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.deps/venv-sf"
check='import torch, ale_py, sample_factory, sf_examples.atari.train_atari'
if ! "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
    # The cached torch wheel is cp312.
    python="$("$root/scripts/find-python.sh" 3.12 SF_PYTHON "${SF_PYTHON:-}")"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
    "${pip[@]}" --no-deps --find-links "$root/.deps/wheels" \
        torch==2.13.0 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cupti==13.0.85 >&2
    # pip warns here that torch's NVIDIA requirements are not installed: expected.
    # Everything else pinned and --no-deps (scripts/bench/sf-pins.txt): resolving
    # sample-factory's requirements would pull torch's NVIDIA wheels (gigabytes) back in.
    "${pip[@]}" --no-deps -r "$root/scripts/bench/sf-pins.txt" >&2
    site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    "$venv/bin/python" "$root/scripts/torch_cpu_stubs.py" "$site" >&2
    "$venv/bin/python" -c "$check"
fi
echo "$venv/bin/python"
