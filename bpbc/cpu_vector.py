"""Explicit AVX-512 vectors for the CPU kernel's LUT3 cells (numba intrinsics).

LLVM's loop vectoriser turns the word loop of the generated kernel into
vector code by itself, but on Skylake-SP it picks 256-bit vectors (the
target prefers them) and it splits a 3-input function into two or more
instructions. The 'lut3' kernel shape (``bpbc.cpu_engine``) writes the cell
with these instead:

* :data:`u64x8`: a numba type held as LLVM ``<8 x i64>``, one zmm register;
* :func:`vload` / :func:`vstore`: 8 words of a contiguous uint64 array at a
  word offset (unaligned);
* :func:`lut3`: ``lut3(table, a, b, c)``, the 3-input function ``table`` (bit
  4a + 2b + c, as LOP3 and vpternlogq number them; a compile-time constant)
  as one ``llvm.x86.avx512.pternlog.q.512``: exactly one vpternlogq.

Only for targets with AVX-512F (``CpuTarget.isa == 'avx512'``): elsewhere
the intrinsic does not exist and the kernel shapes use 2-input gates.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

#: 64-bit words per vector
LANES = 8
_VECTOR = ir.VectorType(ir.IntType(64), LANES)

#: the version of these intrinsics, in every generated source (numba's cache
#: of a kernel is keyed by the kernel's file, not by this module)
VERSION = 1


class U64x8(types.Type):
    def __init__(self):
        super().__init__(name="u64x8")


u64x8 = U64x8()


@register_model(U64x8)
class _U64x8Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VECTOR)


def _pointer(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [index]), _VECTOR.as_pointer())


def _contiguous_words(array) -> bool:
    return isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C" \
        and array.dtype == types.uint64


@intrinsic
def vload(typingctx, array, index):
    """The 8 words array[index:index + 8] (array: 1-d contiguous uint64)."""
    if not _contiguous_words(array) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        return builder.load(_pointer(context, builder, signature.args[0], args[0], index), align=8)

    return u64x8(array, index), codegen


@intrinsic
def vstore(typingctx, array, index, value):
    """array[index:index + 8] = value."""
    if not _contiguous_words(array) or not isinstance(index, types.Integer) or value != u64x8:
        return None

    def codegen(context, builder, signature, args):
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        builder.store(args[2], _pointer(context, builder, signature.args[0], args[0], index), align=8)
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


@intrinsic(prefer_literal=True)
def lut3(typingctx, table, a, b, c):
    """The 3-input function ``table`` (an integer literal, 0..255) of a, b, c."""
    if not isinstance(table, types.IntegerLiteral) or not 0 <= table.literal_value <= 255 \
            or (a, b, c) != (u64x8, u64x8, u64x8):
        return None
    value = table.literal_value

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_VECTOR, [_VECTOR, _VECTOR, _VECTOR, ir.IntType(32)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.avx512.pternlog.q.512")
        return builder.call(fn, [args[1], args[2], args[3], ir.Constant(ir.IntType(32), value)])

    return u64x8(table, a, b, c), codegen
