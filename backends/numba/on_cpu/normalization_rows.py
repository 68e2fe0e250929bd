"""The row bodies of Numba's fused CPU normalization kernel for rows wider than a chunk, and the chunk
statistics they are made of.

`backends.numba.on_cpu.normalization_kernels` runs one of these per row in a parallel loop when a row has more
than `tile` columns (rows of one chunk are pipelined over blocks of rows instead: `normalization_blocks`). The
row is walked chunk by chunk for its statistics — float32 chunks in place, float16 chunks converted into the
thread's float32 buffer — merged as they come (Chan's merge for layernorm, an online max for softmax), then read
once more to write the output: the ledger's re-read. The fenced reciprocals are shared with the blocks.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, register_jitable

from backends.numba.ops import (
    NEG_INF,
    ONE,
    VECTOR_CODECS,
    ZERO,
    exp_float32,
    fmax32,
)
from scenarios.normalization import EPS

EPS32 = np.float32(EPS)


@intrinsic
def fence(typingctx: object, value: types.Type) -> tuple | None:
    """value behind LLVM's `arithmetic.fence`, which fast-math rewrites do not cross (it costs no instruction).

    A row's scale is a reciprocal, 1/s, that its output loop multiplies by; under `reassoc` InstCombine sinks
    that division into the loop ((1/s)·v -> v/s), one vdivps per 8 values, several times the cost of the
    multiply: measured, it made the output loops compute-bound. The fence keeps the reciprocal a value."""
    if value == types.float32:

        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            fnty = ir.FunctionType(ir.FloatType(), [ir.FloatType()])
            return builder.call(builder.module.declare_intrinsic("llvm.arithmetic.fence", [ir.FloatType()], fnty), args)

        return types.float32(value), codegen
    return None


@register_jitable
def reciprocal_std(s: float) -> float:
    """1 / sqrt(s + eps): the reciprocal standard deviation of a variance (or mean square) s, fenced so that
    the loops multiply by it."""
    return fence(ONE / math.sqrt(s + EPS32))


@register_jitable
def reciprocal(s: float) -> float:
    """1 / s, fenced so that the loops multiply by it."""
    return fence(ONE / s)


@functools.cache
def _stage(dtype: str) -> Any:
    """chunk = stage(row, start, n, buf): x[start:start+n] as float32 values the passes over a chunk read.

    float32: the row itself — after the first pass it sits in L1/L2, and copying it into a buffer only costs
    (a measured 30% of the kernel's bandwidth). float16: converted once into the thread's buffer.
    """
    load = VECTOR_CODECS[dtype][0]
    if dtype == "float32":

        @register_jitable
        def view(row, start, n, buf):  # type: ignore[no-untyped-def]
            return row[start : start + n]

        return view

    @register_jitable
    def convert(row, start, n, buf):  # type: ignore[no-untyped-def]
        src = row[start : start + n]  # index from 0: `row[start + j]` may be negative to LLVM, and not vectorise
        for j in range(n):
            buf[j] = load(src[j])
        return buf[:n]

    return convert


@register_jitable
def _moments(chunk):  # type: ignore[no-untyped-def]
    """(mean, M2 = Σ(v − mean)²) of a float32 chunk, in two passes: no cancellation for rows far from zero."""
    total = ZERO
    for j in range(chunk.size):
        total += chunk[j]
    mean = total / np.float32(chunk.size)
    m2 = ZERO
    for j in range(chunk.size):
        d = chunk[j] - mean
        m2 += d * d
    return mean, m2


@register_jitable
def _square_sum(chunk):  # type: ignore[no-untyped-def]
    total = ZERO
    for j in range(chunk.size):
        total += chunk[j] * chunk[j]
    return total


@register_jitable
def _max(chunk):  # type: ignore[no-untyped-def]
    m = NEG_INF
    for j in range(chunk.size):
        m = fmax32(m, chunk[j])
    return m


@register_jitable
def _max_sum(chunk):  # type: ignore[no-untyped-def]
    """(m, Σ exp(v − m)) with m the chunk's max."""
    m = _max(chunk)
    total = ZERO
    for j in range(chunk.size):
        total += exp_float32(chunk[j] - m)
    return m, total


def row_function(op: str, dtype: str) -> Any:
    """The jitable body of `op`'s fused kernel for one row stored as `dtype`:
    row_fn(row, out, buf, wf, bf, tile), with weight and bias already float32 in wf and bf."""
    return {"layernorm": _layernorm_row, "rmsnorm": _rmsnorm_row, "softmax": _softmax_row}[op](dtype)


def _layernorm_row(dtype: str) -> Any:
    """One row: its moments merged chunk by chunk, then the output."""
    load, store = VECTOR_CODECS[dtype]
    stage = _stage(dtype)

    @register_jitable
    def layernorm_row(row, out, buf, wf, bf, tile):  # type: ignore[no-untyped-def]
        cols = row.size
        mean, m2, count = ZERO, ZERO, ZERO  # Chan et al.: merge each chunk's mean and M2
        for start in range(0, cols, tile):
            n = min(tile, cols - start)
            mean_c, m2_c = _moments(stage(row, start, n, buf))
            nc = np.float32(n)
            total = count + nc
            delta = mean_c - mean
            mean += delta * (nc / total)
            m2 += m2_c + delta * delta * (count * nc / total)
            count = total
        rstd = reciprocal_std(m2 / np.float32(cols))
        for j in range(cols):  # the re-read
            out[j] = store((load(row[j]) - mean) * rstd * wf[j] + bf[j])

    return layernorm_row


def _rmsnorm_row(dtype: str) -> Any:
    """One row: its mean square, then the output."""
    load, store = VECTOR_CODECS[dtype]
    stage = _stage(dtype)

    @register_jitable
    def rmsnorm_row(row, out, buf, wf, bf, tile):  # type: ignore[no-untyped-def]
        cols = row.size
        total = ZERO
        for start in range(0, cols, tile):
            total += _square_sum(stage(row, start, min(tile, cols - start), buf))
        rstd = reciprocal_std(total / np.float32(cols))
        for j in range(cols):  # the re-read
            out[j] = store(load(row[j]) * rstd * wf[j])

    return rmsnorm_row


def _softmax_row(dtype: str) -> Any:
    """One row: its max and sum of exponentials online, chunk by chunk, then the output."""
    load, store = VECTOR_CODECS[dtype]
    stage = _stage(dtype)

    @register_jitable
    def softmax_row(row, out, buf, wf, bf, tile):  # type: ignore[no-untyped-def]
        cols = row.size
        m, total = NEG_INF, ZERO  # online softmax: rescale the running sum whenever the max grows
        for start in range(0, cols, tile):
            m_c, total_c = _max_sum(stage(row, start, min(tile, cols - start), buf))
            m_new = fmax32(m, m_c)
            total = total * exp_float32(m - m_new) + total_c * exp_float32(m_c - m_new)
            m = m_new
        inv = reciprocal(total)
        for j in range(cols):  # the re-read
            out[j] = store(exp_float32(load(row[j]) - m) * inv)

    return softmax_row
