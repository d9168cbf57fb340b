#!/bin/bash
# Run benchmarks of the suite on a CUDA machine, several in one call (device
# time is scarce), each step's log and result files under $OUT, then packed
# into $OUT/results.tgz.
#
#   bash bench/device.sh SUBCOMMAND [SUBCOMMAND ...]
#
#   gpu-tests           pytest -m gpu tests (GPU against CPU, bit for bit)
#   transpose           python -m bench transpose --v1 --cpu-max 0   (transposes, current and v1 kernels)
#   transpose-variants  python -m bench transpose-variants, with --probes-only and --sass
#   gpu-kernel          python -m bench gpu-kernel   (the SW kernel alone, and the hits in two passes and in one;
#                       $GPU_KERNEL_CASES: its cases, e.g. 0,1,4; default all)
#   sass                python -m bench sass   (static instructions per 32-cell word of the SW kernel)
#   ncu                 executed instructions per word and the pipes' load (Nsight Compute; needs ncu)
#   dpx                 python -m bench dpx and python -m bench gpu-kernel 0,1 in the same call (the DPX peer;
#                       $DPX_ONLY: its settings, e.g. "screen_4M_150x128 table2_32768_1024x128"; default all)
#   sw                  python -m bench sw --only table2 screen   (the paper's Table II, screening rates;
#                       $SW_PARTS: the parts, default "table2 screen"; $SW_REPEATS: repeats, default 3)
#   e2e                 python -m bench sw --only e2e   (bpbc-screen end to end; $E2E_READS, default 1048576 10485760)
#   pairs               python -m bench sw --only pairs   (paired reads and demultiplexing)
#   startup             python -m bench startup --generate 1048576 --device gpu   (a fresh process against bpbc-serve)
#   startup-trees       python -m bench startup --trees $STARTUP_TREES --rounds $STARTUP_ROUNDS   (checkouts against
#                       each other, alternating: import bpbc.cli, the one-read run's wall, run and wall minus run on
#                       the CPU and the GPU; default base=.devdata/base new=., 15 rounds)
#   host-pipeline       python -m bench host-pipeline   (the whole command beside rapidgzip, dnaio, cutadapt and sassy;
#                       $HOST_TREES: NAME=DIR checkouts to compare, e.g. base=.devdata/base new=.)
#   dask                python -m bench dask   (1 and 2 GPUs; $DASK_READS, default 10000000; needs .whl-dask)
#   panel-rate          python -m bench panel-rate on the GPU (1M reads a panel: 1 x 128, 96, 1000 and 5000 x 24 bp)
#                       and on the host's CPU cores (the same panels, and the traceback on 1 to all threads)
#
# The machine is set up first: wheels of the packages it lacks are installed
# from $WHEELS (default .whl) and .whl-extra into /tmp/site, which goes on
# PYTHONPATH with the checkout, and the machine is recorded in $OUT/env.txt
# (GPU, driver, toolkit, package versions, host CPU, commit).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

set_up() {
    local wheels
    wheels=$(ls "${WHEELS:-.whl}"/*.whl .whl-extra/*.whl 2>/dev/null)
    if [ -n "$wheels" ]; then
        # shellcheck disable=SC2086  # one word per wheel
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            $wheels >"$OUT/pip.log" 2>&1
    fi
    export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
    # bytecode, as a pip install writes it (--no-compile above, for speed): a
    # fresh process's start is measured as users see it
    python3 -m compileall -q -j 0 /tmp/site "$PWD/bpbc" "$PWD/transpose" >/dev/null 2>&1
    {
        date -u +%FT%TZ
        nvidia-smi -L
        nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
        nvcc --version | tail -2
        python3 -c 'import cupy, numpy, numba; print("cupy", cupy.__version__, "numpy", numpy.__version__, "numba", numba.__version__)'
        echo "cores: $(nproc)"
        python3 -c 'import llvmlite.binding as llvm; print("host CPU (LLVM):", llvm.get_host_cpu_name())'
        git log -1 --format='%H %s' 2>/dev/null || cat .git-head 2>/dev/null
    } >"$OUT/env.txt" 2>&1
    cat "$OUT/env.txt"
}

step() {  # NAME TIMEOUT COMMAND...: run it, its output in $OUT/NAME.log, and show the log's tail
    local name=$1 limit=$2
    shift 2
    local began=$SECONDS
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "== $name: exit status $? in $((SECONDS - began)) s"
    grep -v "━" "$OUT/$name.log" | tail -n 25
}

ncu_metrics=smsp__inst_executed.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fma.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum

if [ $# -eq 0 ]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 2
fi
set_up
for subcommand in "$@"; do
    case $subcommand in
    gpu-tests)
        step pytest_gpu 540 python3 -m pytest -m gpu tests -q -p no:cacheprovider -p no:benchmark -n 8 ;;
    transpose)
        step transpose 150 python3 -m bench transpose --v1 --cpu-max 0 --out "$OUT" ;;
    transpose-variants)
        step transpose_variants 240 python3 -m bench transpose-variants --out "$OUT"
        step transpose_probes 60 python3 -m bench transpose-variants --probes-only --out "$OUT"
        step transpose_sass 60 python3 -m bench transpose-variants --sass --out "$OUT" ;;
    gpu-kernel)
        step gpu_kernel 300 python3 -m bench gpu-kernel ${GPU_KERNEL_CASES:+"$GPU_KERNEL_CASES"} ;;
    sass)
        step sass 120 python3 -m bench sass --planes 5 6 7 --variant best flag --out "$OUT" --sass-dir "$OUT/sass" ;;
    ncu)
        # one launch per variant and plane count on 4M reads of 150 bp against 128 bp: the pipes' counts, then
        # the per-instruction counts that bench sass turns into executed instructions per 32-cell word
        step ncu_metrics 150 ncu --clock-control none --kernel-name regex:sw_screen --csv --metrics "$ncu_metrics" \
            python3 -m bench sass --planes 5 6 --variant best flag --launch 4000000
        step ncu_source 200 bash -c "ncu --clock-control none --kernel-name regex:sw_screen --section SourceCounters \
            -f -o /tmp/sw_source python3 -m bench sass --planes 5 6 --variant best flag --launch 4000000 && \
            ncu -i /tmp/sw_source.ncu-rep --page source --csv --print-source sass > $OUT/ncu_source.csv"
        step sass_executed 60 python3 -m bench sass --planes 5 6 --variant best flag --out "$OUT" \
            --executed "$OUT/ncu_source.csv" --cells $((4000000 * 150 * 128))
        # what the warps wait on in the paper's setting (32768 reads of 1024 bp, 6 planes with best)
        step ncu_stalls 120 ncu --clock-control none --kernel-name regex:sw_screen --section SchedulerStats \
            --section WarpStateStats python3 -m bench sass --planes 6 --launch 32768 --read-length 1024 ;;
    dpx)
        # shellcheck disable=SC2086  # one word per setting
        step dpx 420 python3 -m bench dpx --check "${DPX_CHECK:-.devdata/dpx_check.npz}" --out "$OUT" --workers 14 \
            ${DPX_ONLY:+--only $DPX_ONLY}
        step dpx_gpu_kernel 120 python3 -m bench gpu-kernel 0,1 ;;
    sw)
        # shellcheck disable=SC2086  # one word per part
        step sw 540 python3 -m bench sw --only ${SW_PARTS:-table2 screen} ${SW_REPEATS:+--repeats "$SW_REPEATS"} \
            --out "$OUT" ;;
    e2e)
        # shellcheck disable=SC2086  # one word per read count
        step sw_e2e 540 python3 -m bench sw --only e2e --e2e-reads ${E2E_READS:-1048576 10485760} --out "$OUT" ;;
    pairs)
        step sw_pairs 300 python3 -m bench sw --only pairs --out "$OUT" ;;
    host-pipeline)
        # shellcheck disable=SC2086  # one word per tree
        step host_pipeline 560 python3 -m bench host-pipeline --out "$OUT" ${HOST_TREES:+--trees $HOST_TREES} ;;
    startup)
        step startup 300 python3 -m bench startup --generate 1048576 --device gpu --out "$OUT" ;;
    startup-trees)
        # shellcheck disable=SC2086  # one word per tree
        step startup_trees 560 python3 -m bench startup --trees ${STARTUP_TREES:-base=.devdata/base new=.} \
            --rounds "${STARTUP_ROUNDS:-15}" --out "$OUT" ;;
    dask)
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl-dask/*.whl >>"$OUT/pip.log" 2>&1
        step dask 540 python3 -m bench dask --dask-reads "${DASK_READS:-10000000}" --workers 1 2 --out "$OUT" ;;
    panel-rate)
        step panel_rate_gpu 560 python3 -m bench panel-rate --device gpu --panels 1x128 96x24 1000x24 5000x24 \
            --max-reads 1000000 --cells 4e13 --rounds 2 --out "$OUT"
        step panel_rate_cpu 400 python3 -m bench panel-rate --device cpu --panels 1x128 96x24 1000x24 5000x24 \
            --cells 1e12 --rounds 3 --hits-reads 400000 --hits-threads 1 4 8 "$(nproc)" --out "$OUT" ;;
    *)
        echo "bench/device.sh: unknown subcommand $subcommand (run it without arguments for the list)" >&2
        exit 2 ;;
    esac
done
(cd "$OUT" && tar czf /tmp/results.tgz --exclude=results.tgz . && mv /tmp/results.tgz results.tgz)
