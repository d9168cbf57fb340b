"""Explicit vectors for the CPU kernels (numba intrinsics): 64-bit words for
the bit-sliced screen, 32-bit lanes for the traceback.

LLVM's loop vectoriser turns the word loop of the generated kernel into
vector code by itself, but it picks the vector width and the order of the
work: on Skylake-SP it picks 256-bit vectors (the target prefers them) and
splits a 3-input function into two or more instructions; on AVX2 (16
registers) it interleaves the 4 vectors of a 16-word superblock and spills.
The kernel shapes with ``vector`` set (``bpbc.cpu_engine``) write the cell
with these instead, one vector per signal:

* :data:`u64x8` (one zmm register) and :data:`u64x4` (one ymm register):
  numba types held as LLVM ``<8 x i64>`` / ``<4 x i64>``; ``&``, ``|``,
  ``^``, ``~`` (and ``&=``, ``|=``, ``^=``) work on them lane by lane, so
  ``~a & b`` is one vpandn;
* :func:`vload8` / :func:`vload4` (:func:`vload` is ``vload8``):
  ``vload4(array, index)`` is the words array[index:index + 4] of a
  contiguous uint64 array (unaligned); :func:`vstore` stores a vector of
  either width; :func:`vzero4` / :func:`vzero8` are all-zero vectors;
* :func:`lut3`: ``lut3(table, a, b, c)`` on u64x8, the 3-input function
  ``table`` (bit 4a + 2b + c, as LOP3 and vpternlogq number them; a
  compile-time constant) as one ``llvm.x86.avx512.pternlog.q.512``: exactly
  one vpternlogq. Only for targets with AVX-512F (``CpuTarget.isa ==
  'avx512'``): elsewhere the intrinsic does not exist.

:func:`take_next` hands a kernel's tasks out to the threads that run it,
one at a time (an atomic count); :func:`store_release` and
:func:`load_acquire` let one thread wait on another's progress, and
:func:`yield_thread` gives the core away while it waits.

:data:`i32x16` (16 int32 lanes, one zmm or two ymm registers) is the
traceback's: ``+``, ``-``, ``&``, ``|`` lane by lane, ``>``, ``>=``, ``!=``
giving a lane mask, :func:`vmax16`, :func:`vselect16`, :func:`vsplat16`,
and :func:`vload16` / :func:`vstore16` on int32 arrays (or uint8 arrays,
widened on load and cut to the low byte on store); :func:`vany` says
whether any lane of a mask is set, and :func:`vshift` moves the lanes one
up.

The vector types and their operators are plain LLVM vector IR: LLVM
lowers them on any target (two 128-bit halves on NEON, for instance).
"""

from __future__ import annotations

import operator

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.imputils import lower_builtin
from numba.core.typing.templates import AbstractTemplate, infer_global, signature
from numba.extending import intrinsic, models, register_model

#: 64-bit words per AVX-512 vector (the 'lut3' shape)
LANES = 8

#: the version of these intrinsics, in every generated source (numba's cache
#: of a kernel is keyed by the kernel's file, not by this module)
VERSION = 5


class LaneVector(types.Type):
    """A numba type held in one LLVM vector of ``lanes`` integers of ``bits`` bits."""

    def __init__(self, name: str, bits: int, lanes: int):
        self.bits = bits
        self.lanes = lanes
        super().__init__(name=name)

    @property
    def ir_type(self) -> ir.VectorType:
        return ir.VectorType(ir.IntType(self.bits), self.lanes)


@register_model(LaneVector)
class _LaneVectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, fe_type.ir_type)


u64x8 = LaneVector("u64x8", 64, 8)
u64x4 = LaneVector("u64x4", 64, 4)
_WORD_VECTORS = (u64x8, u64x4)


def _pointer(context, builder, array_type, array, index, vector):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [index]), vector.ir_type.as_pointer())


def _contiguous_words(array) -> bool:
    return isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C" \
        and array.dtype == types.uint64


def _loader(vector: LaneVector):
    @intrinsic
    def load(typingctx, array, index):
        if not _contiguous_words(array) or not isinstance(index, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            index = context.cast(builder, args[1], signature.args[1], types.intp)
            return builder.load(_pointer(context, builder, signature.args[0], args[0], index, vector), align=8)

        return vector(array, index), codegen

    load.__doc__ = f"The {vector.lanes} words array[index:index + {vector.lanes}] (array: 1-d contiguous uint64)."
    return load


def _zero(vector: LaneVector):
    @intrinsic
    def zero(typingctx):
        def codegen(context, builder, signature, args):
            return ir.Constant(vector.ir_type, None)

        return vector(), codegen

    zero.__doc__ = f"{vector.lanes} zero words."
    return zero


vload8 = vload = _loader(u64x8)
vload4 = _loader(u64x4)
vzero8 = _zero(u64x8)
vzero4 = _zero(u64x4)


@intrinsic
def vstore(typingctx, array, index, value):
    """array[index:index + lanes] = value."""
    if not _contiguous_words(array) or not isinstance(index, types.Integer) or value not in _WORD_VECTORS:
        return None

    def codegen(context, builder, signature, args):
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        pointer = _pointer(context, builder, signature.args[0], args[0], index, signature.args[2])
        builder.store(args[2], pointer, align=8)
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


# The operators are typed and lowered straight to one LLVM instruction (no
# @overload: that compiles and inlines a function per operator, and a cell
# has hundreds of them: 35-45 % more compile time per kernel, measured)
_GATES = {operator.and_: "and_", operator.iand: "and_", operator.or_: "or_", operator.ior: "or_",
          operator.xor: "xor", operator.ixor: "xor"}


class _VectorGate(AbstractTemplate):
    def generic(self, args, kws):
        if not kws and len(args) == 2 and args[0] in _WORD_VECTORS and args[0] == args[1]:
            return signature(args[0], *args)
        if not kws and self.key is operator.invert and len(args) == 1 and args[0] in _WORD_VECTORS:
            return signature(args[0], *args)
        return None


def _lower_gate(method):
    def lower(context, builder, sig, args):
        return getattr(builder, method)(*args)

    return lower


for _op, _method in _GATES.items():
    infer_global(_op)(type(f"_Vector_{_op.__name__}", (_VectorGate,), {"key": _op}))
    lower_builtin(_op, LaneVector, LaneVector)(_lower_gate(_method))
infer_global(operator.invert)(type("_Vector_invert", (_VectorGate,), {"key": operator.invert}))
lower_builtin(operator.invert, LaneVector)(_lower_gate("not_"))


@intrinsic(prefer_literal=True)
def lut3(typingctx, table, a, b, c):
    """The 3-input function ``table`` (an integer literal, 0..255) of a, b, c."""
    if not isinstance(table, types.IntegerLiteral) or not 0 <= table.literal_value <= 255 \
            or (a, b, c) != (u64x8, u64x8, u64x8):
        return None
    value = table.literal_value

    def codegen(context, builder, signature, args):
        vector = u64x8.ir_type
        fnty = ir.FunctionType(vector, [vector, vector, vector, ir.IntType(32)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.avx512.pternlog.q.512")
        return builder.call(fn, [args[1], args[2], args[3], ir.Constant(ir.IntType(32), value)])

    return u64x8(table, a, b, c), codegen


# ---------------------------------------------------------------------------
# 32-bit lanes for the traceback's forward pass (bpbc.traceback): 16 reads
# at once, the values carried along a row held in registers. LLVM's loop
# vectoriser vectorises a loop over the lanes, but then every value carried
# from column j to j + 1 goes through memory, and the run is bound by that
# store-to-load chain (0.5-0.85 GCUPS measured on a Skylake-SP core).

i32x16 = LaneVector("i32x16", 32, 16)
mask16 = LaneVector("mask16", 1, 16)  #: what comparing two i32x16 gives

# '&' and '|' are lowered above, for every LaneVector
_LANE_ARITHMETIC = {operator.add: "add", operator.sub: "sub", operator.and_: None, operator.or_: None}
_LANE_COMPARISONS = {operator.gt: ">", operator.ge: ">=", operator.ne: "!="}


def _lower_compare(predicate):
    def lower(context, builder, sig, args):
        return builder.icmp_signed(predicate, *args)

    return lower


for _op, _lowering in _LANE_ARITHMETIC.items():
    if _lowering is not None:
        lower_builtin(_op, LaneVector, LaneVector)(_lower_gate(_lowering))
for _op, _predicate in _LANE_COMPARISONS.items():
    lower_builtin(_op, LaneVector, LaneVector)(_lower_compare(_predicate))


def _lane_integers(vector: LaneVector, mask: LaneVector, lane: types.Integer):
    """The operators and functions (splat, max, select, load, store) of
    integer lanes ``vector`` (each a ``lane``), whose comparisons give
    ``mask``: one definition for both widths. Loads and stores take 1-d
    contiguous arrays of ``lane`` or of uint8 (widened on load, cut to the
    low byte on store)."""
    bits, lanes = vector.bits, vector.lanes

    class Binary(AbstractTemplate):
        def generic(self, args, kws):
            if not kws and tuple(args) == (vector, vector):
                return signature(mask if self.key in _LANE_COMPARISONS else vector, *args)
            return None

    for op in (*_LANE_ARITHMETIC, *_LANE_COMPARISONS):
        infer_global(op)(type(f"_{vector.name}_{op.__name__}", (Binary,), {"key": op}))

    @intrinsic
    def vsplat(typingctx, value):
        if not isinstance(value, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            scalar = context.cast(builder, args[0], signature.args[0], lane)
            splat = builder.insert_element(ir.Constant(vector.ir_type, None), scalar, ir.Constant(ir.IntType(32), 0))
            return builder.shuffle_vector(splat, splat, ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))

        return vector(value), codegen

    @intrinsic
    def vmax(typingctx, a, b):
        if (a, b) != (vector, vector):
            return None

        def codegen(context, builder, signature, args):
            return builder.select(builder.icmp_signed(">", args[0], args[1]), args[0], args[1])

        return vector(a, b), codegen

    @intrinsic
    def vselect(typingctx, mask_, a, b):
        if (mask_, a, b) != (mask, vector, vector):
            return None

        def codegen(context, builder, signature, args):
            return builder.select(*args)

        return vector(mask_, a, b), codegen

    def takes(array) -> bool:
        return isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C" \
            and array.dtype in (lane, types.uint8)

    def lanes_at(context, builder, signature, args):
        """(pointer to array[index:index + lanes], their bits: the lane's or 8)."""
        array_type, index_type = signature.args[0], signature.args[1]
        width = bits if array_type.dtype == lane else 8
        index = context.cast(builder, args[1], index_type, types.intp)
        data = context.make_array(array_type)(context, builder, args[0]).data
        return builder.bitcast(builder.gep(data, [index]), ir.VectorType(ir.IntType(width), lanes).as_pointer()), width

    @intrinsic
    def vload(typingctx, array, index):
        if not takes(array) or not isinstance(index, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            pointer, width = lanes_at(context, builder, signature, args)
            value = builder.load(pointer, align=width // 8)
            return value if width == bits else builder.zext(value, vector.ir_type)

        return vector(array, index), codegen

    @intrinsic
    def vstore(typingctx, array, index, value):
        if not takes(array) or not isinstance(index, types.Integer) or value != vector:
            return None

        def codegen(context, builder, signature, args):
            pointer, width = lanes_at(context, builder, signature, args)
            values = args[2] if width == bits else builder.trunc(args[2], ir.VectorType(ir.IntType(8), lanes))
            builder.store(values, pointer, align=width // 8)
            return context.get_dummy_value()

        return types.void(array, index, value), codegen

    return vsplat, vmax, vselect, vload, vstore


#: 16 int32 lanes: ``vsplat16(x)`` (x as int32), ``vmax16(a, b)`` (signed),
#: ``vselect16(mask, a, b)`` (a where mask), ``vload16(array, i)`` and
#: ``vstore16(array, i, v)`` (array[i:i + 16], int32 or uint8 arrays)
vsplat16, vmax16, vselect16, vload16, vstore16 = _lane_integers(i32x16, mask16, types.int32)


# ---------------------------------------------------------------------------
# 16-bit lanes for the traceback's forward pass where its values fit
# (bpbc.traceback): 32 reads at once, twice the lanes of i32x16 for the same
# instructions. The same operators (``+``, ``-``, ``&``, ``|``, ``>``,
# ``>=``, ``!=``) and functions, suffixed 32 for their 32 lanes (int16 or
# uint8 arrays).

i16x32 = LaneVector("i16x32", 16, 32)
mask32 = LaneVector("mask32", 1, 32)  #: what comparing two i16x32 gives
vsplat32, vmax32, vselect32, vload32, vstore32 = _lane_integers(i16x32, mask32, types.int16)


# ---------------------------------------------------------------------------
# 8-bit lanes for the traceback's forward pass where its scores fit in int8
# (short patterns: bpbc.traceback._fits_int8): 64 reads at once, twice the
# lanes of i16x32 for the same instructions (AVX-512BW). The same operators
# and functions, suffixed 64 for their 64 lanes (int8 or uint8 arrays).

i8x64 = LaneVector("i8x64", 8, 64)
mask64 = LaneVector("mask64", 1, 64)  #: what comparing two i8x64 gives
vsplat64, vmax64, vselect64, vload64, vstore64 = _lane_integers(i8x64, mask64, types.int8)


@intrinsic
def vshift(typingctx, vector, value):
    """The lanes of ``vector`` (i32x16 or i16x32) one lane up, ``value`` in
    lane 0: lane q of the result is lane q - 1 of ``vector`` (one valignd or
    vpermw on AVX-512). The score pass over one long instance
    (bpbc.traceback) holds a stripe of rows a lane, each a column behind the
    lane before, and hands each lane's last row down this way."""
    if vector not in (i32x16, i16x32) or not isinstance(value, types.Integer):
        return None
    lanes = vector.lanes

    def codegen(context, builder, signature, args):
        lane = types.int32 if vector is i32x16 else types.int16
        scalar = context.cast(builder, args[1], signature.args[1], lane)
        first = builder.insert_element(ir.Constant(vector.ir_type, None), scalar, ir.Constant(ir.IntType(32), 0))
        order = [0] + list(range(lanes, 2 * lanes - 1))
        return builder.shuffle_vector(first, args[0], ir.Constant(ir.VectorType(ir.IntType(32), lanes), order))

    return vector(vector, value), codegen


@intrinsic
def vbits64(typingctx, mask):
    """The 64 lanes of ``mask`` (what comparing two i8x64 gives) as the bits
    of one uint64, lane q in bit q (one kmovq on AVX-512)."""
    if mask != mask64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.uint64(mask), codegen


@intrinsic
def lowest_bit(typingctx, word):
    """The index of the lowest set bit of the uint64 ``word`` (not 0): one tzcnt."""
    if word != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        cttz = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64, ir.IntType(1)]),
                                              "llvm.cttz.i64")
        return builder.call(cttz, [args[0], ir.Constant(ir.IntType(1), 0)])

    return types.int64(word), codegen


@intrinsic
def vany(typingctx, mask):
    """Whether any lane of ``mask`` (what comparing two i32x16, two i16x32
    or two i8x64 gives) is set: the mask's bits as one integer, compared
    with 0 (one kortest on AVX-512)."""
    if mask not in (mask16, mask32, mask64):
        return None

    def codegen(context, builder, signature, args):
        bits = builder.bitcast(args[0], ir.IntType(signature.args[0].lanes))
        return builder.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(signature.args[0].lanes), 0))

    return types.boolean(mask), codegen


# ---------------------------------------------------------------------------
# Read bases as bit masks, 64 bytes at a time, for packing reads into bit
# planes (bpbc.cpu_engine): one vector compare per letter, its lanes' bits
# one 64-bit mask (AVX-512BW: vpcmpeqb into a mask register; AVX2 and NEON:
# LLVM's own sequence), where taking the bytes one by one through a table
# cost 8-10 instructions a byte. numba's cache of a kernel that uses it is
# keyed by the kernel's own file: a change here needs a change there too.

_BYTES64 = ir.VectorType(ir.IntType(8), 64)


@intrinsic
def base_masks64(typingctx, data, index):
    """(low, high, acgt) of the 64 bytes data[index:index + 64] (data: 1-d
    contiguous uint8, index + 64 within it): bit q of ``acgt`` is set where
    byte q is A, C, G, T or U in either case, of ``low`` where it is C or
    T (U), of ``high`` where it is G or T (U): the bits of the read codes
    0-3 that bpbc.alphabet.READ_CODE gives those letters, and of their
    being below 4. Every other byte has no bit set in any of the three."""
    if not (isinstance(data, types.Array) and data.ndim == 1 and data.layout == "C" and data.dtype == types.uint8) \
            or not isinstance(index, types.Integer):
        return None
    masks = types.UniTuple(types.uint64, 3)

    def codegen(context, builder, signature, args):
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        start = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = builder.bitcast(builder.gep(start, [index]), _BYTES64.as_pointer())
        folded = builder.or_(builder.load(pointer, align=1), ir.Constant(_BYTES64, [0x20] * 64))  # lower case

        def equal(letter: str):
            return builder.icmp_unsigned("==", folded, ir.Constant(_BYTES64, [ord(letter)] * 64))

        def mask(lanes):
            return builder.bitcast(lanes, ir.IntType(64))

        a, c, g, t = equal("a"), equal("c"), equal("g"), builder.or_(equal("t"), equal("u"))
        values = [mask(builder.or_(c, t)), mask(builder.or_(g, t)), mask(builder.or_(builder.or_(a, c), builder.or_(g, t)))]
        return context.make_tuple(builder, masks, values)

    return masks(data, index), codegen


@intrinsic
def take_next(typingctx, counter):
    """counter[0] += 1 as one atomic step, giving the value before (counter:
    a 1-d contiguous int64 array): threads that share ``counter`` each get
    a number of their own, 0, 1, 2, ..., with no lock and no GIL."""
    if not (isinstance(counter, types.Array) and counter.ndim == 1 and counter.layout == "C"
            and counter.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        start = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("add", start, ir.Constant(ir.IntType(64), 1), "monotonic")

    return types.int64(counter), codegen


def _int64_slot(context, builder, array_type, array, index, index_type):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [context.cast(builder, index, index_type, types.intp)])


def _int64_array(array) -> bool:
    return isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C" and array.dtype == types.int64


@intrinsic
def load_acquire(typingctx, array, index):
    """array[index] read as one atomic load with acquire order (array: 1-d
    contiguous int64): what the thread that stored it with
    :func:`store_release` wrote before is seen after it, and the load is
    made again on every call (a loop waiting on it sees it change)."""
    if not _int64_array(array) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        slot = _int64_slot(context, builder, signature.args[0], args[0], args[1], signature.args[1])
        return builder.load_atomic(slot, "acquire", 8)

    return types.int64(array, index), codegen


@intrinsic
def store_release(typingctx, array, index, value):
    """array[index] = value as one atomic store with release order (see
    :func:`load_acquire`)."""
    if not _int64_array(array) or not isinstance(index, types.Integer) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        slot = _int64_slot(context, builder, signature.args[0], args[0], args[1], signature.args[1])
        builder.store_atomic(context.cast(builder, args[2], signature.args[2], types.int64), slot, "release", 8)
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


def _fetch_and(operation: str, doc: str):
    """An intrinsic (array, index, value): array[index] = ``operation``
    (array[index], value) as one atomic step with acquire-release order,
    giving the value before (array: 1-d contiguous int64)."""
    @intrinsic
    def fetch(typingctx, array, index, value):
        if not _int64_array(array) or not isinstance(index, types.Integer) or not isinstance(value, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            slot = _int64_slot(context, builder, signature.args[0], args[0], args[1], signature.args[1])
            return builder.atomic_rmw(operation, slot, context.cast(builder, args[2], signature.args[2], types.int64),
                                      "acq_rel")

        return types.int64(array, index, value), codegen

    fetch.__doc__ = doc
    return fetch


fetch_add = _fetch_and("add", "array[index] += value as one atomic step, giving the value before.")
fetch_max = _fetch_and("max", "array[index] = max(array[index], value) (signed) as one atomic step.")


@intrinsic
def yield_thread(typingctx):
    """sched_yield(): a thread waiting on another lets it run where the
    cores are shared (more threads than cores: the screen's and the
    traceback's at once)."""
    def codegen(context, builder, signature, args):
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(function, [])
        return context.get_dummy_value()

    return types.void(), codegen
