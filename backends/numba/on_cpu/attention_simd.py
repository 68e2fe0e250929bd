"""Eight-lane float32 vectors for the attention micro-kernels: a Numba type held in an LLVM <8 x float>.

LLVM's loop vectoriser vectorises only an innermost loop, and a tile product whose innermost loop runs along
its reduction axis is a reduction it may not reorder without fast-math reassociation. The micro-kernels of
`attention_tiles` keep a block of output rows × 16 columns in registers instead, summed in the reduction's own
order: these intrinsics let them say so. Each is a few LLVM instructions (an unaligned load or store, a splat,
`llvm.fma`), so that with AVX2 one vector is one ymm register and every update one vfmadd. Arrays are
2-D float32, indexed (row, column) without bounds checks: the callers pad their scratch tiles to whole vectors.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

LANES = 8
"""float32 lanes per vector: one AVX2 ymm register."""
_VEC = ir.VectorType(ir.FloatType(), LANES)


class F32x8(types.Type):
    """Eight float32 in one SIMD register; lives only inside compiled code."""

    def __init__(self) -> None:
        super().__init__(name="f32x8")


f32x8 = F32x8()
register_model(F32x8)(lambda dmm, fe_type: models.PrimitiveModel(dmm, fe_type, _VEC))


def _is_tile(a: types.Type) -> bool:
    return isinstance(a, types.Array) and a.dtype == types.float32 and a.ndim == 2


def _address(context: Any, builder: Any, aryty: types.Array, ary: Any, i: Any, j: Any) -> Any:
    """The address of ary[i, j] as a pointer to a vector (i, j of any integer type)."""
    arr = context.make_array(aryty)(context, builder, ary)
    inds = [context.cast(builder, x, t, types.intp) for x, t in ((i[0], i[1]), (j[0], j[1]))]
    shapes, strides = cgutils.unpack_tuple(builder, arr.shape), cgutils.unpack_tuple(builder, arr.strides)
    ptr = cgutils.get_item_pointer2(context, builder, arr.data, shapes, strides, aryty.layout, inds)
    return builder.bitcast(ptr, _VEC.as_pointer())


@intrinsic
def vload(typingctx: object, a: types.Type, i: types.Type, j: types.Type) -> tuple | None:
    """a[i, j:j+8] as a vector."""
    if _is_tile(a) and isinstance(i, types.Integer) and isinstance(j, types.Integer):

        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            ptr = _address(context, builder, sig.args[0], args[0], (args[1], sig.args[1]), (args[2], sig.args[2]))
            return builder.load(ptr, align=4)

        return f32x8(a, i, j), codegen
    return None


@intrinsic
def vstore(typingctx: object, a: types.Type, i: types.Type, j: types.Type, v: types.Type) -> tuple | None:
    """a[i, j:j+8] = v."""
    if _is_tile(a) and isinstance(i, types.Integer) and isinstance(j, types.Integer) and v == f32x8:

        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            ptr = _address(context, builder, sig.args[0], args[0], (args[1], sig.args[1]), (args[2], sig.args[2]))
            builder.store(args[3], ptr, align=4)
            return context.get_dummy_value()

        return types.none(a, i, j, v), codegen
    return None


@intrinsic
def vsplat_at(typingctx: object, a: types.Type, i: types.Type, j: types.Type) -> tuple | None:
    """a[i, j] in every lane: one vbroadcastss from memory, and, unlike a[i, j] in Numba, no test for a
    negative index (whose cmov per element would cost as much as the multiply-adds it feeds)."""
    if _is_tile(a) and isinstance(i, types.Integer) and isinstance(j, types.Integer):

        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            ptr = _address(context, builder, sig.args[0], args[0], (args[1], sig.args[1]), (args[2], sig.args[2]))
            x = builder.load(builder.bitcast(ptr, ir.FloatType().as_pointer()), align=4)
            one = builder.insert_element(ir.Constant(_VEC, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
            return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES))

        return f32x8(a, i, j), codegen
    return None


@intrinsic
def vfma(typingctx: object, a: types.Type, b: types.Type, c: types.Type) -> tuple | None:
    """a·b + c in each lane, rounded once (llvm.fma: a vfmadd with FMA, exact fma in software without)."""
    if a == b == c == f32x8:

        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VEC, [_VEC] * 3), "llvm.fma.v8f32")
            return builder.call(fn, args)

        return f32x8(a, b, c), codegen
    return None


@intrinsic
def vzero(typingctx: object) -> tuple | None:
    """A vector of +0.0."""

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        return ir.Constant(_VEC, [0.0] * LANES)

    return f32x8(), codegen


@intrinsic
def vmax(typingctx: object, a: types.Type, b: types.Type) -> tuple | None:
    """b where b > a, else a, in each lane (the select of attention_kernels' scalar _max: a vmaxps)."""
    if a == b == f32x8:

        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            return builder.select(builder.fcmp_ordered(">", args[1], args[0]), args[1], args[0])

        return f32x8(a, b), codegen
    return None
