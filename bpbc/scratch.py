"""Large scratch memory of the traceback's parallel kernels, mapped and under one budget.

A parallel numba kernel's arrays come from malloc, and glibc gives each
thread an arena of its own. Once a freed block of tens of MB has raised
malloc's mmap threshold (it follows the largest block freed, up to 32 MB),
every block below it comes from the thread's arena, and what an arena holds
at its top after a call (up to twice that threshold) stays resident:
``malloc_trim`` does not give back the top of a thread's arena. The banded
traceback of long hits holds pointers of 10-60 MB a thread, so 16 threads
kept about 0.75 GB after a call, and a run whose two tracebacks each took 16
threads kept twice that.

So a kernel maps such scratch itself (:func:`take`: anonymous memory, its
own mapping, unmapped by :func:`give` when the block is done: nothing stays
behind), and every kernel that does shares one count of the bytes mapped,
:data:`LEDGER`: a thread whose scratch would take the count past the budget
waits until other threads give theirs back (unless none hold any: then it
goes on alone, so a block never waits for ever). The memory of these
kernels is then bounded by the budget whatever the threads and calls at
once. Small scratch stays with numba's arrays (:func:`take` of fewer than
:data:`MAPPED_FROM` bytes), where a mapping's page faults would cost more
than it saves.
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from bpbc.cpu_vector import fetch_add, fetch_max

#: scratch of at least this many bytes is mapped (and counted); smaller, numba's arrays
MAPPED_FROM = 1 << 20
#: the bytes of mapped scratch that the kernels may hold at once, all threads and calls
#: together (a thread waits for more): the banded traceback's pointers of about 10 long
#: hits, or 4 blocks at POINTER_BUDGET
BUDGET = 256 << 20
#: where a thread waiting for scratch sleeps between tries, in microseconds
WAIT_US = 200

_PROT = mmap.PROT_READ | mmap.PROT_WRITE
_FLAGS = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
#: whether this system maps anonymous memory (POSIX); elsewhere the scratch is numba's arrays, uncounted
MAPS = hasattr(mmap, "MAP_ANONYMOUS")
_HUGE = getattr(mmap, "MADV_HUGEPAGE", None)  # transparent huge pages, where the system has them

#: the bytes of mapped scratch held now ([0]) and the most held at once since the last reset ([1]),
#: shared by every kernel that takes scratch (so by concurrent calls too)
LEDGER = np.zeros(2, np.int64)


_calls = 0  # calls of kernels that take scratch under way (counted)
_calls_lock = threading.Lock()


@contextmanager
def counted() -> Iterator[tuple[np.ndarray, int]]:
    """Around a call of kernels that take scratch: (LEDGER, BUDGET) to
    hand them. The first of the calls under way at once sets the count of
    mapped bytes to 0: a kernel stopped between :func:`take` and
    :func:`give` (an error, no memory) would otherwise leave its bytes
    counted, and every later call of a long-lived process wait for them."""
    global _calls
    with _calls_lock:
        if _calls == 0:
            LEDGER[0] = 0
        _calls += 1
    try:
        yield LEDGER, BUDGET
    finally:
        with _calls_lock:
            _calls -= 1


@intrinsic
def _map(typingctx, size):
    """mmap(NULL, size, read and write, private anonymous): the address, or -1."""
    if not isinstance(size, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        i32, i64 = ir.IntType(32), ir.IntType(64)
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(pointer, [pointer, i64, i32, i32, i32, i64]),
                                                  "mmap")
        address = builder.call(function, [ir.Constant(pointer, None), context.cast(builder, args[0], signature.args[0],
                                                                                     types.int64),
                                          ir.Constant(i32, _PROT), ir.Constant(i32, _FLAGS), ir.Constant(i32, -1),
                                          ir.Constant(i64, 0)])
        if _HUGE is not None:  # huge pages asked for: a 20 MB band's pointers fault in 10 times, not 5000
            advise = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [pointer, i64, i32]), "madvise")
            builder.call(advise, [address, context.cast(builder, args[0], signature.args[0], types.int64),
                                  ir.Constant(i32, _HUGE)])
        return builder.ptrtoint(address, i64)

    return types.int64(size), codegen


@intrinsic
def _unmap(typingctx, address, size):
    """munmap(address, size)."""
    if not isinstance(address, types.Integer) or not isinstance(size, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        i64 = ir.IntType(64)
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), [pointer, i64]),
                                                  "munmap")
        builder.call(function, [builder.inttoptr(args[0], pointer),
                                context.cast(builder, args[1], signature.args[1], types.int64)])
        return context.get_dummy_value()

    return types.void(address, size), codegen


@intrinsic
def _sleep(typingctx, microseconds):
    """usleep(microseconds)."""
    if not isinstance(microseconds, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i32]), "usleep")
        builder.call(function, [context.cast(builder, args[0], signature.args[0], types.int32)])
        return context.get_dummy_value()

    return types.void(microseconds), codegen


@intrinsic
def _bytes_at(typingctx, address):
    """The int64 ``address`` as a pointer to bytes."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return types.CPointer(types.uint8)(address), codegen


@njit(cache=True, nogil=True)
def reserve(ledger, size, budget):
    """Count ``size`` bytes in ledger[0], waiting while that would pass
    ``budget`` and other threads hold some (alone, a thread goes on)."""
    while True:
        before = fetch_add(ledger, 0, size)
        if before == 0 or before + size <= budget:
            fetch_max(ledger, 1, before + size)
            return
        fetch_add(ledger, 0, -size)
        _sleep(WAIT_US)


@njit(cache=True, nogil=True)
def release(ledger, size):
    """Uncount ``size`` bytes (:func:`reserve`)."""
    fetch_add(ledger, 0, -size)


@njit(cache=True, nogil=True)
def take(size, ledger, budget):
    """A uint8 array of ``size`` bytes, uninitialised: mapped and counted
    in ``ledger`` (waiting within ``budget``, :func:`reserve`) from
    MAPPED_FROM bytes on, else numba's. Hand it to :func:`give` when done,
    and keep no view of it past that. MemoryError where nothing can be mapped."""
    if MAPS and size >= MAPPED_FROM:
        reserve(ledger, size, budget)
        address = _map(size)
        if address == -1:
            release(ledger, size)
            raise MemoryError("no memory to map for the traceback's scratch")
        return carray(_bytes_at(address), size)
    return np.empty(size, np.uint8)


@njit(cache=True, nogil=True)
def give(scratch, ledger):
    """Unmap (and uncount) scratch that :func:`take` mapped; numba's arrays go with their last reference."""
    size = scratch.shape[0]
    if MAPS and size >= MAPPED_FROM:
        _unmap(scratch.ctypes.data, size)
        release(ledger, size)
