#!/usr/bin/env bash
# Creates the Python venv in which the export tests (tests/export.rs) load `tandem export`'s
# TorchScript modules with `torch.jit.load` and run docs/export.md's example: torch 2.13.0, the
# libtorch tandem is built on (a module loads in the torch that wrote it, or a newer one), on CPU,
# gymnasium's classic-control games, onnx and onnxruntime for `tandem export --format onnx`
# (torch converts, onnxruntime runs the graph in the tests without torch), and pandas and optuna
# for the Python package's test and its Optuna example (python/, examples/optuna). torch comes from the wheel scripts/setup downloads for
# libtorch (.deps/wheels, fetched here when missing), --no-deps with its pure-Python dependencies,
# the CUDA runtime and CUPTI wheels libtorch_cpu needs, and stand-ins for the other NVIDIA
# libraries its Python extension links (scripts/torch_cpu_stubs.py): gigabytes less than pip's
# CUDA install. Idempotent: a venv that imports the pinned versions is left alone.
# Usage: scripts/torch-venv-setup.sh   (prints the venv's python on success)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.deps/venv-torch"
wheels="$root/.deps/wheels"
check='import sys, torch, gymnasium, onnx, onnxruntime, pandas, optuna
got = (torch.__version__.split("+")[0], gymnasium.__version__, onnx.__version__,
       onnxruntime.__version__, pandas.__version__, optuna.__version__)
sys.exit(got != ("2.13.0", "1.4.0", "1.23.2", "1.31.1", "3.1.1", "5.0.0"))'

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "$venv/bin/python"
    exit 0
fi
# The torch wheel is cp312.
python="$("$root/scripts/find-python.sh" 3.12 TORCH_VENV_PYTHON "${TORCH_VENV_PYTHON:-}")"
mkdir -p "$wheels"
rm -rf "$venv"
"$python" -m venv "$venv"
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
"${pip[@]}" --no-deps --find-links "$wheels" \
    torch==2.13.0 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cupti==13.0.85 >&2
# pip warns here that torch's NVIDIA requirements are not installed: expected.
"${pip[@]}" filelock==4.3.1 typing-extensions==4.16.0 setuptools==84.2.1 sympy==1.14.0 \
    mpmath==1.3.0 networkx==3.7 jinja2==3.1.6 markupsafe==3.0.4 fsspec==2026.9.0 \
    gymnasium==1.4.0 farama-notifications==0.0.6 numpy==2.5.5 cloudpickle==3.1.3 >&2
"${pip[@]}" onnx==1.23.2 ml_dtypes==0.7.0 protobuf==7.36.2 onnxruntime==1.31.1 \
    flatbuffers==25.12.19 packaging==26.4 >&2
"${pip[@]}" pandas==3.1.1 python-dateutil==4.0.0 tzdata==2026.6 optuna==5.0.0 alembic==1.20.1 \
    colorlog==6.12.0 mako==1.4.3 sqlalchemy==2.1.9 tqdm==4.70.1 pyyaml==6.0.4 >&2
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$venv/bin/python" "$root/scripts/torch_cpu_stubs.py" "$site" >&2
"$venv/bin/python" -c "$check"
echo "$venv/bin/python"
