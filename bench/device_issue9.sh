#!/bin/bash
# Issue 9 on a CUDA machine in one go: the end-to-end rows (1M and 10M reads,
# one 128 bp pattern and the 96 x 24 bp panel) beside a bare dnaio pass and
# bpbc's own floors (reader alone, reader + writing every record back, the
# command without --matched/--unmatched). Results in $OUT.
#   bash bench/device_issue9.sh [reads...]   (default: 1048576 10485760)
# Wheels for packages the machine lacks are taken from $WHEELS (default .whl).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
WHEELS=${WHEELS:-.whl}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$WHEELS"/*.whl >"$OUT/pip.log" 2>&1
export PYTHONPATH=/tmp/site:$PWD
{
    date -u +%FT%TZ
    nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
    nproc
    git log -1 --format='%H %s' 2>/dev/null
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
python3 -m bench sw --only e2e --e2e-reads ${*:-1048576 10485760} --out "$OUT" 2>&1 | grep -v "━" | tail -n 30
