#!/usr/bin/env bash
# Runs the GPU test suite and a short GPU benchmark on a fresh CUDA machine
# that has only its preinstalled Python packages (cupy, numba, numpy, pytest,
# hypothesis, typer, rich). Missing pure dependencies (dnaio, xopen, parasail,
# ...) are installed from wheels in .whl/ when that folder exists.
# Usage: bash scripts/gpu_check.sh [OUTDIR]
set -uo pipefail
out=${1:-${OUT:-/tmp/bpbc-gpu-check}}
mkdir -p "$out"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
python3 -c "import cupy, numba, numpy; print('cupy', cupy.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__)" | tee -a "$out/device.txt"
status=0
python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tee "$out/pytest-gpu.txt" || status=1
exit $status
