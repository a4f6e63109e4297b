#!/usr/bin/env bash
# Creates (once) .deps/venv-cleanrl: CleanRL 1.2.0's `ppo_atari_envpool.py` with
# the versions of CleanRL's own lock (scripts/bench/cleanrl-envpool-pins.txt):
# envpool 0.6.6, gym 0.23.1, torch 1.12.1, numpy 1.21.6, tensorboard 2.11.2.
# CleanRL 1.2.0 and envpool 0.6.6 need Python < 3.11: CLEANRL_PYTHON, else
# python3.10 on PATH, else pyenv's 3.10. envpool's wheel carries the Atari ROMs,
# so nothing is imported or downloaded at run time.
# Usage: scripts/bench/cleanrl_venv.sh   (prints the venv's python on success)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.deps/venv-cleanrl"
pins="$root/scripts/bench/cleanrl-envpool-pins.txt"
check='import envpool, gym, torch, importlib.util as u; assert u.find_spec("cleanrl.ppo_atari_envpool")'
if ! "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
    # CleanRL 1.2.0 and envpool 0.6.6 need Python < 3.11.
    python="$("$root/scripts/find-python.sh" 3.10 CLEANRL_PYTHON "${CLEANRL_PYTHON:-}")"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
    "${pip[@]}" --constraint "$pins" envpool gym torch numpy tensorboard protobuf setuptools >&2
    # CleanRL's package declares wandb, SB3 1.2.0, pygame and more for its other scripts; the
    # envpool script imports none of them.
    "${pip[@]}" --no-deps cleanrl==1.2.0 >&2
    "$venv/bin/python" -c "$check"
fi
echo "$venv/bin/python"
