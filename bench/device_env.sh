# Sourced by the bench/device_*.sh scripts on a CUDA machine: installs the
# wheels of packages the machine lacks (from $WHEELS, default .whl, and
# .whl-extra) into /tmp/site, puts it and the checkout on PYTHONPATH, and
# records the machine in DIR/env.txt (pip's log in DIR/pip.log).
#   source bench/device_env.sh DIR
ENV_DIR=$1
mkdir -p "$ENV_DIR"
export PYTHONUNBUFFERED=1
WHEELS=${WHEELS:-.whl}
# .whl-extra: wheels of this checkout only (e.g. a cuobjdump newer than the toolkit's, for NVRTC's cubins)
WHEEL_FILES=$(ls "$WHEELS"/*.whl .whl-extra/*.whl 2>/dev/null)
if [ -n "$WHEEL_FILES" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        $WHEEL_FILES >"$ENV_DIR/pip.log" 2>&1
fi
export PYTHONPATH=/tmp/site:$PWD
{
    date -u +%FT%TZ
    nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
    nvcc --version | tail -2
    python3 -c 'import cupy, numpy, numba; print("cupy", cupy.__version__, "numpy", numpy.__version__, "numba", numba.__version__)'
    echo "cores: $(nproc)"
    python3 -c 'import llvmlite.binding as llvm; print("host CPU (LLVM):", llvm.get_host_cpu_name())' 
    git log -1 --format='%H %d %s' 2>/dev/null || cat .git-head 2>/dev/null
} >"$ENV_DIR/env.txt" 2>&1
cat "$ENV_DIR/env.txt"
