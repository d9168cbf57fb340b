import ctypes
import threading

import pytest

from bpbc import cuda_driver


class FakeDriver:
    """libcuda's calls that cuda_driver makes, on ``devices`` devices, recorded."""

    def __init__(self, devices: int, init_status: int = 0):
        self.devices, self.init_status, self.calls = devices, init_status, []
        self.threads: set[str] = set()

    def cuInit(self, flags):
        self.calls.append("cuInit")
        return self.init_status

    def cuDeviceGetCount(self, count):
        count._obj.value = self.devices
        return 0

    def cuDeviceGet(self, device, ordinal):
        device._obj.value = 100 + ordinal
        return 0

    def cuDevicePrimaryCtxRetain(self, context, device):
        self.calls.append(("retain", device.value))
        self.threads.add(threading.current_thread().name)
        return 0


@pytest.fixture
def driver(monkeypatch):
    """A fresh process's cuda_driver, on a fake libcuda of 3 devices."""
    fake = FakeDriver(3)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: fake)
    monkeypatch.setattr(cuda_driver, "_devices", None)
    return fake


def test_the_start_retains_every_devices_primary_context_in_threads_of_their_own(driver):
    assert cuda_driver.start() == 3
    assert driver.calls[0] == "cuInit"
    assert sorted(driver.calls[1:]) == [("retain", 100), ("retain", 101), ("retain", 102)]
    assert driver.threads == {"bpbc-cuda-context"}


def test_the_start_runs_once_a_process(driver):
    assert [cuda_driver.start() for _ in range(3)] == [3, 3, 3]
    assert driver.calls.count("cuInit") == 1 and len(driver.calls) == 4


def test_the_start_is_a_quiet_zero_without_a_driver(monkeypatch, tmp_path):
    assert cuda_driver._start(str(tmp_path / "libcuda-missing.so")) == 0  # OSError from dlopen
    failing = FakeDriver(2, init_status=100)  # CUDA_ERROR_NO_DEVICE
    monkeypatch.setattr(ctypes, "CDLL", lambda name: failing)
    assert cuda_driver._start(cuda_driver.LIBRARY) == 0 and failing.calls == ["cuInit"]


def test_cupy_is_imported_beside_the_start(driver, monkeypatch):
    import sys
    import types

    fake_cupy = types.ModuleType("cupy")
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    assert cuda_driver.import_cupy() is fake_cupy
    assert cuda_driver._devices == 3  # started, and finished before import_cupy returned


def test_without_cupy_no_driver_starts(driver, monkeypatch):
    """A CPU run on a host with a driver but no CuPy makes no context (device memory on every GPU)."""
    import importlib.util
    import sys

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    with pytest.raises(ImportError):
        cuda_driver.import_cupy()
    assert driver.calls == [] and cuda_driver._devices is None
