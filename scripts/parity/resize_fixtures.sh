#!/usr/bin/env bash
# Regenerates crates/tandem-env/tests/fixtures/opencv_resize_gray.bin.gz with
# opencv-python-headless (installed into .deps/venv-parity by minatar_venv.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
"$root/scripts/parity/minatar_venv.sh" --venv-only
"$root/.deps/venv-parity/bin/python" "$root/scripts/parity/resize_fixtures.py" "$root/crates/tandem-env/tests/fixtures"
