#!/bin/bash
# Issue 12 on a host with 2 GPUs: why a Dask worker screens slower than the
# command. Runs `python -m bench dask` (10M reads, 96 x 24 bp panel) with
# Dask's default worker environment, then, on the same files, the command
# alone on half the reads (one GPU; as is, with MALLOC_TRIM_THRESHOLD_=65536
# as a Dask nanny sets it, and pinned to half the cores) and two commands
# side by side, one per GPU and half file (sharding mode b without Dask).
# Results in $OUT.   bash bench/device_issue12.sh [reads]
set -u
OUT=${OUT:-/tmp/out}
source "$(dirname "$0")/device_env.sh" "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl-dask/*.whl >>"$OUT/pip.log" 2>&1
N=${1:-10000000}
KEEP=/tmp/dask-keep
rm -rf "$KEEP"; mkdir -p "$KEEP"
python3 -m bench dask --dask-reads "$N" --workers ${WORKERS:-1 2} --keep "$KEEP" --out "$OUT" 2>&1 | grep -v "━" | tail -n 12
WORK=$(ls -d "$KEEP"/bpbc-dask-bench-* | head -1)
P="$WORK/panel.fa"
half=$(( $(nproc) / 2 ))
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }
run() {  # label, then the command's environment and arguments; one line of timings per run
    local label=$1; shift
    local start=$EPOCHREALTIME
    "$@" >/dev/null 2>"$OUT/$label.err"; local rc=$?
    echo "$label rc=$rc wall=$(since "$start")"
}
cmd() { echo python3 -m bpbc "$1" "$P" --threshold 36 --device gpu --quiet -o "$2.paf" --matched "$2.m.fq.gz" --unmatched "$2.u.fq.gz" --json "$2.json"; }
mkdir -p /tmp/o
{
    for k in 1 2; do
        run "half_gpu0_plain_$k" env CUDA_VISIBLE_DEVICES=0 $(cmd "$WORK/h0.fq.gz" /tmp/o/a)
        run "half_gpu0_trim64k_$k" env CUDA_VISIBLE_DEVICES=0 MALLOC_TRIM_THRESHOLD_=65536 $(cmd "$WORK/h0.fq.gz" /tmp/o/a)
        run "half_gpu0_halfcores_$k" env CUDA_VISIBLE_DEVICES=0 taskset -c 0-$((half - 1)) $(cmd "$WORK/h0.fq.gz" /tmp/o/a)
        start=$EPOCHREALTIME
        env CUDA_VISIBLE_DEVICES=0 taskset -c 0-$((half - 1)) $(cmd "$WORK/h0.fq.gz" /tmp/o/b0) >/dev/null 2>"$OUT/pair0.err" &
        env CUDA_VISIBLE_DEVICES=1 taskset -c $half-$(( $(nproc) - 1)) $(cmd "$WORK/h1.fq.gz" /tmp/o/b1) >/dev/null 2>"$OUT/pair1.err" &
        wait
        echo "two_commands_two_gpus_$k wall=$(since "$start")"
    done
    for f in /tmp/o/a.json /tmp/o/b0.json; do python3 -c "import json,sys; d=json.load(open('$f')); print('$f', d['reads'], d['wall_time_s'], d['stage_seconds'])"; done
    python3 -c "import time; t=time.perf_counter(); import dnaio; n=sum(1 for _ in dnaio.open('$WORK/h0.fq.gz')); print('bare dnaio h0', n, time.perf_counter()-t)"
} 2>&1 | tee "$OUT/halves.txt"
