#!/usr/bin/env bash
# Prints the Python interpreter a venv script should build on: OVERRIDE when it is set (the
# script's *_PYTHON variable), else the first of `pythonX.Y` on PATH and pyenv's X.Y.* that runs
# as version X.Y, and with --at-least also `python3` when it is X.Y or newer. pyenv puts shims on
# PATH for versions that are not selected, so every candidate is run, not only looked up. With
# no such Python it prints why on stderr, naming VARIABLE, and exits 1.
# Usage: scripts/find-python.sh [--at-least] X.Y VARIABLE [OVERRIDE]
#   e.g. python="$("$root/scripts/find-python.sh" 3.12 TORCH_VENV_PYTHON "${TORCH_VENV_PYTHON:-}")"
set -euo pipefail
shopt -s nullglob
at_least=0
if [ "${1:-}" = --at-least ]; then at_least=1; shift; fi
want="${1:?usage: find-python.sh [--at-least] X.Y VARIABLE [OVERRIDE]}"
variable="${2:?usage: find-python.sh [--at-least] X.Y VARIABLE [OVERRIDE]}"
override="${3:-}"
if [ -n "$override" ]; then echo "$override"; exit 0; fi
wanted="(${want/./, })"
candidates=("python$want" /root/.pyenv/versions/"$want".*/bin/python3)
test='sys.version_info[:2] == '"$wanted"
if [ "$at_least" = 1 ]; then
    candidates+=(python3)
    test='sys.version_info[:2] >= '"$wanted"
fi
for candidate in "${candidates[@]}"; do
    if "$candidate" -c "import sys; sys.exit(not ($test))" >/dev/null 2>&1; then
        echo "$candidate"
        exit 0
    fi
done
if [ "$at_least" = 1 ]; then need="$want or newer"; else need="$want"; fi
echo "no Python $need found (tried ${candidates[*]}); set $variable to one" >&2
exit 1
