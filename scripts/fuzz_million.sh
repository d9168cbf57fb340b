#!/bin/bash
# The answer-checking fuzz (bench/fuzz.py) over 10^6 inputs on a many-core
# host, in one call or in several (each under a time limit), added up.
#
#   bash scripts/fuzz_million.sh WORKERS TIME_LIMIT_S OUTDIR [TOTAL] [SEED]
#
#   WORKERS       fuzz processes (one a core: the number of cores)
#   TIME_LIMIT_S  seconds this call's run may take, its workers' start-up
#                 included (the cases under way then end, within --stop-grace
#                 20 s); the numba caches are filled before, untimed
#   OUTDIR        where the parts go: OUTDIR/part1, OUTDIR/part2, ... (each
#                 a run's fuzz_cpu.json, fuzz_cpu_messages.csv and
#                 raw/fuzz_findings), and OUTDIR/fuzz_cpu.json and
#                 OUTDIR/fuzz_cpu_messages.csv, all parts added up
#   TOTAL         inputs in all (default 1000000)
#   SEED          the run's seed (default 43)
#
# A call runs the inputs the parts already in OUTDIR leave to do, as case
# indices after theirs (runs of one seed over disjoint ranges are distinct
# inputs; bench/fuzz.py --merge refuses overlapping ones). A run stopped by
# its time limit has run, in each worker's stride, every case below its
# next_index; the next part starts after the whole range of the one before.
# So: call it; if OUTDIR/fuzz_cpu.json says fewer than TOTAL inputs, put
# that OUTDIR back (with its part directories) and call it again.
#
# On a device host (one call at most 600 s: leave some 100 s for the set-up,
# the caches and the stop), e.g. 32 cores:
#
#   bash scripts/fuzz_million.sh 32 480 $OUT/fuzz > $OUT/fuzz_million.log 2>&1; tail -n 8 $OUT/fuzz_million.log
#
# and for a second call, the first call's $OUT/fuzz copied into the checkout
# as fuzz_parts/ (untracked, not ignored: it travels with the tree):
#
#   cp -r fuzz_parts $OUT/fuzz && bash scripts/fuzz_million.sh 32 480 $OUT/fuzz > $OUT/fuzz_million.log 2>&1; tail -n 8 $OUT/fuzz_million.log
#
# Environment: PYTHON (default python3), BPBC_FUZZ_HARNESS=main|direct (default main: the whole
# command line through bpbc.cli.main), BPBC_FUZZ_EXTRA (more options for
# bench.fuzz, e.g. --parallel-gzip), WHEELS (wheels to install first into
# /tmp/site, as bench/device.sh does; default .whl where it exists).
set -u
if [ $# -lt 3 ]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 2
fi
workers=$1 limit=$2 outdir=$3 total=${4:-1000000} seed=${5:-43} python=${PYTHON:-python3}
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
wheels=$(ls "${WHEELS:-.whl}"/*.whl 2>/dev/null)
if [ -n "$wheels" ]; then
    # shellcheck disable=SC2086  # one word per wheel
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        $wheels || exit 1
    export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
else
    export PYTHONPATH=$PWD
fi
export BPBC_CACHE_DIR=${BPBC_CACHE_DIR:-$PWD/bench/results/raw/bpbc-cache}
mkdir -p "$outdir"

# the parts so far: inputs done, and the first case index after every part's range
read -r done next parts < <("$python" - "$outdir" <<'EOF'
import json, sys
from pathlib import Path
runs = [json.loads(p.read_text()) for p in sorted(Path(sys.argv[1]).glob("part*/fuzz_cpu.json"))]
print(sum(r["inputs"] for r in runs), max((r["start"] + r["inputs_requested"] for r in runs), default=0), len(runs))
EOF
)
left=$((total - done))
echo "fuzz_million: $parts parts so far, $done inputs; $left to do from case $next (seed $seed, $workers workers, $limit s)"
if [ "$left" -gt 0 ]; then
    # numba's kernels (bpbc's and the oracle's) compiled once here, not in every worker at once
    began=$SECONDS
    "$python" -m bench fuzz --inputs 64 --workers 1 --seed "$seed" --start 0 --out "/tmp/fuzz-warm-$$" \
        >"/tmp/fuzz-warm-$$.log" 2>&1
    warm=$?
    echo "fuzz_million: caches warm in $((SECONDS - began)) s (64 cases of the seed, status $warm)"
    if [ "$warm" -ge 2 ]; then  # 2: its worker never started (a package missing?); 130: interrupted
        tail -n 20 "/tmp/fuzz-warm-$$.log"
        exit "$warm"
    fi
    rm -rf "/tmp/fuzz-warm-$$" "/tmp/fuzz-warm-$$.log"
    part=$outdir/part$((parts + 1))
    # shellcheck disable=SC2086  # BPBC_FUZZ_EXTRA: words
    "$python" -m bench fuzz --harness "${BPBC_FUZZ_HARNESS:-main}" --workers "$workers" --seed "$seed" \
        --start "$next" --inputs "$left" --time-limit "$limit" --report-every 60 --out "$part" ${BPBC_FUZZ_EXTRA:-}
    echo "fuzz_million: part exit status $?"
fi
# shellcheck disable=SC2046  # one word per part
"$python" -m bench fuzz --merge $(ls -d "$outdir"/part*) --out "$outdir"
status=$?
"$python" - "$outdir" <<'EOF'
import json, sys
from pathlib import Path
total = json.loads((Path(sys.argv[1]) / "fuzz_cpu.json").read_text())
for run in total["runs"]:
    print(f"  part from {run['start']}: {run['inputs']} inputs in {run['elapsed_s']} s on {run['workers']} workers "
          f"({run['inputs_per_s']} /s, {run['inputs_per_s'] / run['workers']:.1f} /s a worker)")
print(f"fuzz_million: {total['inputs']} inputs, outcomes {total['outcomes']}")
EOF
exit $status
