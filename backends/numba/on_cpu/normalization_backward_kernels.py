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
from numba.extending import register_jitable

from backends.numba.on_cpu.normalization_kernels import FASTMATH
from backends.numba.on_cpu.normalization_rows import _moments, _square_sum, _stage, reciprocal_std
from backends.numba.ops import VECTOR_CODECS, ZERO

NO_CONTRACT = FASTMATH - {"contract"}
"""The fused backward's flags (`fused_backward` says why it goes without FMA)."""
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
def _backward_rows(op: str, dtype: str) -> tuple[Any, Any, Any]:
    """The loops of a row of the fused backward, inlined where they are called: (a row's sums of g and g·(x − μ),
    its first read; the pipelined loop; a block's last row's dx; a row wider than the tile)."""
    load, store = VECTOR_CODECS[dtype]
    centred = op == "layernorm"

    @register_jitable(inline="always")
    def sums(xr, dyr, wf, mu):  # type: ignore[no-untyped-def]
        s1, s2 = ZERO, ZERO
        for j in range(xr.size):
            g = load(dyr[j]) * wf[j]
            s1 += g
            s2 += g * (load(xr[j]) - mu)
        return s1, s2

    @register_jitable(inline="always")
    def dx_then_sums(xr, dyr, out, accw, accb, wf, mu, rs, a, c, xn, dyn, mun, rsn, acc):  # type: ignore[no-untyped-def]
        """Row r's dx from x and dy again (in L1/L2, read one loop earlier); row r+1's sums, its first read, its
        values loaded before any store (4K aliasing, as add_rmsnorm's pipelined loop); with `acc` (loop
        invariant: LLVM unswitches it), both rows' dweight (dbias) terms into the block's partial row."""
        s1, s2 = ZERO, ZERO
        for j in range(xr.size):
            vn, dn = load(xn[j]), load(dyn[j])
            h = (load(xr[j]) - mu) * rs
            d = load(dyr[j])
            out[j] = store(rs * (d * wf[j] - a - h * c))
            g = dn * wf[j]
            s1 += g
            s2 += g * (vn - mun)
            if acc:
                accw[j] += d * h + dn * ((vn - mun) * rsn)
                if centred:
                    accb[j] += d + dn
        return s1, s2

    @register_jitable(inline="always")
    def dx_last(xr, dyr, out, accw, accb, wf, mu, rs, a, c, acc):  # type: ignore[no-untyped-def]
        for j in range(xr.size):
            h = (load(xr[j]) - mu) * rs
            d = load(dyr[j])
            out[j] = store(rs * (d * wf[j] - a - h * c))
            if acc:
                accw[j] += d * h
                if centred:
                    accb[j] += d

    @register_jitable(inline="always")
    def wide_row(xr, dyr, out, accw, accb, wf, mu, rs, n):  # type: ignore[no-untyped-def]
        """The sums and the partial rows from memory, then dx from x and dy read again. The partial rows go in the
        first pass, beside its two load streams: in the second, beside dx's stores, they cost (1,823 × 16,384,
        float32, tile 4,096, one run each on the CI host) 84% of the copy ceiling against 100% (rmsnorm), 58%
        against 76% (layernorm)."""
        s1, s2 = ZERO, ZERO
        for j in range(xr.size):
            h = (load(xr[j]) - mu) * rs
            d = load(dyr[j])
            g = d * wf[j]
            s1 += g
            s2 += g * h
            accw[j] += d * h
        if centred:
            for j in range(xr.size):
                accb[j] += load(dyr[j])
        a = s1 / n if centred else ZERO
        c = s2 / n
        for j in range(xr.size):  # the re-read
            h = (load(xr[j]) - mu) * rs
            out[j] = store(rs * (load(dyr[j]) * wf[j] - a - h * c))

    return sums, dx_then_sums, dx_last, wide_row


@functools.cache
def fused_backward(op: str, dtype: str) -> Any:
    """layernorm / rmsnorm backward over blocks of rows, each block software-pipelined as the forward's
    (`normalization_blocks`): x̂ = (x − μ)·rstd from the saved statistics, g = dy·w, a row's sums Σg and Σg·x̂,
    then dx = rstd·(g − Σg/n − x̂·Σg·x̂/n). One loop writes row r's dx, re-reading its x and dy from L1/L2,
    while it takes row r+1's sums from memory, so that stores and loads from memory are in flight together
    (read, then written, row by row, a row's dx went out as a store stream with no load from memory beside it).
    The block's partial row of dweight (dbias) takes two rows' terms every other loop, row r's and row r+1's
    (whose x̂ its saved statistics give): one more load and store stream through L1/L2 in a loop that already
    has five. Rows wider than the tile are read from memory for their sums and partial rows, then again for dx
    (the ledger's re-read), row by row (`_backward_rows`' wide_row).

    Measured on the 2-core CI host (one thread, CPU time, interleaved, 8,192 × 4,096 float32, share of an
    ordinary-store copy): the loop without the partial row ran at 101–108%, with it in every loop at 64–68%, in
    every other loop at 81–83%; the earlier kernel (a row's x̂, g and dy kept in a scratch buffer, then dx and
    the partials from it) at 61–64%, this one at 81% (rmsnorm) and 87% (layernorm).

    Compiled without `contract`: an FMA of dy·w − Σg/n keeps the exact product where Σg/n summed its rounded
    value, and one column's dx = rstd·(g − g − 0·c), 0 exactly, would become rstd times g's rounding error. With
    FMA the kernel ran no faster (80% and 89% against 81% and 87%)."""
    load = VECTOR_CODECS[dtype][0]
    centred = op == "layernorm"
    sums, dx_then_sums, dx_last, wide_row = _backward_rows(op, dtype)

    @njit(parallel=True, fastmath=NO_CONTRACT)
    def backward_rows(x, dy, weight, mean, rstd, dx, pw, pb, tile, wf):  # type: ignore[no-untyped-def]
        rows, cols = x.shape
        n = np.float32(cols)
        for j in range(cols):
            wf[j] = load(weight[j])
        blocks = pw.shape[0]
        per = (rows + blocks - 1) // blocks
        for b in prange(blocks):
            accw, accb = pw[b], pb[b]
            for j in range(cols):
                accw[j] = ZERO
            if centred:
                for j in range(cols):
                    accb[j] = ZERO
            r0, r1 = b * per, min(rows, b * per + per)
            if r0 >= r1:
                continue
            if cols > tile:
                for r in range(r0, r1):
                    wide_row(x[r], dy[r], dx[r], accw, accb, wf, mean[r] if centred else ZERO, rstd[r], n)
                continue
            mu = mean[r0] if centred else ZERO
            s1, s2 = sums(x[r0], dy[r0], wf, mu)  # the pipeline's fill
            for r in range(r0, r1 - 1):
                rs, mun = rstd[r], mean[r + 1] if centred else ZERO
                a = s1 / n if centred else ZERO
                acc = (r - r0) % 2 == 0
                s1, s2 = dx_then_sums(x[r], dy[r], dx[r], accw, accb, wf, mu, rs, a, s2 * rs / n,
                                      x[r + 1], dy[r + 1], mun, rstd[r + 1], acc)  # fmt: skip
                mu = mun
            r = r1 - 1
            rs = rstd[r]
            a = s1 / n if centred else ZERO
            dx_last(x[r], dy[r], dx[r], accw, accb, wf, mu, rs, a, s2 * rs / n, (r - r0) % 2 == 0)

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
