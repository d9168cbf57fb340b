#!/usr/bin/env bash
# Does the CPU engine run exactly on aarch64? Runs a parity subset of the test
# suite, and the README example through the CLI, on an arm64 Debian root
# filesystem under qemu user-mode emulation, from an x86-64 Debian host (root).
#
# Why this way: the engine's kernels are generated per numba target
# (bpbc/cpu_engine.py: the 'neon' kernel shape on aarch64), so the aarch64
# code path is only exercised where numba/LLVM compile for aarch64. qemu-user
# runs the real aarch64 wheels of numpy/numba/llvmlite, so LLVM generates and
# runs NEON code; it is slow (here about 6-7x slower than native x86-64 for
# these tests, mostly numba compiling), hence a subset.
#
# Idempotent: the host packages, the binfmt registration, the root filesystem
# and its virtual environment are reused where present. The repository's HEAD
# (committed state, not the work tree) is copied in fresh on every run.
#
# Usage: sudo bash scripts/aarch64_check.sh [LOG]      (LOG: /tmp/aarch64_check.log)
# Environment: AARCH64_ROOT (/opt/arm64root), AARCH64_SUITE (bookworm),
#   AARCH64_MIRROR (default: debootstrap's own), AARCH64_EXTRA=0 to run only
#   the CI subset, AARCH64_ALL_SHAPES=1 to add the (slow) every-kernel-shape
#   test, AARCH64_SETUP_ONLY=1 to stop after the set-up and the versions,
#   AARCH64_TIMEOUT (seconds per pytest run, 1800), AARCH64_HOST_PYTHON (the
#   x86-64 interpreter for the CLI comparison, .venv/bin/python).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root=${AARCH64_ROOT:-/opt/arm64root}
suite=${AARCH64_SUITE:-bookworm}
mirror=${AARCH64_MIRROR:-}
limit=${AARCH64_TIMEOUT:-1800}
log=${1:-/tmp/aarch64_check.log}
: > "$log"
say() { echo "$@" | tee -a "$log"; }
in_root() { chroot "$root" /usr/bin/env -i HOME=/root PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
timed() {  # timed LABEL CMD...: run, append its output to the log, record wall time; keep its status
    local label=$1 start status=0; shift
    start=$(date +%s)
    "$@" 2>&1 | tee -a "$log" || status=$?
    say "wall time [$label]: $(( $(date +%s) - start )) s (exit $status)"
    return $status
}

[ "$(id -u)" -eq 0 ] || { echo "run as root (debootstrap, chroot, binfmt)" >&2; exit 1; }

# -- 1. host: qemu-aarch64-static and debootstrap; binfmt_misc so that every
#    aarch64 executable in the chroot (not only the first) runs under qemu
if ! command -v qemu-aarch64-static >/dev/null || ! command -v debootstrap >/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y qemu-user-static debootstrap binfmt-support
fi
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || true
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    update-binfmts --enable qemu-aarch64 || true
fi
if ! grep -qx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null; then
    echo "binfmt_misc has no enabled qemu-aarch64 entry: the chroot cannot run aarch64 programs" >&2
    exit 1
fi

# -- 2. arm64 Debian root filesystem (python3 3.11 on bookworm, gcc for dnaio's sdist)
if [ ! -x "$root/usr/bin/python3" ]; then
    mkdir -p "$root"
    debootstrap --arch=arm64 --variant=minbase \
        --include=python3,python3-venv,python3-pip,python3-dev,ca-certificates "$suite" "$root" ${mirror:+"$mirror"}
fi
# with the F flag (Debian's registration) the kernel opened the interpreter at
# registration, so the chroot needs no copy of qemu-aarch64-static; without it, copy it in
grep -q '^flags:.*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 || cp /usr/bin/qemu-aarch64-static "$root/usr/bin/"
mounted=()
cleanup() { local m; for m in "${mounted[@]}"; do umount -R "$m" || true; done; }
trap cleanup EXIT
for d in proc sys dev; do
    if ! mountpoint -q "$root/$d"; then
        mount --rbind "/$d" "$root/$d"
        mount --make-rslave "$root/$d"
        mounted+=("$root/$d")
    fi
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# a host that reaches the package index through an intercepting proxy has its CA here
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    in_root update-ca-certificates >/dev/null
fi
if [ ! -x "$root/usr/bin/gcc" ]; then  # dnaio has no aarch64 wheel on the index used here: built from its sdist
    in_root sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev'
fi

# -- 3. virtual environment: the package's dependencies as aarch64 wheels.
#    parasail (the test extra's) has only an sdist, which fetches the C library
#    from GitHub at build time: ont-parasail is the same Python module (import
#    parasail, 1.3.4) with manylinux aarch64 wheels. ruff, mypy and distributed
#    (lint, types, Dask tests) are not needed for the subset.
if [ ! -x "$root/opt/venv/bin/python" ]; then
    in_root python3 -m venv /opt/venv
fi
if ! in_root python -c 'import numba, dnaio, xopen, typer, rich, parasail, pytest, hypothesis, xdist' 2>/dev/null; then
    in_root pip install -q ont-parasail "pytest>=8" "pytest-xdist>=3.5" "hypothesis>=6.100" \
        "numpy>=1.24" "numba>=0.59" "typer>=0.12" "dnaio>=1.2" "xopen>=2.1" "rich>=13"
fi

# -- 4. the repository's HEAD into the root filesystem, installed without its
#    dependencies (the commit is pinned now: the x86-64 side of the CLI check
#    uses the same one even if HEAD moves meanwhile)
commit=$(git -C "$repo" rev-parse HEAD)
rm -rf "$root/src/bpbc"
mkdir -p "$root/src/bpbc"
git -C "$repo" archive "$commit" | tar -x -C "$root/src/bpbc"
in_root pip install -q --no-deps /src/bpbc

say "== versions"
say "commit: $commit"
say "host: $(uname -m), $(qemu-aarch64-static --version | head -1)"
say "rootfs: Debian $(cat "$root/etc/debian_version") ($suite, arm64)"
in_root python - <<'EOF' 2>&1 | tee -a "$log"
import platform, sys
import llvmlite, numba, numpy, parasail
print("python", platform.python_version(), "machine", platform.machine())
print("numpy", numpy.__version__, "numba", numba.__version__, "llvmlite", llvmlite.__version__, "parasail", parasail.__version__)
assert platform.machine() == "aarch64", platform.machine()
EOF
in_root sh -c 'cd /src/bpbc && python -c "
from bpbc.cpu_engine import cpu_target, kernel_shape
t = cpu_target()
print(\"target:\", t.label, \"isa:\", t.isa, \"features:\", repr(t.features), \"shape:\", kernel_shape(t))
assert t.isa == \"neon\", t.isa
"' 2>&1 | tee -a "$log"
[ "${AARCH64_SETUP_ONLY:-0}" = 0 ] || exit 0

# the default kernel's machine code: the bit-plane logic must come out as NEON
# (v registers), not scalar code; one fresh compile
say "== NEON in the kernel"
in_root env BPBC_CACHE_DIR=/tmp/cache-asm/bpbc NUMBA_CACHE_DIR=/tmp/cache-asm/numba \
    sh -c 'rm -rf /tmp/cache-asm; cd /src/bpbc && exec python -' <<'EOF' 2>&1 | tee -a "$log"
import re
from collections import Counter
import numpy as np
from numba import njit
from bpbc.alphabet import encode_pattern
from bpbc.cpu_engine import CpuEngine, PreparedReads, kernel, kernel_shape
from bpbc.patterns import PatternTable
from bpbc.scoring import Scoring

shape = kernel_shape()
fresh = njit(nogil=True)(kernel(5, Scoring(), False).py_func)  # as bench/cpu_asm_count.py does
engine = CpuEngine(threads=1)
prepared = PreparedReads(np.zeros((64, 8), np.uint8), np.full(64, 8), words=shape.words)
table = PatternTable.of([encode_pattern("ACGTACGT")])
task_block, task_pattern = engine._all_tasks(prepared, table)
best = np.zeros((len(task_block), 0, shape.words), np.uint64)
flag = np.zeros((len(task_block), shape.words), np.uint64)
fresh(prepared.cols, prepared.block_length, table.masks.astype(np.int64), table.starts, task_block,
      task_pattern, best, flag, 0, len(task_block))
asm = fresh.inspect_asm(fresh.signatures[0])
insns = [line for line in asm.splitlines() if line.startswith("\t") and not line.strip().startswith((".", "//"))]
vector = [line for line in insns if re.search(r"\bv\d+\.(16b|8b|2d|4s|8h)\b", line)]
ops = Counter(line.split()[0] for line in vector)
print(f"kernel b=5 asm (shape {shape}): {len(insns)} instructions, {len(vector)} on NEON v registers;",
      "most used:", ", ".join(f"{op} {n}" for op, n in ops.most_common(8)))
assert len(vector) > 100, "no NEON code in the kernel"
EOF

# -- 5. tests. Fresh numba and bpbc caches; single process (-p no:xdist would
#    also do): emulation is slow, and the timing per test is the point.
#    The CI subset is .ci/run's "haswell subset": a few parity tests against
#    the reference and parasail, run there for another numba target.
ci_subset=(
    "tests/bpbc/test_engines.py::TestCpuEngine::test_edge_lengths_against_parasail[2-3-5-2]"
    tests/bpbc/test_engines.py::TestCpuEngine::test_flagged_pass_and_pair_scores
    "tests/bpbc/test_screening.py::test_two_pass_scores_equal_one_pass[30]"
    tests/bpbc/test_screening.py::test_one_alignment_per_passing_instance_with_exact_score
    tests/bpbc/test_traceback.py::test_instances_large_batch_against_parasail
    tests/bpbc/test_engines.py::test_cpu_target_instruction_sets
)
# more parity: every kernel shape against the reference on this target, the
# traceback's int32 vectors against numpy, more pairs against parasail
extra_subset=(
    tests/bpbc/test_cpu_vector.py::test_lanes_equal_numpy
    tests/bpbc/test_engines.py::TestCpuEngine::test_thousands_of_related_pairs_against_parasail
    tests/bpbc/test_engines.py::TestCpuEngine::test_saturating_screen_property
)
# every kernel shape (ternary, LUT3, 2-3 rows, explicit 4-word vectors) on this
# target: 160 s natively, about 20 min emulated, so only on request
[ "${AARCH64_ALL_SHAPES:-0}" = 0 ] || extra_subset+=(tests/bpbc/test_engines.py::test_every_kernel_shape_gives_the_same_scores)
pytest_in_root() {  # pytest_in_root NAME TESTS...
    local name=$1; shift
    in_root env BPBC_CACHE_DIR="/tmp/cache-$name/bpbc" NUMBA_CACHE_DIR="/tmp/cache-$name/numba" \
        sh -c 'name=$0 limit=$1; shift; rm -rf "/tmp/cache-$name"; cd /src/bpbc &&
               exec timeout "$limit" python -m pytest -p no:cacheprovider -v --durations=0 "$@"' \
        "$name" "$limit" "$@"
}
status=0
say "== pytest: CI subset (.ci/run's haswell subset) on aarch64"
timed "pytest CI subset" pytest_in_root ci "${ci_subset[@]}" || status=1
if [ "${AARCH64_EXTRA:-1}" != 0 ]; then
    say "== pytest: extra parity subset on aarch64"
    timed "pytest extra subset" pytest_in_root extra "${extra_subset[@]}" || status=1
fi

# -- 6. the README example through the CLI, aarch64 (emulated) against x86-64
#    (native, the repository's .venv, the same HEAD): byte-identical PAF
say "== CLI: README example, aarch64 against x86-64"
host_tree=$(mktemp -d)
git -C "$repo" archive "$commit" | tar -x -C "$host_tree"
cli=(-m bpbc examples/reads.fq.gz examples/adapters.fa --threshold 30)
timed "CLI aarch64 (emulated)" in_root env BPBC_CACHE_DIR=/tmp/cache-cli/bpbc NUMBA_CACHE_DIR=/tmp/cache-cli/numba \
    sh -c 'rm -rf /tmp/cache-cli; cd /src/bpbc && exec python "$@" > /tmp/hits-aarch64.paf' sh "${cli[@]}" || status=1
timed "CLI x86-64 (native)" env -C "$host_tree" BPBC_CACHE_DIR="$host_tree/.cache/bpbc" NUMBA_CACHE_DIR="$host_tree/.cache/numba" \
    sh -c 'exec "$0" "$@" > hits-x86_64.paf' "${AARCH64_HOST_PYTHON:-$repo/.venv/bin/python}" "${cli[@]}" || status=1
say "aarch64: $(wc -l < "$root/tmp/hits-aarch64.paf") PAF lines, sha256 $(sha256sum < "$root/tmp/hits-aarch64.paf" | cut -c1-64)"
say "x86-64:  $(wc -l < "$host_tree/hits-x86_64.paf") PAF lines, sha256 $(sha256sum < "$host_tree/hits-x86_64.paf" | cut -c1-64)"
if cmp "$root/tmp/hits-aarch64.paf" "$host_tree/hits-x86_64.paf" >/dev/null && [ -s "$host_tree/hits-x86_64.paf" ]; then
    say "CLI output: byte-identical"
else
    say "CLI output: DIFFERENT (or empty)"; status=1
fi
rm -rf "$host_tree"
say "== overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
