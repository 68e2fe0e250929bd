"""The Numba CUDA kernels of the normalization training step: the forward that also writes the row statistics,
the fused backward row pass with its float32 partial rows, their sum, and the unfused backward's templates.

Plain Python functions per (op, BLOCK, THREADS) as the forward's (`normalization_kernels`): a block of THREADS
threads owns a row and a chunk of BLOCK columns, ITEMS = BLOCK / THREADS of them per thread in local arrays;
block reductions through the forward's shared-memory `block_sum` (the simulator has no warp shuffles).

The fused backward runs one block per block of rows (`partials(rows)`): dweight (dbias) over every row cannot
be summed in one kernel without atomics, so each block keeps the sum over its own rows as a float32 partial row
and `sum_partials`, a second small kernel, adds the partial rows up — the partials' bytes are in the ledger. A
row of one chunk keeps its partial in the threads' local arrays and stores it once; a wider row adds into the
block's own partial row in memory chunk by chunk (each column always the same thread's: no atomics, no race).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from backends.numba.on_cuda.normalization_kernels import EPS32, ONE, ZERO, _reductions
from suite.kit.launch import cdiv

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None


@functools.cache
def forward_saving(op: str, block: int, threads: int) -> Callable[..., None]:
    """layernorm (Chan's merge of chunk means and M2) or rmsnorm forward writing y and the row's float32 rstd
    (and mean); the output from the local array (one chunk) or x re-read."""
    items, block_sum = cdiv(block, threads), _reductions()[0]
    centred = op == "layernorm"

    def norm_forward(x, w, b, y, mean_out, rstd_out):  # type: ignore[no-untyped-def]
        cols = x.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        v = cuda.local.array(items, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        chunks = (cols + block - 1) // block
        mean, m2, count = ZERO, ZERO, ZERO
        for i in range(chunks):  # one chunk when cols <= block: then v is the row
            start = i * block
            s, q = ZERO, ZERO
            for k in range(items):
                c = t + k * threads
                v[k] = np.float32(x[row, start + c]) if c < block and start + c < cols else ZERO
                s += v[k]
                q += v[k] * v[k]
            if centred:
                n = np.float32(min(block, cols - start))
                mean_c = block_sum(s, smem) / n
                q = ZERO
                for k in range(items):
                    c = t + k * threads
                    d = v[k] - mean_c if c < block and start + c < cols else ZERO
                    q += d * d
                m2_c = block_sum(q, smem)
                total = count + n
                delta = mean_c - mean
                mean += delta * (n / total)  # Chan et al.; exact for the first chunk
                m2 += m2_c + delta * delta * (count * n / total)
                count = total
            else:
                m2 += block_sum(q, smem)
        rstd = ONE / math.sqrt(m2 / np.float32(cols) + EPS32)
        if t == 0:
            rstd_out[row] = rstd
            if centred:
                mean_out[row] = mean
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    val = v[k] if chunks == 1 else np.float32(x[row, start + c])  # else: the re-read
                    out = (val - mean) * rstd * np.float32(w[start + c])
                    if centred:
                        out += np.float32(b[start + c])
                    y[row, start + c] = out

    return norm_forward


@functools.cache
def backward_rows(op: str, block: int, threads: int) -> Callable[..., None]:
    """One block of rows: x̂ recomputed from x and the saved statistics, g = dy·w, the row's block sums of g and
    g·x̂, dx = rstd·(g − Σg/n − x̂·Σg·x̂/n); dy·x̂ (and dy) into the block's float32 partial row. A row of one
    chunk stays in the local arrays between the sums and dx; a wider one is read again for dx."""
    items, block_sum = cdiv(block, threads), _reductions()[0]
    centred = op == "layernorm"

    def norm_backward(x, dy, w, mean, rstd, dx, pw, pb):  # type: ignore[no-untyped-def]
        rows, cols = x.shape
        smem = cuda.shared.array(threads, np.float32)
        h = cuda.local.array(items, np.float32)
        g = cuda.local.array(items, np.float32)
        accw = cuda.local.array(items, np.float32)
        accb = cuda.local.array(items, np.float32)
        b, t = cuda.blockIdx.x, cuda.threadIdx.x
        n = np.float32(cols)
        per = (rows + pw.shape[0] - 1) // pw.shape[0]
        chunks = (cols + block - 1) // block
        for k in range(items):
            accw[k] = ZERO
            accb[k] = ZERO
        if chunks > 1:
            for c in range(t, cols, threads):
                pw[b, c] = ZERO
                if centred:
                    pb[b, c] = ZERO
        for r in range(b * per, min(rows, (b + 1) * per)):
            rs = rstd[r]
            mu = mean[r] if centred else ZERO
            s1, s2 = ZERO, ZERO
            for i in range(chunks):
                start = i * block
                for k in range(items):
                    c = t + k * threads
                    if c < block and start + c < cols:
                        d = np.float32(dy[r, start + c])
                        h[k] = (np.float32(x[r, start + c]) - mu) * rs
                        g[k] = d * np.float32(w[start + c])
                        s1 += g[k]
                        s2 += g[k] * h[k]
                        if chunks == 1:
                            accw[k] += d * h[k]
                            accb[k] += d
                        else:
                            pw[b, start + c] += d * h[k]
                            if centred:
                                pb[b, start + c] += d
            a = block_sum(s1, smem) / n if centred else ZERO
            m = block_sum(s2, smem) / n
            for i in range(chunks):
                start = i * block
                for k in range(items):
                    c = t + k * threads
                    if c < block and start + c < cols:
                        if chunks > 1:  # the re-read
                            h[k] = (np.float32(x[r, start + c]) - mu) * rs
                            g[k] = np.float32(dy[r, start + c]) * np.float32(w[start + c])
                        dx[r, start + c] = rs * (g[k] - a - h[k] * m)
        if chunks == 1:
            for k in range(items):
                c = t + k * threads
                if c < block and c < cols:
                    pw[b, c] = accw[k]
                    if centred:
                        pb[b, c] = accb[k]

    return norm_backward


@functools.cache
def sum_partials(op: str, threads: int) -> Callable[..., None]:
    """dweight[j] = Σ_b pw[b, j] (and dbias from pb) in float32, a column per thread."""
    centred = op == "layernorm"

    def reduce_partials(pw, pb, dw, db):  # type: ignore[no-untyped-def]
        blocks, cols = pw.shape
        c = cuda.blockIdx.x * threads + cuda.threadIdx.x
        if c < cols:
            accw, accb = ZERO, ZERO
            for b in range(blocks):
                accw += pw[b, c]
                if centred:
                    accb += pb[b, c]
            dw[c] = accw
            if centred:
                db[c] = accb

    return reduce_partials


@functools.cache
def softmax_backward(block: int, threads: int) -> Callable[..., None]:
    """dx = y·(dy − Σ dy·y) for one row: from the local arrays (one chunk) or y and dy read again."""
    items, block_sum = cdiv(block, threads), _reductions()[0]

    def softmax_rows(y, dy, dx):  # type: ignore[no-untyped-def]
        cols = y.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        yv = cuda.local.array(items, np.float32)
        dv = cuda.local.array(items, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        chunks = (cols + block - 1) // block
        s = ZERO
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    yv[k] = np.float32(y[row, start + c])
                    dv[k] = np.float32(dy[row, start + c])
                    s += yv[k] * dv[k]
        s = block_sum(s, smem)
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    if chunks > 1:  # the re-read
                        yv[k] = np.float32(y[row, start + c])
                        dv[k] = np.float32(dy[row, start + c])
                    dx[row, start + c] = yv[k] * (dv[k] - s)

    return softmax_rows


# The unfused backward's templates: one kernel per step of BACKWARD_DECOMPOSITIONS (`scale` is the forward's). --


@functools.cache
def column_sum(pair: bool, threads: int) -> Callable[..., None]:
    """out[j] = Σ_rows a (or Σ_rows a·b with `pair`), a column per thread, down every row in float32."""

    def colsum(a, b, out):  # type: ignore[no-untyped-def]
        rows, cols = a.shape
        c = cuda.blockIdx.x * threads + cuda.threadIdx.x
        if c < cols:
            acc = ZERO
            for r in range(rows):
                acc += np.float32(a[r, c]) * np.float32(b[r, c]) if pair else np.float32(a[r, c])
            out[c] = acc

    return colsum


@functools.cache
def row_reduce(pair: bool, mean: bool, threads: int) -> Callable[..., None]:
    """stat[row] = sum (or mean) of a (or of a·b with `pair`) over the row: a strided loop, then the block's."""
    block_sum = _reductions()[0]

    def reduce_rows(a, b, stat):  # type: ignore[no-untyped-def]
        cols = a.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        acc = ZERO
        for c in range(t, cols, threads):
            acc += np.float32(a[row, c]) * np.float32(b[row, c]) if pair else np.float32(a[row, c])
        acc = block_sum(acc, smem)
        if t == 0:
            stat[row] = acc / np.float32(cols) if mean else acc

    return reduce_rows


@functools.cache
def product(block: int, threads: int) -> Callable[..., None]:
    """out = a·b on a (rows, chunks) grid."""
    items = cdiv(block, threads)

    def multiply(a, b, out):  # type: ignore[no-untyped-def]
        cols = a.shape[1]
        row, t, start = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockIdx.y * block
        for k in range(items):
            c = start + t + k * threads
            if t + k * threads < block and c < cols:
                out[row, c] = np.float32(a[row, c]) * np.float32(b[row, c])

    return multiply


@functools.cache
def norm_dx(centred: bool, block: int, threads: int) -> Callable[..., None]:
    """dx = rstd·(dx̂ − m1 − x̂·m2) (`centred`, layernorm) or rstd·(dx̂ − x̂·m2), rstd from the row's variance
    (mean square) as the forward's normalise computes it; on a (rows, chunks) grid."""
    items = cdiv(block, threads)

    def dx_rows(g, h, stat, m1, m2, dx):  # type: ignore[no-untyped-def]
        cols = g.shape[1]
        row, t, start = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockIdx.y * block
        rs = ONE / math.sqrt(stat[row] + EPS32)
        a = m1[row] if centred else ZERO
        m = m2[row]
        for k in range(items):
            c = start + t + k * threads
            if t + k * threads < block and c < cols:
                dx[row, c] = rs * (np.float32(g[row, c]) - a - np.float32(h[row, c]) * m)

    return dx_rows


@functools.cache
def softmax_dx(block: int, threads: int) -> Callable[..., None]:
    """dx = y·(dy − s), s the row's sum of dy·y; on a (rows, chunks) grid."""
    items = cdiv(block, threads)

    def dx_rows(y, dy, s, dx):  # type: ignore[no-untyped-def]
        cols = y.shape[1]
        row, t, start = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockIdx.y * block
        sr = s[row]
        for k in range(items):
            c = start + t + k * threads
            if t + k * threads < block and c < cols:
                dx[row, c] = np.float32(y[row, c]) * (np.float32(dy[row, c]) - sr)

    return dx_rows
