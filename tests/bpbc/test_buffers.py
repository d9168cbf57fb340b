"""BufferPool: a buffer is handed out again only once nothing refers to it."""

from __future__ import annotations

import gc

import numpy as np

from bpbc.buffers import BufferPool


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _free_sizes(pool: BufferPool) -> list[int]:
    with pool._lock:
        pool._take_returned()
        return sorted(len(slab) for slab in pool._free)


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
    assert _free_sizes(pool) == [200 + 200 // 8, 300 + 300 // 8]


def test_buffer_pool_keeps_no_buffer_above_its_largest():
    pool = BufferPool(keep=4, largest=1000)
    arrays = [pool.take(size) for size in (800, 2000)]
    del arrays
    assert _free_sizes(pool) == [800 + 800 // 8]


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


def test_a_buffer_freed_by_the_garbage_collector_inside_take_comes_back():
    """The collector may free a cycle holding a pool's array while take()
    holds the pool's lock (it allocates there): giving the buffer back must
    not wait for that lock (it waited for ever)."""
    import threading

    pool = BufferPool(keep=2)

    def collect_inside_take() -> None:
        cycle: list = [pool.take(64)]
        cycle.append(cycle)  # freed only by the collector
        del cycle
        with pool._lock:  # as inside take()
            gc.collect()

    worker = threading.Thread(target=collect_inside_take, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the buffer's return waited for take()'s lock"
    assert _free_sizes(pool) == [64 + 64 // 8]


def test_a_small_request_does_not_take_a_much_larger_buffer():
    pool = BufferPool(keep=4)
    large = pool.take(10 << 20)
    address = _address(large)
    del large
    small = pool.take(1000)
    assert _address(small) != address  # left for a large request
    assert _address(pool.take(9 << 20)) == address
