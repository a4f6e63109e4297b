#!/usr/bin/env bash
# The matrix products of tandem's MLP layers, timed in libtorch 2.13.0 (torch in .deps/venv-torch)
# on one thread, under each answer oneMKL can get to "is this CPU Intel's?": libtorch's own (no on
# any other CPU) and tandem's (yes; src/torch_ops.rs), the second through a preloaded one-line
# library that defines the function as tandem does. See sgemm_shapes.py for what is timed, and
# docs/performance.md ("Which sgemm kernels, by layout") for a run of it.
# Usage (repo root): scripts/bench/sgemm_shapes.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="$("$root/scripts/torch-venv-setup.sh")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo 'int mkl_serv_intel_cpu_true(void) { return 1; }' > "$work/answer.c"
cc -shared -fPIC -o "$work/libanswer.so" "$work/answer.c"
grep -m1 'model name' /proc/cpuinfo || true
echo "== libtorch's answer (a CPU that is not Intel's takes MKL's generic and Zen paths)"
"$python" "$root/scripts/bench/sgemm_shapes.py"
echo "== tandem's answer (MKL chooses by the instruction sets)"
LD_PRELOAD="$work/libanswer.so" "$python" "$root/scripts/bench/sgemm_shapes.py"
