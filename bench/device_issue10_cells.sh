#!/bin/bash
# Issue 10, synthesised GPU cells (bpbc/sw_cells.cuh), on a CUDA machine in one
# go (at most 8 min: the steps' timeouts add up to 480 s): GPU parity tests, the kernel alone hand vs synthesised cell
# side by side (TCUPS), static SASS counts of both, and Nsight Compute executed
# counts of both when ncu is there. Results land in $OUT/r, packed into
# $OUT/results.tgz.
#   bash bench/device_issue10_cells.sh [parts...]   parts: tests ab sass ncu (default: all)
# The machine is set up by bench/device_env.sh.
set -u
OUT=${OUT:-/tmp/out}
R=$OUT/r
PARTS=${*:-tests ab sass ncu}
source "$(dirname "$0")/device_env.sh" "$R"

step() {  # name timeout command...
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >"$R/$name.log" 2>&1
    local rc=$?
    echo "== $name rc=$rc $((SECONDS - t0)) s"
    tail -n 25 "$R/$name.log"
}

NCU_READS=262144  # ncu replays the launch: a quarter of the timed size
for part in $PARTS; do
    case $part in
    tests)  # GPU parity: synthesised vs hand vs CPU first, then the rest of the engine's GPU tests
        step pytest_gpu 180 python3 -m pytest -m gpu -q -p no:cacheprovider \
            tests/bpbc/test_gpu_engine.py tests/bpbc/test_engines.py ;;
    ab)  # the kernel alone, hand then synthesised cell, per plane count (default scoring, pattern 128)
        step cell_ab 100 python3 -m bench.cell_ab --planes 5 6 7 8 --out "$R" ;;
    sass)
        step sass 60 python3 -m bench sass --planes 6 7 --cell synth hand --out "$R" --sass-dir "$R/sass" ;;
    ncu)
        if command -v ncu >/dev/null; then
            step ncu_source 90 bash -c "ncu --clock-control none --kernel-name regex:sw_screen --section SourceCounters \
                -f -o /tmp/sw_cells_source python3 -m bench sass --planes 6 7 --cell synth hand --launch $NCU_READS && \
                ncu -i /tmp/sw_cells_source.ncu-rep --page source --csv --print-source sass > $R/ncu_source.csv"
            step sass_executed 50 python3 -m bench sass --planes 6 7 --cell synth hand --out "$R/executed" \
                --executed "$R/ncu_source.csv" --cells $((NCU_READS * 150 * 128))
        else
            echo "== ncu not found: no executed counts"
        fi ;;
    esac
done
(cd "$OUT" && tar czf results.tgz r && ls -la results.tgz)
