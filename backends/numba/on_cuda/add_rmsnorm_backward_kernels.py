"""The Numba CUDA kernels of add_rmsnorm's training step, as plain Python functions (what `cuda.jit` and
`cuda.compile_ptx` take), built per (BLOCK, THREADS) like the forward's (`scenarios.add_rmsnorm.backward` has
the math).

- `fused_forward_source`: the forward's fused kernel (`add_rmsnorm_kernels.fused_source`) also storing each row's
  rstd, the one tensor the fused backward needs that the forward would not otherwise write.
- `fused_backward_source`: a block per row block of dweight's partials, walking its rows: a row of one chunk is
  loaded once into local arrays (h and dy[1]), its Σ g·γ·h block-summed and its gradients written from them; a
  wider row is walked twice, h and dy[1] read again (the ledger's re-read). Each thread adds dy[1]·h·rstd of its
  columns into the block's float32 partial row: in a local array across the rows when the row is one chunk,
  else in the partial row itself (its own columns, so no other thread touches them and no barrier is needed).
- `weight_partials_source`, `statistic_grad_source`, `h_grad_source`: the unfused backward's own steps (its scale
  backward is the normalization family's scale step, reused).
- `reduce_source`: the partial rows summed in order into dweight, shared by both variants.

dweight takes no atomics: a block owns its partial row (written whole at every launch, zeros where the block
has no rows) and the reduction sums the rows in block order, so the result does not depend on scheduling. The
block sum is normalization's shared-memory reduction (the simulator has no warp shuffles); arithmetic is
float32 (np.float32 constants), stored in the arrays' dtype.
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

HALF, TWO = np.float32(-0.5), np.float32(2.0)


@functools.cache
def fused_forward_source(block: int, threads: int) -> Callable[..., None]:
    """The forward's fused kernel, also writing rstd[row]."""
    items, block_sum = cdiv(block, threads), _reductions()[0]

    def add_rmsnorm_saving(x, res, w, h, y, rstd):  # type: ignore[no-untyped-def]
        cols = x.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        v = cuda.local.array(items, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        chunks = (cols + block - 1) // block
        q = ZERO
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    v[k] = np.float32(x[row, start + c]) + np.float32(res[row, start + c])
                    h[row, start + c] = v[k]
                else:
                    v[k] = ZERO
                q += v[k] * v[k]
        rs = ONE / math.sqrt(block_sum(q, smem) / np.float32(cols) + EPS32)
        if t == 0:
            rstd[row] = rs
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    again = np.float32(x[row, start + c]) + np.float32(res[row, start + c]) if chunks > 1 else ZERO
                    val = v[k] if chunks == 1 else again  # else: the re-read of x and residual
                    y[row, start + c] = val * rs * np.float32(w[start + c])

    return add_rmsnorm_saving


@functools.cache
def fused_backward_source(block: int, threads: int) -> Callable[..., None]:
    """fused_backward(h, rstd, w, dy0, dy1, dx, dres, partials): dh = dy0 + rs·g·γ − k·h with
    k = rs³·Σ(g·γ·h)/cols into dx and dres; partials[block] = Σ over the block's rows of g·h·rs."""
    items, block_sum = cdiv(block, threads), _reductions()[0]

    def add_rmsnorm_backward(h, rstd, w, dy0, dy1, dx, dres, partials):  # type: ignore[no-untyped-def]
        rows, cols = h.shape
        smem = cuda.shared.array(threads, np.float32)
        hv = cuda.local.array(items, np.float32)
        gv = cuda.local.array(items, np.float32)
        acc = cuda.local.array(items, np.float32)
        b, t = cuda.blockIdx.x, cuda.threadIdx.x
        per = (rows + partials.shape[0] - 1) // partials.shape[0]
        chunks = (cols + block - 1) // block
        inv_cols = ONE / np.float32(cols)
        for k in range(items):
            acc[k] = ZERO
        if chunks > 1:  # the partial row is added to in place: zero this thread's columns of it
            for i in range(chunks):
                for k in range(items):
                    c = t + k * threads
                    if c < block and i * block + c < cols:
                        partials[b, i * block + c] = ZERO
        for r in range(b * per, min(rows, b * per + per)):
            rs = rstd[r]
            s = ZERO
            for i in range(chunks):
                start = i * block
                for k in range(items):
                    c = t + k * threads
                    if c < block and start + c < cols:
                        hv[k] = np.float32(h[r, start + c])
                        gv[k] = np.float32(dy1[r, start + c])
                        s += gv[k] * np.float32(w[start + c]) * hv[k]
            kk = rs * rs * rs * block_sum(s, smem) * inv_cols
            for i in range(chunks):
                start = i * block
                for k in range(items):
                    c = t + k * threads
                    if c < block and start + c < cols:
                        if chunks > 1:  # the second walk: h and dy[1] read again
                            hv[k] = np.float32(h[r, start + c])
                            gv[k] = np.float32(dy1[r, start + c])
                        val = np.float32(dy0[r, start + c]) + rs * gv[k] * np.float32(w[start + c]) - kk * hv[k]
                        dx[r, start + c] = val
                        dres[r, start + c] = val
                        if chunks == 1:
                            acc[k] += gv[k] * hv[k] * rs
                        else:
                            partials[b, start + c] += gv[k] * hv[k] * rs
        if chunks == 1:
            for k in range(items):
                c = t + k * threads
                if c < block and c < cols:
                    partials[b, c] = acc[k]

    return add_rmsnorm_backward


@functools.cache
def reduce_source(block: int, threads: int) -> Callable[..., None]:
    """reduce(partials, dweight): a chunk of `block` columns a block, each column's partials summed in order."""
    items = cdiv(block, threads)

    def reduce_partials(partials, dweight):  # type: ignore[no-untyped-def]
        blocks, cols = partials.shape
        t, start = cuda.threadIdx.x, cuda.blockIdx.x * block
        for k in range(items):
            c = start + t + k * threads
            if t + k * threads < block and c < cols:
                total = partials[0, c]
                for b in range(1, blocks):
                    total += partials[b, c]
                dweight[c] = total

    return reduce_partials


@functools.cache
def weight_partials_source(block: int, threads: int) -> Callable[..., None]:
    """partials(dy1, hhat, partials): on a (row blocks, chunks) grid, Σ over the block's rows of dy[1]·ĥ."""
    items = cdiv(block, threads)

    def weight_partials(dy1, hhat, partials):  # type: ignore[no-untyped-def]
        rows, cols = dy1.shape
        b, t, start = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockIdx.y * block
        per = (rows + partials.shape[0] - 1) // partials.shape[0]
        for k in range(items):
            c = start + t + k * threads
            if t + k * threads < block and c < cols:
                total = ZERO
                for r in range(b * per, min(rows, b * per + per)):
                    total += np.float32(dy1[r, c]) * np.float32(hhat[r, c])
                partials[b, c] = total

    return weight_partials


@functools.cache
def statistic_grad_source(block: int, threads: int) -> Callable[..., None]:
    """dms(dhhat, h, ms, dms): a block per row, dms = −½·(ms + eps)^(−3/2)·Σ dĥ·h."""
    block_sum = _reductions()[0]

    def statistic_grad(dhhat, h, ms, dms):  # type: ignore[no-untyped-def]
        cols = h.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        s = ZERO
        for c in range(t, cols, threads):
            s += np.float32(dhhat[row, c]) * np.float32(h[row, c])
        s = block_sum(s, smem)
        if t == 0:
            rs = ONE / math.sqrt(ms[row] + EPS32)
            dms[row] = HALF * rs * rs * rs * s

    return statistic_grad


@functools.cache
def h_grad_source(block: int, threads: int) -> Callable[..., None]:
    """h_grad(dy0, dhhat, h, ms, dms, dx, dres): on (rows, chunks), dy0 + dĥ·r + dms·2h/cols into both."""
    items = cdiv(block, threads)

    def h_grad(dy0, dhhat, h, ms, dms, dx, dres):  # type: ignore[no-untyped-def]
        cols = h.shape[1]
        row, t, start = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockIdx.y * block
        rs = ONE / math.sqrt(ms[row] + EPS32)
        d = dms[row] * (TWO / np.float32(cols))
        for k in range(items):
            c = start + t + k * threads
            if t + k * threads < block and c < cols:
                val = np.float32(dy0[row, c]) + np.float32(dhhat[row, c]) * rs + d * np.float32(h[row, c])
                dx[row, c] = val
                dres[row, c] = val

    return h_grad


SOURCES = {
    "fused forward": fused_forward_source,
    "fused backward": fused_backward_source,
    "reduce": reduce_source,
    "weight partials": weight_partials_source,
    "statistic grad": statistic_grad_source,
    "h grad": h_grad_source,
}
"""Each kernel's factory by name, as the entries build and record them."""
