#!/bin/bash
# Issue 10 items 1, 4 and 5 on a CUDA machine, in one go (device time is scarce):
# GPU transpose tests, transposes before/after, SASS counts (+ Nsight Compute
# executed counts), the DPX peer beside bpbc. Everything lands in $OUT/r and is
# packed into $OUT/results.tgz (the device tool returns at most 8 files).
#   bash bench/device_issue10.sh [parts...]   parts: tests transpose variants sass ncu dpx (default: all but variants)
# The machine is set up by bench/device_env.sh.
set -u
OUT=${OUT:-/tmp/out}
R=$OUT/r
PARTS=${*:-tests transpose sass ncu dpx}
source "$(dirname "$0")/device_env.sh" "$R"

step() {  # name timeout command...
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >"$R/$name.log" 2>&1
    local rc=$?
    echo "== $name rc=$rc $((SECONDS - t0)) s"
    tail -n 25 "$R/$name.log"
}

for part in $PARTS; do
    case $part in
    tests)
        step pytest_transpose 150 python3 -m pytest -m gpu tests/transpose -q -p no:cacheprovider ;;
    transpose)
        step transpose 150 python3 -m bench transpose --legacy --cpu-max 0 --out "$R" ;;
    variants)
        step transpose_variants 240 python3 -m bench.transpose_variants --out "$R" ;;
    probes)
        step probes 60 python3 -m bench.transpose_variants --probes-only --out "$R"
        step transpose_sass 60 python3 -m bench.transpose_variants --sass --out "$R" ;;
    sass)
        step sass 120 python3 -m bench sass --planes 5 6 7 --out "$R" --sass-dir "$R/sass" ;;
    ncu)
        step ncu_metrics 120 ncu --clock-control none --kernel-name regex:sw_screen --csv \
            --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_lsu.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum \
            python3 -m bench sass --planes 5 6 7 --launch 1048576
        step ncu_source 150 bash -c "ncu --clock-control none --kernel-name regex:sw_screen --section SourceCounters \
            -f -o /tmp/sw_source python3 -m bench sass --planes 5 6 7 --launch 1048576 && \
            ncu -i /tmp/sw_source.ncu-rep --page source --csv --print-source sass > $R/ncu_source.csv" ;;
    dpx)
        step dpx 420 python3 -m bench dpx --check "${DPX_CHECK:-.devdata/dpx_check.npz}" --out "$R" --workers 14 ;;
    esac
done
(cd "$OUT" && tar czf results.tgz r && ls -la results.tgz)
