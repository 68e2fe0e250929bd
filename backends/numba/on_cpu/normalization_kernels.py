"""The Numba CPU kernels of row normalization: the unfused step templates and each op's fused kernel.

Kernel factories apart from the entries that prepare and launch them (`backends.numba.on_cpu.normalization`);
the fused kernel's row bodies are `normalization_rows`. Both variants use the same scalar code, compile with
the same fast-math flags and vectorise the same way: `reassoc` lets LLVM keep several running sums in vector
lanes, `contract` allows FMA. exp is `exp_float32` (branch-free, vectorised), not libm's `expf`, which would
cost softmax two thirds of its speed; max is LLVM's vectorisable `maxnum`. Half-precision arrays travel as
their uint16 bits and are converted in the loops (`VECTOR_CODECS`: F16C where the host has it).
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.on_cpu.normalization_blocks import block_function
from backends.numba.on_cpu.normalization_rows import reciprocal, reciprocal_std, row_function
from backends.numba.ops import NEG_INF, VECTOR_CODECS, ZERO, exp_float32, fmax32

FASTMATH = {"reassoc", "contract"}
"""No `nnan`/`ninf`: softmax starts its running max at −inf, and a NaN must still come out as a NaN."""


@register_jitable
def _square(v: float) -> float:
    return v * v


CODES = {"mean": 0, "mean_square": 1, "max": 2, "sum": 3, "center": 0, "shift": 0, "normalize": 1, "divide": 2,
         "exp": 0, "scale": 0, "scale_shift": 1}  # fmt: skip
"""A step's op within its template (kind): one compiled kernel per template and dtype, the op picked per call
by an argument and dispatched outside the column loop — four templates compile faster than eleven kernels."""


@functools.cache
def step_kernel(template: str, dtype: str) -> Any:
    """The unfused template `template` (see scenarios.normalization.kind) for arrays of `dtype`."""
    factory = {"reduce": _reduce_kernel, "rowwise": _rowwise_kernel, "map": _map_kernel, "affine": _affine_kernel}
    return factory[template](dtype)


def _reduce_kernel(dtype: str) -> Any:
    """stat[r] = mean (code 0), mean square (1), max (2) or sum (3) of row r."""
    load = VECTOR_CODECS[dtype][0]

    def reduce_rows(src, stat, code):  # type: ignore[no-untyped-def]
        rows, cols = src.shape
        for r in prange(rows):
            row = src[r]
            if code == 2:
                acc = NEG_INF
                for j in range(cols):
                    acc = fmax32(acc, load(row[j]))
            elif code == 1:
                acc = ZERO
                for j in range(cols):
                    acc += _square(load(row[j]))
            else:
                acc = ZERO
                for j in range(cols):
                    acc += load(row[j])
            stat[r] = acc / np.float32(cols) if code <= 1 else acc

    return njit(parallel=True, fastmath=FASTMATH)(reduce_rows)


def _rowwise_kernel(dtype: str) -> Any:
    """dst = src − stat (code 0), src · 1/sqrt(stat + eps) (1) or src · 1/stat (2), row by row."""
    load, store = VECTOR_CODECS[dtype]

    def rowwise(src, stat, dst, code):  # type: ignore[no-untyped-def]
        rows, cols = src.shape
        for r in prange(rows):
            row, out = src[r], dst[r]
            if code == 0:
                a = stat[r]
                for j in range(cols):
                    out[j] = store(load(row[j]) - a)
            else:
                a = reciprocal_std(stat[r]) if code == 1 else reciprocal(stat[r])
                for j in range(cols):
                    out[j] = store(load(row[j]) * a)

    return njit(parallel=True, fastmath=FASTMATH)(rowwise)


def _map_kernel(dtype: str) -> Any:
    """dst = exp(src)."""
    load, store = VECTOR_CODECS[dtype]

    def exp_map(src, dst, code):  # type: ignore[no-untyped-def]
        rows, cols = src.shape
        for r in prange(rows):
            row, out = src[r], dst[r]
            for j in range(cols):
                out[j] = store(exp_float32(load(row[j])))

    return njit(parallel=True, fastmath=FASTMATH)(exp_map)


def _affine_kernel(dtype: str) -> Any:
    """dst = src · weight (code 0) or src · weight + bias (1), weight and bias converted once into wf, bf."""
    load, store = VECTOR_CODECS[dtype]

    def affine(src, weight, bias, dst, wf, bf, code):  # type: ignore[no-untyped-def]
        rows, cols = src.shape
        for j in range(weight.size):
            wf[j] = load(weight[j])
        for j in range(bias.size):
            bf[j] = load(bias[j])
        for r in prange(rows):
            row, out = src[r], dst[r]
            if code == 1:
                for j in range(cols):
                    out[j] = store(load(row[j]) * wf[j] + bf[j])
            else:
                for j in range(cols):
                    out[j] = store(load(row[j]) * wf[j])

    return njit(parallel=True, fastmath=FASTMATH)(affine)


BLOCKS_PER_THREAD = 8
"""Pipelined blocks of rows (`normalization_blocks`) per thread: enough that the threads finish together, few
enough that each block's pipeline fill (its first row read alone) is a small share."""


@functools.cache
def fused_kernel(op: str, dtype: str) -> Any:
    """One parallel loop: over pipelined blocks of rows where a row fits one chunk (`normalization_blocks`),
    else over rows, each walked chunk by chunk (`normalization_rows`). `buf` is the thread's float32 scratch of
    2 × chunk: softmax's exponentials, or the converted chunk of a wide half-precision row."""
    load = VECTOR_CODECS[dtype][0]
    row_fn, block = row_function(op, dtype), block_function(op, dtype)

    @njit(parallel=True, fastmath=FASTMATH)
    def fused_rows(x, weight, bias, y, tile, buf, wf, bf):  # type: ignore[no-untyped-def]
        rows, cols = x.shape
        for j in range(weight.size):
            wf[j] = load(weight[j])
        for j in range(bias.size):
            bf[j] = load(bias[j])
        if cols > tile:
            for r in prange(rows):
                row_fn(x[r], y[r], buf[numba.get_thread_id()], wf, bf, tile)
            return
        blocks = min(rows, numba.get_num_threads() * BLOCKS_PER_THREAD)
        per = (rows + blocks - 1) // blocks
        for b in prange(blocks):
            r0 = b * per
            if r0 < rows:
                block(x, y, r0, min(rows, r0 + per), buf[numba.get_thread_id()], wf, bf)

    return fused_rows
