#!/usr/bin/env bash
# Learning curve of a longer MinAtar Breakout PPO run (see minatar_curve.py).
# Usage (repo root): [TANDEM=...] [STEPS=1000000] [RUN_DIR=existing run] scripts/bench/minatar_curve.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
"$root/scripts/tb-read-setup.sh" >&2
exec "$root/.deps/venv-tb/bin/python" "$root/scripts/bench/minatar_curve.py"
