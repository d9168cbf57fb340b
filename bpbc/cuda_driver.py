"""CUDA's driver started, and every visible device's primary context made,
without holding the GIL.

CuPy's first call (``getDeviceCount``, which starts the driver) and its
``setDevice`` (which makes the device's primary context, in CUDA 12 and
later) do this work holding the GIL: a few tenths of a second a device in
which no other thread of the process ran, neither the command's imports nor
the reading of its input. Here the same work goes through the driver's C API
by ctypes, which lets go of the GIL for each call, a thread per device; CuPy
then finds it done. Only the standard library is imported (the command
calls this from its first moment, see :func:`bpbc.server.start_cuda_early`).
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import threading

LIBRARY = "libcuda.so.1"
_lock = threading.Lock()
_devices: int | None = None  #: what the first start found, once it has run


def start(library: str = LIBRARY) -> int:
    """Start the driver and retain every visible device's primary context, the
    devices in parallel: the devices' count, 0 where CUDA cannot start here
    (no driver, no device: CuPy's own start meets and reports it). Once per
    process; a later call waits for the first and returns its count. The
    contexts retained live as long as the process, as CuPy's do."""
    global _devices
    with _lock:
        if _devices is None:
            _devices = _start(library)
        return _devices


def import_cupy():
    """``import cupy``, with :func:`start` running beside the import: CuPy's
    first call then finds the driver started and the contexts made. Without
    CuPy the import fails as it would, and no context is made: a CPU run on a
    GPU host takes no device memory."""
    installed = sys.modules["cupy"] is not None if "cupy" in sys.modules else importlib.util.find_spec("cupy")
    if not installed:
        import cupy  # noqa: F401 - raises the ImportError the caller expects
    driver = threading.Thread(target=start, name="bpbc-cuda-driver", daemon=True)
    driver.start()
    try:
        import cupy
    finally:
        driver.join()
    return cupy


def _start(library: str) -> int:
    try:
        cuda = ctypes.CDLL(library)
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
    except (OSError, AttributeError):
        return 0

    def retain(ordinal: int) -> None:
        device, context = ctypes.c_int(0), ctypes.c_void_p()
        if cuda.cuDeviceGet(ctypes.byref(device), ordinal) == 0:
            cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)

    threads = [threading.Thread(target=retain, args=(ordinal,), name="bpbc-cuda-context", daemon=True)
               for ordinal in range(count.value)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return count.value
