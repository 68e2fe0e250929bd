"""The Numba CPU kernels of add_rmsnorm's training step (`scenarios.add_rmsnorm.backward` has the math).

- `fused_forward_kernel`: the forward kernel's pipelined row loop (`add_rmsnorm_kernels._rows`), also storing
  each row's rstd, the one thing the fused backward needs that the forward did not store; rows wider than the
  tile take `fused_forward_wide_kernel` (chunked sum of squares, then y recomputed from x and residual).
- `fused_backward_kernel`: one parallel loop over row blocks; each row is walked twice, once to sum g·h, once to
  write dx and dresidual and add dy[1]·ĥ into its block's float32 partial row of dweight.
- `partials_kernel`, `dms_kernel`, `h_grad_kernel`: the unfused backward's own steps (its scale backward is the
  normalization family's affine step kernel, reused).
- `reduce_kernel`: the partials' rows summed into dweight, shared by both variants.

dweight never takes a lock or an atomic: a block owns its partial row (zeroed at the start of each launch, so a
block with no rows adds nothing) and the reduction sums the rows in order, so the result does not depend on
which thread ran which block. Each row's sum is float32 with `reassoc` (vector lanes), as the forward's.
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from backends.numba.on_cpu.add_rmsnorm_kernels import BLOCKS_PER_THREAD, _rows
from backends.numba.on_cpu.normalization_kernels import FASTMATH
from backends.numba.on_cpu.normalization_rows import reciprocal_std
from backends.numba.ops import VECTOR_CODECS, ZERO

REDUCE_COLUMNS = 2048
"""Columns a parallel iteration of the reduction takes: the partials are small, a few chunks are enough."""


@functools.cache
def fused_forward_kernel(dtype: str) -> Any:
    """fused(x, res, weight, h, y, rstd, wf): h, y and rstd of rows that fit one tile."""
    load = VECTOR_CODECS[dtype][0]
    add_square, output_then_add_square, output = _rows(dtype)

    @njit(parallel=True, fastmath=FASTMATH)
    def add_rmsnorm_fused_saving(x, res, weight, h, y, rstd, wf):  # type: ignore[no-untyped-def]
        rows, cols = x.shape
        for j in range(cols):
            wf[j] = load(weight[j])
        n = np.float32(cols)
        blocks = min(rows, numba.get_num_threads() * BLOCKS_PER_THREAD)
        per = (rows + blocks - 1) // blocks
        for b in prange(blocks):
            r0, r1 = b * per, min(rows, b * per + per)
            if r0 < r1:
                total = add_square(x[r0], res[r0], h[r0])
                for r in range(r0, r1 - 1):
                    rs = reciprocal_std(total / n)
                    rstd[r] = rs
                    total = output_then_add_square(x[r], res[r], h[r], y[r], rs, wf, x[r + 1], res[r + 1], h[r + 1])
                rs = reciprocal_std(total / n)
                rstd[r1 - 1] = rs
                output(x[r1 - 1], res[r1 - 1], h[r1 - 1], y[r1 - 1], rs, wf)

    return add_rmsnorm_fused_saving


@functools.cache
def fused_forward_wide_kernel(dtype: str) -> Any:
    """fused_wide(x, res, weight, h, y, rstd, wf, tile): rows wider than `tile`, chunk by chunk, then again."""
    load, store = VECTOR_CODECS[dtype]
    add_square = _rows(dtype)[0]

    @njit(parallel=True, fastmath=FASTMATH)
    def add_rmsnorm_fused_wide_saving(x, res, weight, h, y, rstd, wf, tile):  # type: ignore[no-untyped-def]
        cols = x.shape[1]
        for j in range(cols):
            wf[j] = load(weight[j])
        for r in prange(x.shape[0]):
            xr, rr, hr, yr = x[r], res[r], h[r], y[r]
            total = ZERO
            for lo in range(0, cols, tile):
                hi = min(cols, lo + tile)
                total += add_square(xr[lo:hi], rr[lo:hi], hr[lo:hi])
            rs = reciprocal_std(total / np.float32(cols))
            rstd[r] = rs
            for j in range(cols):  # the re-read, as the forward's wide kernel
                yr[j] = store((load(xr[j]) + load(rr[j])) * rs * wf[j])

    return add_rmsnorm_fused_wide_saving


@functools.cache
def fused_backward_kernel(dtype: str) -> Any:
    """fused_backward(h, rstd, weight, dy0, dy1, dx, dres, partials, wf): dh = dy0 + rs·g − k·h with g = dy1·γ
    and k = rs³·Σ(g·h)/cols; partials[block] += dy1·h·rs."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def add_rmsnorm_backward(h, rstd, weight, dy0, dy1, dx, dres, partials, wf):  # type: ignore[no-untyped-def]
        rows, cols = h.shape
        for j in range(cols):
            wf[j] = load(weight[j])
        blocks = partials.shape[0]
        per = (rows + blocks - 1) // blocks
        inv_cols = np.float32(1) / np.float32(cols)
        for b in prange(blocks):
            part = partials[b]
            for j in range(cols):
                part[j] = ZERO
            for r in range(b * per, min(rows, b * per + per)):
                hr, ar, gr, xr, rr = h[r], dy0[r], dy1[r], dx[r], dres[r]
                rs = rstd[r]
                total = ZERO
                for j in range(cols):
                    total += load(gr[j]) * wf[j] * load(hr[j])
                k = rs * rs * rs * total * inv_cols
                for j in range(cols):
                    hv, g = load(hr[j]), load(gr[j])
                    v = store(load(ar[j]) + rs * g * wf[j] - k * hv)
                    xr[j] = v
                    rr[j] = v
                    part[j] += g * hv * rs

    return add_rmsnorm_backward


@functools.cache
def reduce_kernel(dtype: str) -> Any:
    """reduce(partials, dweight): the partial rows summed in order (into the first), stored in `dtype`."""
    store = VECTOR_CODECS[dtype][1]

    @njit(parallel=True, fastmath=FASTMATH)
    def reduce_partials(partials, dweight):  # type: ignore[no-untyped-def]
        blocks, cols = partials.shape
        for c in prange((cols + REDUCE_COLUMNS - 1) // REDUCE_COLUMNS):
            lo = c * REDUCE_COLUMNS
            hi = min(cols, lo + REDUCE_COLUMNS)
            acc = partials[0, lo:hi]  # summed into the first block's row: the main kernel zeroes it again
            for b in range(1, blocks):
                row = partials[b, lo:hi]
                for j in range(hi - lo):
                    acc[j] += row[j]
            out = dweight[lo:hi]
            for j in range(hi - lo):
                out[j] = store(acc[j])

    return reduce_partials


@functools.cache
def partials_kernel(dtype: str) -> Any:
    """partials(dy1, hhat, partials): each block's Σ over its rows of dy1·ĥ (unfused: ĥ as its forward saved it)."""
    load = VECTOR_CODECS[dtype][0]

    @njit(parallel=True, fastmath=FASTMATH)
    def weight_partials(dy1, hhat, partials):  # type: ignore[no-untyped-def]
        rows, cols = dy1.shape
        blocks = partials.shape[0]
        per = (rows + blocks - 1) // blocks
        for b in prange(blocks):
            part = partials[b]
            for j in range(cols):
                part[j] = ZERO
            for r in range(b * per, min(rows, b * per + per)):
                gr, nr = dy1[r], hhat[r]
                for j in range(cols):
                    part[j] += load(gr[j]) * load(nr[j])

    return weight_partials


@functools.cache
def dms_kernel(dtype: str) -> Any:
    """dms(dhhat, h, ms, dms): the normalise step's backward to its statistic, −½·(ms + eps)^(−3/2)·Σ dĥ·h."""
    load = VECTOR_CODECS[dtype][0]

    @njit(parallel=True, fastmath=FASTMATH)
    def statistic_grad(dhhat, h, ms, dms):  # type: ignore[no-untyped-def]
        rows, cols = h.shape
        for r in prange(rows):
            gr, hr = dhhat[r], h[r]
            total = ZERO
            for j in range(cols):
                total += load(gr[j]) * load(hr[j])
            rs = reciprocal_std(ms[r])
            dms[r] = np.float32(-0.5) * rs * rs * rs * total

    return statistic_grad


@functools.cache
def h_grad_kernel(dtype: str) -> Any:
    """h_grad(dy0, dhhat, h, ms, dms, dx, dres): h's three gradients, dy0 + dĥ·r + dms·2h/cols, into both."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def h_grad(dy0, dhhat, h, ms, dms, dx, dres):  # type: ignore[no-untyped-def]
        rows, cols = h.shape
        for r in prange(rows):
            ar, gr, hr, xr, rr = dy0[r], dhhat[r], h[r], dx[r], dres[r]
            rs = reciprocal_std(ms[r])
            d = dms[r] * (np.float32(2) / np.float32(cols))
            for j in range(cols):
                v = store(load(ar[j]) + load(gr[j]) * rs + d * load(hr[j]))
                xr[j] = v
                rr[j] = v

    return h_grad
