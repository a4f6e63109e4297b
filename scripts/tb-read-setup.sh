#!/usr/bin/env bash
# Creates the Python venv that the tandem-summary read-back tests use to check
# event files with TensorBoard's own reader. Idempotent: a venv that already
# has the pinned version is left alone.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${repo_root}/.deps/venv-tb"
# Pinned so the reader the tests compare against does not move under us.
tensorboard_version="2.21.0"

if [[ -x "${venv}/bin/python" ]] &&
    "${venv}/bin/python" -c "import tensorboard, sys; sys.exit(tensorboard.__version__ != '${tensorboard_version}')" 2>/dev/null; then
    echo "tb-read-setup: ${venv} already has tensorboard ${tensorboard_version}"
    exit 0
fi

mkdir -p "${repo_root}/.deps"
python3 -m venv "${venv}"
"${venv}/bin/python" -m pip install --quiet --disable-pip-version-check \
    "tensorboard==${tensorboard_version}"
"${venv}/bin/python" -c "import tensorboard; print('tb-read-setup: tensorboard', tensorboard.__version__, 'ready in ${venv}')"
