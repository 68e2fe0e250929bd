"""The Numba CPU kernels of add_rmsnorm: the fused kernel and the unfused residual add.

The rmsnorm steps of the unfused variant are the normalization family's own step kernels (`normalization_kernels.
step_kernel`), reused as they are; only the add is new. The fused kernel follows rmsnorm's fused kernel: where a
row fits one chunk (cols ≤ tile) the rows of a block are software-pipelined (`normalization_blocks` explains
why) — one loop stores row i's y from the float32 h held in the thread's buffer while it computes row i+1's
h = x + residual, stores it, keeps it in the other half of the buffer and sums its squares. y is therefore
computed from h in float32, never from h rounded to storage. A wider row is walked chunk by chunk for its sum of
squares (storing h as it goes) and then once more, recomputing h from x and residual: the ledger's re-read.
Same fast-math flags as normalization (`reassoc` for vector lanes in the sums, `contract` for FMA).
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.on_cpu.normalization_kernels import BLOCKS_PER_THREAD, FASTMATH
from backends.numba.on_cpu.normalization_rows import reciprocal_std
from backends.numba.ops import VECTOR_CODECS, ZERO


@functools.cache
def add_kernel(dtype: str) -> Any:
    """h = x + residual, row by row in float32, stored in `dtype`."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def residual_add(x, res, h):  # type: ignore[no-untyped-def]
        rows, cols = x.shape
        for r in prange(rows):
            xr, rr, hr = x[r], res[r], h[r]
            for j in range(cols):
                hr[j] = store(load(xr[j]) + load(rr[j]))

    return residual_add


@functools.cache
def _rows(dtype: str) -> tuple[Any, Any, Any]:
    """The loops of a row: (h of a row into storage and the buffer, with its sum of squares; the pipelined
    loop; y of a row from the buffer)."""
    load, store = VECTOR_CODECS[dtype]

    @register_jitable
    def add_square(xr, rr, hr, hb):  # type: ignore[no-untyped-def]
        total = ZERO
        for j in range(xr.size):
            v = load(xr[j]) + load(rr[j])
            hb[j] = v
            hr[j] = store(v)
            total += v * v
        return total

    @register_jitable
    def output_then_add_square(hb, yr, rstd, wf, xn, rn, hn, hbn):  # type: ignore[no-untyped-def]
        """y of this row from its buffer; h of the next row, its buffer and its sum of squares."""
        total = ZERO
        for j in range(hb.size):
            yr[j] = store(hb[j] * rstd * wf[j])
            v = load(xn[j]) + load(rn[j])
            hbn[j] = v
            hn[j] = store(v)
            total += v * v
        return total

    @register_jitable
    def output(hb, yr, rstd, wf):  # type: ignore[no-untyped-def]
        for j in range(hb.size):
            yr[j] = store(hb[j] * rstd * wf[j])

    return add_square, output_then_add_square, output


@functools.cache
def _wide_row(dtype: str) -> Any:
    """One row wider than `tile`: chunk by chunk h stored and its squares summed, then x and residual re-read."""
    load, store = VECTOR_CODECS[dtype]

    @register_jitable
    def wide_row(xr, rr, hr, yr, wf, tile):  # type: ignore[no-untyped-def]
        cols = xr.size
        total = ZERO
        for start in range(0, cols, tile):
            n = min(tile, cols - start)
            xs, rs, hs = xr[start : start + n], rr[start : start + n], hr[start : start + n]
            part = ZERO
            for j in range(n):
                v = load(xs[j]) + load(rs[j])
                hs[j] = store(v)
                part += v * v
            total += part
        rstd = reciprocal_std(total / np.float32(cols))
        for j in range(cols):  # the re-read
            yr[j] = store((load(xr[j]) + load(rr[j])) * rstd * wf[j])

    return wide_row


@functools.cache
def fused_kernel(dtype: str) -> Any:
    """fused(x, res, weight, h, y, tile, buf, wf): h and y in one parallel loop; buf is the thread's float32
    scratch of 2 × cols (the h of two rows) where a row fits the tile, wf the weight converted to float32."""
    load = VECTOR_CODECS[dtype][0]
    add_square, output_then_add_square, output = _rows(dtype)
    wide_row = _wide_row(dtype)

    @njit(parallel=True, fastmath=FASTMATH)
    def add_rmsnorm_fused(x, res, weight, h, y, tile, buf, wf):  # type: ignore[no-untyped-def]
        rows, cols = x.shape
        for j in range(cols):
            wf[j] = load(weight[j])
        if cols > tile:
            for r in prange(rows):
                wide_row(x[r], res[r], h[r], y[r], wf, tile)
            return
        n = np.float32(cols)
        blocks = min(rows, numba.get_num_threads() * BLOCKS_PER_THREAD)
        per = (rows + blocks - 1) // blocks
        for b in prange(blocks):
            r0, r1 = b * per, min(rows, b * per + per)
            if r0 < r1:
                two = buf[numba.get_thread_id()][: 2 * cols].reshape((2, cols))
                total = add_square(x[r0], res[r0], h[r0], two[0])
                for r in range(r0, r1 - 1):
                    k = (r - r0) % 2
                    total = output_then_add_square(two[k], y[r], reciprocal_std(total / n), wf, x[r + 1],
                                                   res[r + 1], h[r + 1], two[1 - k])  # fmt: skip
                output(two[(r1 - 1 - r0) % 2], y[r1 - 1], reciprocal_std(total / n), wf)

    return add_rmsnorm_fused
