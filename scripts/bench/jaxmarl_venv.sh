#!/usr/bin/env bash
# Creates (once) .deps/venv-jaxmarl: JaxMARL 0.2.0 (its jitted MPE environments; the PyPI package
# holds the environments, not the baselines) for the speed reference of
# crates/tandem-env/benches/mpe_steps.rs, which skips it when the venv is missing.
# Usage: scripts/bench/jaxmarl_venv.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/.deps/venv-jaxmarl"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import jaxmarl, jax' 2>/dev/null; then
    exit 0
fi
python="$("$root/scripts/find-python.sh" --at-least 3.11 JAXMARL_PYTHON "${JAXMARL_PYTHON:-}")"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "jaxmarl==0.2.0" "jax==0.10.2" "jaxlib==0.10.2"
"$venv/bin/python" -c 'import jaxmarl; jaxmarl.make("MPE_simple_spread_v3")'
