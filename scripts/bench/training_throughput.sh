#!/usr/bin/env bash
# Training throughput and libtorch share of tandem's PPO (see training_throughput.py).
# Usage (repo root): [TANDEM=...] [THREADS="1 2"] [GAMES="..."] [ATARI_STEPS=N] scripts/bench/training_throughput.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
"$root/scripts/tb-read-setup.sh" >&2
exec "$root/.deps/venv-tb/bin/python" "$root/scripts/bench/training_throughput.py"
