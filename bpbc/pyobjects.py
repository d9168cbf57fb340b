"""The bytes of many Python ``str`` and ``bytes`` objects, copied into one buffer on every core.

Reads given as a list of Python strings had to become one buffer on one
core: ``"".join(reads).encode()`` and their lengths took 65 ms of a 320 ms
one-thread screen of 400k reads x 150 bp on a 2-core Zen 5, and 0.54 s of
0.73 s for 1.6M reads on 16 cores of an Emerald Rapids host. Here a numba
kernel reads each object where CPython keeps its text (a compact ASCII str
holds its characters right after its header, a bytes object its bytes, a
list its item pointers in one array) and copies them out in parallel: no
Python loop, no intermediate string.

The kernels hold the GIL while their worker threads run (they are not
``nogil``): no other Python thread can change the list or free an object
during a call; the copy reads every object afresh and checks it against the
lengths the first call found. The layout is probed on first use from objects made for the purpose, and the
kernel runs only where every probe agrees (never on a free-threaded build).
Records such as dnaio's are read through the pointer to their sequence
where the record type keeps it as it is (:func:`record_slot`). An object
it does not recognise (a str subclass, non-ASCII text, another kind of
record, ...) makes :func:`gather` return None: the caller then takes the
general route, which also words the errors.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from dataclasses import dataclass

import numpy as np
from numba import carray, njit, prange, types
from numba.extending import intrinsic

from .buffers import BufferPool

#: a str's ``state`` bits: kind (bits 2-4), compact (5), ascii (6); interned
#: (bits 0-1) and later bits do not matter
_STATE_MASK = 0x7C
#: those bits of a compact ASCII str (kind 1: one byte per character)
_STATE_COMPACT_ASCII = 0x64


@dataclass(frozen=True)
class Layout:
    """Byte offsets into CPython objects, and the addresses of the types."""

    type_offset: int  #: of ``ob_type`` in every object
    list_size: int  #: of ``ob_size`` in a list
    list_items: int  #: of ``ob_item`` (the item pointers) in a list
    str_type: int
    str_length: int
    str_state: int  #: of the byte holding the state bits
    str_data: int  #: of the first character of a compact ASCII str
    bytes_type: int
    bytes_length: int
    bytes_data: int


def _word(address: int) -> int:
    return ctypes.c_ssize_t.from_address(address).value


def _word_offsets(obj, value: int, limit: int = 64) -> list[int]:
    """Offsets of the machine words inside ``obj`` (its first ``limit``
    bytes at most, never past its end) equal to ``value``."""
    kind = type(obj)
    size = min(limit, kind.__basicsize__ + (kind.__itemsize__ * len(obj) if kind.__itemsize__ else 0))
    return [k for k in range(0, size - 7, 8) if _word(id(obj) + k) == value]


def _common_offset(objects, values) -> int | None:
    """The one offset at which every object holds its value, else None."""
    found = set.intersection(*(set(_word_offsets(obj, value)) for obj, value in zip(objects, values)))
    return found.pop() if len(found) == 1 else None


def _probe() -> Layout | None:
    """The layout of this interpreter's objects, or None where a probe disagrees."""
    if sys.implementation.name != "cpython" or not getattr(sys, "_is_gil_enabled", lambda: True)():
        return None
    # made at run time (not constants, not interned), of lengths nothing else in the header equals
    ascii_texts = ["".join(["ACGT"] * 250) + "a", "".join(["GT"] * 1001) + "c"]
    byte_texts = [text.encode() for text in ascii_texts]
    lists: list[list] = [[], []]
    for count, a_list in zip((1013, 3001), lists):  # appended to: more room than items, unlike a copy
        for k in range(count):
            a_list.append((ascii_texts + byte_texts)[k % 4])
    objects = ascii_texts + byte_texts + lists
    type_offset = _common_offset(objects, [id(type(obj)) for obj in objects])
    str_length = _common_offset(ascii_texts, [len(text) for text in ascii_texts])
    bytes_length = _common_offset(byte_texts, [len(data) for data in byte_texts])
    list_size = _common_offset(lists, [len(a_list) for a_list in lists])
    if None in (type_offset, str_length, bytes_length, list_size):
        return None
    assert type_offset is not None and str_length is not None and bytes_length is not None and list_size is not None
    # the text follows the header and ends in a NUL that getsizeof counts
    str_data = sys.getsizeof(ascii_texts[0]) - len(ascii_texts[0]) - 1
    bytes_data = sys.getsizeof(byte_texts[0]) - len(byte_texts[0]) - 1
    for text, data in zip(ascii_texts, byte_texts):
        if (sys.getsizeof(text) - len(text) - 1 != str_data or ctypes.string_at(id(text) + str_data, len(text)) != data
                or ctypes.string_at(id(data) + bytes_data, len(data)) != data):
            return None
    # the state bits, after the length and the hash; every kind of str tells its own
    kinds = {_STATE_COMPACT_ASCII: ascii_texts, 0x24: ["\xe9" * 300], 0x28: ["\u0100" * 300], 0x30: ["\U00010000" * 300]}
    str_state = next((offset for offset in range(str_length + 8, str_data) if all(
        ctypes.c_uint8.from_address(id(text) + offset).value & _STATE_MASK == bits
        for bits, texts in kinds.items() for text in texts)), None)
    if str_state is None:
        return None
    # a list: its item pointers follow its size; checked before they are read
    list_items = list_size + 8
    for a_list in lists:
        items = _word(id(a_list) + list_items)
        if items % 8 or items < 1 << 16 or _word(items) != id(a_list[0]) or _word(
                items + 8 * (len(a_list) - 1)) != id(a_list[-1]):
            return None
    return Layout(type_offset, list_size, list_items, id(str), str_length, str_state, str_data, id(bytes),
                  bytes_length, bytes_data)


@functools.cache
def layout() -> Layout | None:
    """This interpreter's :class:`Layout`, probed once; None: :func:`gather` always declines."""
    return _probe()


#: record type -> :func:`record_slot`, probed once per type
_RECORD_SLOTS: dict[type, int | None] = {}


def record_slot(record_type: type) -> int | None:
    """The offset of the pointer to the ``sequence`` inside an object of
    ``record_type`` (exactly that type), where the type keeps the sequence
    it was made with as it is, behind a C-level attribute or a slot
    (dnaio's SequenceRecord); else None. Probed once per type, on records
    made for the purpose (``record_type(name, sequence, qualities)``)."""
    if record_type not in _RECORD_SLOTS:
        _RECORD_SLOTS[record_type] = _probe_record(record_type)
    return _RECORD_SLOTS[record_type]


def _probe_record(record_type: type) -> int | None:
    descriptor = next((vars(klass)["sequence"] for klass in record_type.__mro__ if "sequence" in vars(klass)), None)
    if type(descriptor).__name__ not in ("getset_descriptor", "member_descriptor") or layout() is None:
        return None  # a property could compute anything
    offsets = set()
    for length in (301, 1003):
        sequence = "".join(["AC"] * length)
        try:
            record = record_type("".join(["n"] * 7), sequence, "".join(["I"] * (2 * length)))
        except Exception:  # made some other way
            return None
        if getattr(record, "sequence", None) is not sequence:
            return None
        offsets.add(tuple(_word_offsets(record, id(sequence), limit=256)))
    found = offsets.pop()
    return found[0] if not offsets and len(found) == 1 else None


def _pointer_to(item):
    """An intrinsic making an int64 address a pointer to ``item`` values."""

    @intrinsic
    def at(typingctx, address):
        signature = types.CPointer(item)(types.int64)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

        return signature, codegen

    return at


_bytes_at = _pointer_to(types.uint8)
_words_at = _pointer_to(types.int64)


@njit(inline="always")
def _word_at(address):
    return carray(_words_at(address), 1)[0]


# Layout fields as the kernels take them, in one int64 array
(_TYPE, _LIST_SIZE, _LIST_ITEMS, _STR_TYPE, _STR_LENGTH, _STR_STATE, _STR_DATA, _BYTES_TYPE, _BYTES_LENGTH, _BYTES_DATA,
 _RECORD_TYPE, _RECORD_SLOT) = range(12)


@njit(inline="always")
def _text_of(p, fields):
    """(address, length) of the text of the object at address p, length -1
    where it is none of the objects read here."""
    kind = _word_at(p + fields[_TYPE])
    if kind == fields[_RECORD_TYPE]:
        p = _word_at(p + fields[_RECORD_SLOT])
        if p == 0:
            return 0, -1
        kind = _word_at(p + fields[_TYPE])
    if kind == fields[_STR_TYPE] and carray(_bytes_at(p + fields[_STR_STATE]), 1)[0] & _STATE_MASK == _STATE_COMPACT_ASCII:
        return p + fields[_STR_DATA], _word_at(p + fields[_STR_LENGTH])
    if kind == fields[_BYTES_TYPE]:
        return p + fields[_BYTES_DATA], _word_at(p + fields[_BYTES_LENGTH])
    return 0, -1


# Neither kernel is nogil: the GIL that the calling thread holds keeps every
# object alive and unchanged during a call. Between the two calls another
# thread may run: the copy reads every object afresh from the list and
# checks it against what the first call found.

#: items per piece of the list: the kernels run over whole pieces, so that
#: each piece's offsets are summed where its lengths are (a serial pass over
#: every length, 0.2 ms for 400k on one 2-core Zen 5 core, ran between
#: kernels that take 1-2 ms on the 16-core host's threads)
PIECE = 1024


@njit(parallel=True, cache=True)
def _locate(a_list, fields, lengths, sums):
    """Each item's text length (lengths) and the sum of each piece of PIECE
    items' (sums). Returns -1, or the index of the first item not read here."""
    n = lengths.shape[0]
    if _word_at(a_list + fields[_LIST_SIZE]) != n:
        return 0
    pointers = carray(_words_at(_word_at(a_list + fields[_LIST_ITEMS])), n)
    first_unread = np.full(sums.shape[0], n, np.int64)
    for p in prange(sums.shape[0]):
        total = 0
        for i in range(p * PIECE, min(n, (p + 1) * PIECE)):
            length = _text_of(pointers[i], fields)[1]
            lengths[i] = length
            if length < 0:
                first_unread[p] = min(first_unread[p], i)
            else:
                total += length
        sums[p] = total
    unread = n
    for p in range(sums.shape[0]):
        unread = min(unread, first_unread[p])
    return -1 if unread == n else unread


@njit(parallel=True, cache=True)
def _copy(a_list, fields, lengths, piece_start, offsets, data):
    """data[offsets[i]:offsets[i + 1]] = item i's text, offsets from the
    lengths, piece p's from piece_start[p]; False where the list or an item
    no longer matches ``lengths`` (nothing is then to be used)."""
    n = lengths.shape[0]
    if _word_at(a_list + fields[_LIST_SIZE]) != n:
        return False
    pointers = carray(_words_at(_word_at(a_list + fields[_LIST_ITEMS])), n)
    changed = 0
    for p in prange(piece_start.shape[0]):
        at = piece_start[p]
        for i in range(p * PIECE, min(n, (p + 1) * PIECE)):
            offsets[i] = at
            address, length = _text_of(pointers[i], fields)
            if length != lengths[i]:
                changed += 1
            else:
                source = carray(_bytes_at(address), length)
                target = data[at:at + length]
                for k in range(length):
                    target[k] = source[k]
            at += lengths[i]
    offsets[n] = data.shape[0]
    return changed == 0


#: the buffers the text is copied into, used again from call to call: fresh
#: memory is faulted in page by page on every call, by all the copying
#: threads at once (400k reads x 150 bp, 2-core Zen 5: 12.4 ms on one thread
#: and 8.0 on two with a fresh buffer, 6.8 and 4.8 reused). Two wait here (a
#: caller may hold one call's result, which keeps its buffer, while making
#: the next), none above 512 MB
_TEXT_BUFFERS = BufferPool(keep=2, largest=512 << 20)
#: and those of the lengths and offsets (3.2 MB each for 400k reads), likewise
_INDEX_BUFFERS = BufferPool(keep=4, largest=512 << 20)


def gather(items) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(data, offsets, lengths): the text of every item of ``items`` (exact
    ``str`` of ASCII text, ``bytes``, or records of the first item's type
    with such a sequence, :func:`record_slot`) back to back in one uint8
    array, item i at ``data[offsets[i]:offsets[i + 1]]``, copied on numba's
    threads. None when ``items`` is not a list, an item is anything else,
    another thread changed the list meanwhile, or this interpreter's objects
    are not laid out as probed."""
    fields = _fields(items)
    if fields is None:
        return None
    n = len(items)
    lengths = _INDEX_BUFFERS.take(8 * n).view(np.int64)
    sums = np.empty(-(-n // PIECE), np.int64)
    if _locate(id(items), fields, lengths, sums) >= 0:
        return None
    piece_start = np.zeros(len(sums), np.int64)
    np.cumsum(sums[:-1], out=piece_start[1:])
    # not numba's own allocation: it took 19 ms instead of 3 to fault in
    # 60 MB (no huge pages), and a pool's buffer is faulted in once
    data = _TEXT_BUFFERS.take(int(sums.sum()))
    offsets = _INDEX_BUFFERS.take(8 * (n + 1)).view(np.int64)
    if not _copy(id(items), fields, lengths, piece_start, offsets, data):
        return None
    return data, offsets, lengths


def _fields(items) -> np.ndarray | None:
    """The layout fields the kernels take for ``items`` (records: of the
    first item's type), or None where they cannot read it."""
    found = layout()
    if found is None or type(items) is not list:
        return None
    record_type, slot = 0, 0
    if items and type(items[0]) not in (str, bytes):
        found_slot = record_slot(type(items[0]))
        if found_slot is None or _word(id(items[0]) + found_slot) != id(getattr(items[0], "sequence", None)):
            return None
        record_type, slot = id(type(items[0])), found_slot
    return np.array([found.type_offset, found.list_size, found.list_items, found.str_type, found.str_length,
                     found.str_state, found.str_data, found.bytes_type, found.bytes_length, found.bytes_data,
                     record_type, slot], np.int64)
