"""Tests marked ``gpu`` run wherever a CUDA GPU is usable through CuPy and are
skipped, with the reason, everywhere else; ``pytest -m gpu`` runs only them."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    gpu_tests = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_tests:
        return
    from bpbc.engines import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    if reason is not None:
        skip = pytest.mark.skip(reason=f"no usable GPU: {reason}")
        for item in gpu_tests:
            item.add_marker(skip)
