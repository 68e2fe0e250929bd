"""Numba CPU kernels of the normalization training step: the fused forward that saves row statistics, the fused
backward row pass with its partial sums and their reduction, and the unfused backward's step templates.

Same conventions as the forward (`normalization_kernels`): float32 arithmetic, halves as uint16 bits converted
in the loops, `reassoc`/`contract` fast-math so that the row sums vectorise, fenced reciprocals, one parallel
loop over rows (or blocks of rows, or blocks of columns for a column sum). The fused backward's rows are split
into `partials(rows)` blocks; each block keeps one float32 row of dweight (and dbias) sums, which it zeroes,
accumulates over its rows and leaves in memory for `sum_partials`, the second, small kernel.
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from backends.numba.on_cpu.normalization_kernels import FASTMATH
from backends.numba.on_cpu.normalization_rows import _moments, _square_sum, _stage, reciprocal_std
from backends.numba.ops import VECTOR_CODECS, ZERO

COL_BLOCK = 64
"""Columns per task of an unfused column sum: 64 float32 running sums, four cache lines of a float32 row."""


@functools.cache
def fused_forward(op: str, dtype: str) -> Any:
    """layernorm / rmsnorm forward that also writes each row's float32 statistics (mean and rstd, or rstd):
    the statistics chunk by chunk of `tile` columns (Chan's merge for layernorm, as the forward's wide rows),
    then the output from the row, which sits in L1/L2 when it fits the tile."""
    load, store = VECTOR_CODECS[dtype]
    stage = _stage(dtype)
    centred = op == "layernorm"

    @njit(parallel=True, fastmath=FASTMATH)
    def forward_saving(x, weight, bias, y, mean, rstd, tile, buf, wf, bf):  # type: ignore[no-untyped-def]
        rows, cols = x.shape
        for j in range(weight.size):
            wf[j] = load(weight[j])
        for j in range(bias.size):
            bf[j] = load(bias[j])
        for r in prange(rows):
            row, out, t = x[r], y[r], buf[numba.get_thread_id()]
            mu, m2, count = ZERO, ZERO, ZERO
            for start in range(0, cols, tile):
                n = min(tile, cols - start)
                if centred:
                    mean_c, m2_c = _moments(stage(row, start, n, t))
                    nc = np.float32(n)
                    total = count + nc
                    delta = mean_c - mu
                    mu += delta * (nc / total)
                    m2 += m2_c + delta * delta * (count * nc / total)
                    count = total
                else:
                    m2 += _square_sum(stage(row, start, n, t))
            rs = reciprocal_std(m2 / np.float32(cols))
            rstd[r] = rs
            if centred:
                mean[r] = mu
                for j in range(cols):
                    out[j] = store((load(row[j]) - mu) * rs * wf[j] + bf[j])
            else:
                for j in range(cols):
                    out[j] = store(load(row[j]) * rs * wf[j])

    return forward_saving


@functools.cache
def fused_backward(op: str, dtype: str) -> Any:
    """layernorm / rmsnorm backward, one pass over each row of a block: x̂ recomputed from x and the saved
    statistics, g = dy·w, the row's sums of g and g·x̂, dweight (dbias) added into the block's partial row;
    then dx = rstd·(g − Σg/n − x̂·Σg·x̂/n) from x̂, g and dy kept in the thread's buffer (3 × tile floats)
    when the row fits the tile, else recomputed from x and dy read again from memory (the ledger's re-read).
    g is kept, not rebuilt from dy: under `contract` a rebuilt dy·w − Σg/n becomes an FMA whose exact product
    leaves g's rounding in a difference that should be 0 (one column: dx = 0 exactly)."""
    load, store = VECTOR_CODECS[dtype]
    centred = op == "layernorm"

    @njit(parallel=True, fastmath=FASTMATH)
    def backward_rows(x, dy, weight, mean, rstd, dx, pw, pb, tile, buf, wf):  # type: ignore[no-untyped-def]
        rows, cols = x.shape
        n = np.float32(cols)
        for j in range(cols):
            wf[j] = load(weight[j])
        blocks = pw.shape[0]
        per = (rows + blocks - 1) // blocks
        for b in prange(blocks):
            accw, accb, t = pw[b], pb[b], buf[numba.get_thread_id()]
            for j in range(cols):
                accw[j] = ZERO
            if centred:
                for j in range(cols):
                    accb[j] = ZERO
            for r in range(b * per, min(rows, (b + 1) * per)):
                xr, dyr, out = x[r], dy[r], dx[r]
                mu = mean[r] if centred else ZERO
                rs = rstd[r]
                s1, s2 = ZERO, ZERO
                if cols <= tile:  # the row's x̂, g and dy kept in the thread's buffer for the passes after
                    xh, gg, dd = t[:cols], t[cols : 2 * cols], t[2 * cols : 3 * cols]
                    for j in range(cols):
                        h = (load(xr[j]) - mu) * rs
                        d = load(dyr[j])
                        g = d * wf[j]
                        xh[j] = h
                        gg[j] = g
                        dd[j] = d
                        s1 += g
                        s2 += g * h
                    a = s1 / n if centred else ZERO
                    c = s2 / n
                    for j in range(cols):
                        out[j] = store(rs * (gg[j] - a - xh[j] * c))
                    for j in range(cols):
                        accw[j] += dd[j] * xh[j]
                    if centred:
                        for j in range(cols):
                            accb[j] += dd[j]
                else:
                    for j in range(cols):
                        h = (load(xr[j]) - mu) * rs
                        d = load(dyr[j])
                        g = d * wf[j]
                        s1 += g
                        s2 += g * h
                        accw[j] += d * h
                    if centred:
                        for j in range(cols):
                            accb[j] += load(dyr[j])
                    a = s1 / n if centred else ZERO
                    c = s2 / n
                    for j in range(cols):  # the re-read
                        h = (load(xr[j]) - mu) * rs
                        g = load(dyr[j]) * wf[j]
                        out[j] = store(rs * (g - a - h * c))

    return backward_rows


@functools.cache
def softmax_backward(dtype: str) -> Any:
    """dx = y·(dy − Σ dy·y), one row at a time: the sum, then dx from y and dy again (from L1/L2 while the row
    fits)."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def softmax_rows(y, dy, dx):  # type: ignore[no-untyped-def]
        rows, cols = y.shape
        for r in prange(rows):
            yr, dyr, out = y[r], dy[r], dx[r]
            s = ZERO
            for j in range(cols):
                s += load(yr[j]) * load(dyr[j])
            for j in range(cols):
                out[j] = store(load(yr[j]) * (load(dyr[j]) - s))

    return softmax_rows


@functools.cache
def sum_partials(dtype: str) -> Any:
    """dweight[j] = Σ_b pw[b, j] (and dbias from pb, where db is not empty), in float32, stored in `dtype`."""
    store = VECTOR_CODECS[dtype][1]

    @njit(parallel=True, fastmath=FASTMATH)
    def reduce_partials(pw, pb, dw, db):  # type: ignore[no-untyped-def]
        blocks, cols = pw.shape
        for j in prange(cols):
            acc = ZERO
            for b in range(blocks):
                acc += pw[b, j]
            dw[j] = store(acc)
            if db.size:
                acc = ZERO
                for b in range(blocks):
                    acc += pb[b, j]
                db[j] = store(acc)

    return reduce_partials


# The unfused backward's templates: one kernel per step of BACKWARD_DECOMPOSITIONS (`scale` is the forward's). --


@functools.cache
def column_sum(dtype: str) -> Any:
    """out[j] = Σ_rows a (code 0) or Σ_rows a·b (code 1), parallel over blocks of COL_BLOCK columns, each
    summing its columns down every row into the thread's float32 scratch."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def colsum(a, b, out, acc, code):  # type: ignore[no-untyped-def]
        rows, cols = a.shape
        for k in prange((cols + COL_BLOCK - 1) // COL_BLOCK):
            c0 = k * COL_BLOCK
            w = min(COL_BLOCK, cols - c0)
            t = acc[numba.get_thread_id()]
            for j in range(w):
                t[j] = ZERO
            for r in range(rows):
                ar = a[r, c0 : c0 + w]
                if code == 1:
                    br = b[r, c0 : c0 + w]
                    for j in range(w):
                        t[j] += load(ar[j]) * load(br[j])
                else:
                    for j in range(w):
                        t[j] += load(ar[j])
            o = out[c0 : c0 + w]  # indexed from 0: `out[c0 + j]` may be negative to LLVM, and scatter
            for j in range(w):
                o[j] = store(t[j])

    return colsum


@functools.cache
def row_reduce(dtype: str) -> Any:
    """stat[r] = mean of a (code 0), mean of a·b (1) or sum of a (2) over row r, in float32."""
    load = VECTOR_CODECS[dtype][0]

    @njit(parallel=True, fastmath=FASTMATH)
    def reduce_rows(a, b, stat, code):  # type: ignore[no-untyped-def]
        rows, cols = a.shape
        for r in prange(rows):
            ar, br = a[r], b[r]
            acc = ZERO
            if code == 1:
                for j in range(cols):
                    acc += load(ar[j]) * load(br[j])
            else:
                for j in range(cols):
                    acc += load(ar[j])
            stat[r] = acc if code == 2 else acc / np.float32(cols)

    return reduce_rows


@functools.cache
def product(dtype: str) -> Any:
    """out = a·b, elementwise."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def multiply(a, b, out):  # type: ignore[no-untyped-def]
        rows, cols = a.shape
        for r in prange(rows):
            ar, br, o = a[r], b[r], out[r]
            for j in range(cols):
                o[j] = store(load(ar[j]) * load(br[j]))

    return multiply


@functools.cache
def norm_dx(dtype: str) -> Any:
    """dx = rstd(stat)·(dx̂ − m1 − x̂·m2) (code 1, layernorm) or rstd(stat)·(dx̂ − x̂·m2) (code 0, rmsnorm),
    with stat the row's variance or mean square."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def dx_rows(dxhat, xhat, stat, m1, m2, dx, code):  # type: ignore[no-untyped-def]
        rows, cols = dxhat.shape
        for r in prange(rows):
            g, h, out = dxhat[r], xhat[r], dx[r]
            rs, a, c = reciprocal_std(stat[r]), m1[r] if code == 1 else ZERO, m2[r]
            for j in range(cols):
                out[j] = store(rs * (load(g[j]) - a - load(h[j]) * c))

    return dx_rows


@functools.cache
def softmax_dx(dtype: str) -> Any:
    """dx = y·(dy − s), s the row's sum of dy·y."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def dx_rows(y, dy, s, dx):  # type: ignore[no-untyped-def]
        rows, cols = y.shape
        for r in prange(rows):
            yr, dyr, out, sr = y[r], dy[r], dx[r], s[r]
            for j in range(cols):
                out[j] = store(load(yr[j]) * (load(dyr[j]) - sr))

    return dx_rows
