"""float32 SIMD vectors for the attention micro-kernels: a Numba type held in an LLVM <lanes x float>.

LLVM's loop vectoriser vectorises only an innermost loop, and a tile product whose innermost loop runs along
its reduction axis is a reduction it may not reorder without fast-math reassociation. The micro-kernels of
`attention_tiles` keep a block of output rows × two vectors of columns in registers instead, summed in the
reduction's own order: these intrinsics let them say so. Each is a few LLVM instructions (an unaligned load or
store, a splat, `llvm.fma`), so that one vector is one register and every update one vfmadd; the width is
one of `vector_width.WIDTHS`. Arrays are 2-D float32, indexed (row, column) without bounds checks: the
callers pad their scratch tiles to whole vectors.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

from backends.numba.on_cpu.vector_width import check_width


class F32Vector(types.Type):
    """`lanes` float32 in one SIMD register; lives only inside compiled code."""

    def __init__(self, lanes: int) -> None:
        self.lanes = lanes
        super().__init__(name=f"f32x{lanes}")


register_model(F32Vector)(lambda dmm, fe: models.PrimitiveModel(dmm, fe, ir.VectorType(ir.FloatType(), fe.lanes)))


def _is_tile(a: types.Type) -> bool:
    return isinstance(a, types.Array) and a.dtype == types.float32 and a.ndim == 2


def _indices(a: types.Type, i: types.Type, j: types.Type) -> bool:
    return _is_tile(a) and isinstance(i, types.Integer) and isinstance(j, types.Integer)


def _address(context: Any, builder: Any, sig: Any, args: Any, of: ir.Type) -> Any:
    """The address of a[i, j] (sig and args of an intrinsic taking a, i, j first) as a pointer to `of`."""
    aryty = sig.args[0]
    arr = context.make_array(aryty)(context, builder, args[0])
    inds = [context.cast(builder, args[k], sig.args[k], types.intp) for k in (1, 2)]
    shapes, strides = cgutils.unpack_tuple(builder, arr.shape), cgutils.unpack_tuple(builder, arr.strides)
    ptr = cgutils.get_item_pointer2(context, builder, arr.data, shapes, strides, aryty.layout, inds)
    return builder.bitcast(ptr, of.as_pointer())


@functools.cache
def simd(lanes: int) -> SimpleNamespace:
    """The intrinsics on vectors of `lanes` float32: vload, vstore, vsplat_at, vfma, vzero, vmax."""
    check_width(lanes, "attention")
    vec_t, vec = F32Vector(lanes), ir.VectorType(ir.FloatType(), lanes)

    @intrinsic
    def vload(typingctx: object, a: types.Type, i: types.Type, j: types.Type) -> tuple | None:
        """a[i, j:j+lanes] as a vector."""
        if _indices(a, i, j):

            def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
                return builder.load(_address(context, builder, sig, args, vec), align=4)

            return vec_t(a, i, j), codegen
        return None

    @intrinsic
    def vstore(typingctx: object, a: types.Type, i: types.Type, j: types.Type, v: types.Type) -> tuple | None:
        """a[i, j:j+lanes] = v."""
        if _indices(a, i, j) and v == vec_t:

            def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
                builder.store(args[3], _address(context, builder, sig, args, vec), align=4)
                return context.get_dummy_value()

            return types.none(a, i, j, v), codegen
        return None

    @intrinsic
    def vsplat_at(typingctx: object, a: types.Type, i: types.Type, j: types.Type) -> tuple | None:
        """a[i, j] in every lane: one vbroadcastss from memory, and, unlike a[i, j] in Numba, no test for a
        negative index (whose cmov per element would cost as much as the multiply-adds it feeds)."""
        if _indices(a, i, j):

            def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
                x = builder.load(_address(context, builder, sig, args, ir.FloatType()), align=4)
                one = builder.insert_element(ir.Constant(vec, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
                return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))

            return vec_t(a, i, j), codegen
        return None

    @intrinsic
    def vfma(typingctx: object, a: types.Type, b: types.Type, c: types.Type) -> tuple | None:
        """a·b + c in each lane, rounded once (llvm.fma: a vfmadd with FMA, exact fma in software without)."""
        if a == b == c == vec_t:

            def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(vec, [vec] * 3), f"llvm.fma.v{lanes}f32"
                )
                return builder.call(fn, args)

            return vec_t(a, b, c), codegen
        return None

    @intrinsic
    def vzero(typingctx: object) -> tuple | None:
        """A vector of +0.0."""

        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            return ir.Constant(vec, [0.0] * lanes)

        return vec_t(), codegen

    @intrinsic
    def vmax(typingctx: object, a: types.Type, b: types.Type) -> tuple | None:
        """b where b > a, else a, in each lane (the select of attention_kernels' scalar _max: a vmaxps)."""
        if a == b == vec_t:

            def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
                return builder.select(builder.fcmp_ordered(">", args[1], args[0]), args[1], args[0])

            return vec_t(a, b), codegen
        return None

    return SimpleNamespace(
        lanes=lanes, vload=vload, vstore=vstore, vsplat_at=vsplat_at, vfma=vfma, vzero=vzero, vmax=vmax
    )
