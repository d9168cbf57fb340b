#!/usr/bin/env bash
# Runs the GPU test suite (pytest -m gpu) on a fresh CUDA machine
# that has only its preinstalled Python packages (cupy, numba, numpy, pytest,
# hypothesis, typer, rich). Missing dependencies (dnaio, xopen, isal, zlib-ng,
# backports.zstd, parasail) are installed from wheels in .whl/ when that folder
# exists; on a machine with network access fetch them first, for its Python:
#   pip download --no-deps --only-binary=:all: -d .whl dnaio xopen isal zlib-ng backports.zstd parasail
# Real reads in .devdata/ (illumina.fastq.gz, adapters.fa) are used by the
# CLI test when present, else the shipped example.
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
