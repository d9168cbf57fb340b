#!/bin/bash
# Issue 9 on a CUDA machine in one go: the end-to-end rows (1M and 10M reads,
# one 128 bp pattern and the 96 x 24 bp panel) beside a bare dnaio pass and
# bpbc's own floors (reader alone, reader + writing every record back, the
# command without --matched/--unmatched). Results in $OUT.
#   bash bench/device_issue9.sh [reads...]   (default: 1048576 10485760)
# The machine is set up by bench/device_env.sh.
set -u
OUT=${OUT:-/tmp/out}
source "$(dirname "$0")/device_env.sh" "$OUT"
python3 -m bench sw --only e2e --e2e-reads ${*:-1048576 10485760} --out "$OUT" 2>&1 | grep -v "━" | tail -n 30
