"""BufferPool: a buffer is handed out again only once nothing refers to it."""

from __future__ import annotations

import gc

import numpy as np

from bpbc.buffers import BufferPool


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def test_buffer_pool_reuses_a_buffer_once_no_view_is_left():
    pool = BufferPool(keep=2)
    first = pool.take(1000)
    first[:] = 7
    view = first[10:20].view(np.int16)  # a view of a view still holds the buffer
    address = _address(first)
    del first
    second = pool.take(1000)
    assert _address(second) != address  # the view is alive: not handed out again
    assert (view == 0x0707).all()
    del view
    third = pool.take(900)  # smaller fits: the buffer comes back
    assert _address(third) == address and len(third) == 900
    assert pool.take(5000).size == 5000  # larger than any: a new one


def test_buffer_pool_keeps_at_most_its_bound_and_the_largest():
    pool = BufferPool(keep=2)
    arrays = [pool.take(size) for size in (100, 300, 200)]
    del arrays
    assert sorted(len(slab) for slab in pool._free) == [200 + 200 // 8, 300 + 300 // 8]


def test_buffer_pool_keeps_no_buffer_above_its_largest():
    pool = BufferPool(keep=4, largest=1000)
    arrays = [pool.take(size) for size in (800, 2000)]
    del arrays
    assert [len(slab) for slab in pool._free] == [800 + 800 // 8]


def test_a_large_buffer_is_private_memory_that_holds_what_is_written():
    pool = BufferPool(keep=1)
    size = 9 << 20  # above the size that asks for huge pages
    array = pool.take(size)
    array[::4096] = np.arange(len(array[::4096])) % 251
    expect = array.copy()
    address = _address(array)
    del array
    gc.collect()
    again = pool.take(size)
    assert _address(again) == address and np.array_equal(again, expect)  # reused, not cleared
