"""The register-blocked micro-kernel of the tiled CPU matmul: an MR×NR block of C held in vector registers.

The GotoBLAS/BLIS shape: C's MR×NR micro-tile (MR rows of two vectors: 6×16 float32 on AVX2, twelve 8-lane
vectors, 15 of its 16 ymm registers with the two vectors of B and the broadcast of A; 8×32 on AVX-512, in zmm
registers, twice the multiply-adds per instruction) is loaded once, updated by KC rank-1 steps
c[i, :] += a[i] · b[:] read from packed panels (A's MR×KC panel MR values per step, B's KC×NR panel NR values
per step, both contiguous), and stored once. Written as scalars in Numba, that loop stays scalar: Numba runs
LLVM without its SLP vectoriser, and an accumulator kept in an array is reloaded every step because LLVM cannot
prove the packed panels do not alias it. So the loop is emitted here as LLVM IR, the accumulators as vector
phi nodes. The update is `llvm.fmuladd`, the very operation a `contract` multiply-add lowers to: one FMA where
the host has it, as in the scalar kernels, so the K sum rounds in the same order and the same way as the
unblocked loop's `acc += a·b`.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from backends.numba.on_cpu.vector_width import check_width

ROWS = {8: 6, 16: 8}
"""MR, the rows of the micro-tile (A values broadcast per step), per vector width: with 8 lanes, 2·6
accumulators fill the 16 ymm registers with B's two vectors and A's broadcast; with 16 lanes, 2·8 of the 32 zmm
registers measured faster at 1024³ than 6 (fewer rows per B load) and than 10 or 12."""

F32 = ir.FloatType()
I64 = ir.IntType(64)


def _splat(builder: ir.IRBuilder, value: ir.Value, lanes: int) -> ir.Value:
    """The scalar in every lane (one vbroadcastss from memory)."""
    undef, i32 = ir.Constant(ir.VectorType(F32, lanes), ir.Undefined), ir.IntType(32)
    one = builder.insert_element(undef, value, ir.Constant(i32, 0))
    return builder.shuffle_vector(one, undef, ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))


def _emit(context: Any, builder: ir.IRBuilder, sig: Any, args: tuple, lanes: int) -> ir.Value:
    mr, nr, vec = ROWS[lanes], 2 * lanes, ir.VectorType(F32, lanes)
    ap, a_off, bp, b_off, kc, acc, c_off, ldc = args
    data = [context.make_array(sig.args[n])(context, builder, v).data for n, v in ((0, ap), (2, bp), (5, acc))]
    pa, pb, pc = (builder.gep(d, [off]) for d, off in zip(data, (a_off, b_off, c_off), strict=True))
    fmuladd = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vec, [vec] * 3), f"llvm.fmuladd.v{lanes}f32"
    )
    vptr = vec.as_pointer()

    def at(base: ir.Value, offset: ir.Value) -> ir.Value:
        return builder.bitcast(builder.gep(base, [offset]), vptr)

    def c_at(i: int, v: int) -> ir.Value:
        return at(pc, builder.add(builder.mul(ldc, ir.Constant(I64, i)), ir.Constant(I64, v * lanes)))

    tile = [(i, v) for i in range(mr) for v in range(nr // lanes)]
    start = {iv: builder.load(c_at(*iv), align=4) for iv in tile}
    entry = builder.block
    loop, done = builder.append_basic_block("micro.loop"), builder.append_basic_block("micro.done")
    builder.branch(loop)
    builder.position_at_end(loop)
    p = builder.phi(I64)
    c = {iv: builder.phi(vec) for iv in tile}
    b_row = builder.gep(pb, [builder.mul(p, ir.Constant(I64, nr))])
    a_row = builder.gep(pa, [builder.mul(p, ir.Constant(I64, mr))])
    b = [builder.load(at(b_row, ir.Constant(I64, v * lanes)), align=4) for v in range(nr // lanes)]
    a = [_splat(builder, builder.load(builder.gep(a_row, [ir.Constant(I64, i)])), lanes) for i in range(mr)]
    new = {(i, v): builder.call(fmuladd, [a[i], b[v], c[i, v]]) for i, v in tile}
    p_next = builder.add(p, ir.Constant(I64, 1))
    p.add_incoming(ir.Constant(I64, 0), entry)
    p.add_incoming(p_next, loop)
    for iv in tile:
        c[iv].add_incoming(start[iv], entry)
        c[iv].add_incoming(new[iv], loop)
    builder.cbranch(builder.icmp_signed("<", p_next, kc), loop, done)
    builder.position_at_end(done)
    for iv in tile:
        builder.store(new[iv], c_at(*iv), align=4)
    return context.get_dummy_value()


@functools.cache
def micro(lanes: int) -> SimpleNamespace:
    """The micro-kernel on vectors of `lanes` float32: `tile` (the intrinsic), and its MR×NR (NR two vectors)."""
    check_width(lanes, "matmul")

    @intrinsic
    def micro_tile(
        typingctx: Any, ap: Any, a_off: Any, bp: Any, b_off: Any, kc: Any, acc: Any, c_off: Any, ldc: Any
    ) -> Any:
        """acc[c_off + i·ldc + j] += Σ_p ap[a_off + p·MR + i] · bp[b_off + p·NR + j], p = 0..kc−1 in order, for
        the MR×NR micro-tile (i < MR, j < NR). All three are flat C-contiguous float32 arrays; kc ≥ 1, and every
        offset in bounds: nothing is checked inside, this is the hot loop."""
        flat = types.Array(types.float32, 1, "C")
        ints = all(isinstance(x, types.Integer) for x in (a_off, b_off, kc, c_off, ldc))
        if ints and (ap, bp, acc) == (flat, flat, flat):
            sig = types.void(ap, types.intp, bp, types.intp, types.intp, acc, types.intp, types.intp)
            return sig, functools.partial(_emit, lanes=lanes)
        return None

    return SimpleNamespace(lanes=lanes, mr=ROWS[lanes], nr=2 * lanes, tile=micro_tile)
