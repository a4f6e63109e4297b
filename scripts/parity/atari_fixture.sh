#!/usr/bin/env bash
# Regenerates the Atari parity fixtures (see atari_fixture.py) in a venv under
# .deps/venv-atari holding the pinned reference stack. Seconds once the venv exists.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${repo_root}/.deps/venv-atari"
requirements=(ale-py==0.12.1 gymnasium==1.4.0 numpy==2.4.6 opencv-python-headless==5.0.0.93)
if [[ ! -x "${venv}/bin/python" ]]; then
    python3 -m venv "${venv}" || { echo "atari_fixture: python3 -m venv failed; install python3-venv" >&2; exit 1; }
fi
if ! "${venv}/bin/python" -c 'import ale_py, gymnasium, numpy, cv2' >/dev/null 2>&1; then
    "${venv}/bin/pip" install -q --disable-pip-version-check "${requirements[@]}" \
        || { echo "atari_fixture: pip install ${requirements[*]} failed; check access to PyPI" >&2; exit 1; }
fi
exec "${venv}/bin/python" "${repo_root}/scripts/parity/atari_fixture.py" "$@"
