"""The Numba CPU kernels of add_rmsnorm: the fused kernel and the unfused residual add.

The rmsnorm steps of the unfused variant are the normalization family's own step kernels (`normalization_kernels.
step_kernel`), reused as they are; only the add is new. The fused kernel follows rmsnorm's fused kernel: where a
row fits one chunk (cols ≤ tile) the rows of a block are software-pipelined (`normalization_blocks` explains
why) — one loop stores row i's y while it computes row i+1's h = x + residual, stores it and sums its squares.
y is computed from h in float32, never from h rounded to storage: float32 storage holds h exactly, so row i's h
is read back from where it was stored (in L1/L2, one row earlier); half storage rounded it, so it is recomputed
from x and residual, read again from L1/L2 (the same float32 sum). A wider row is walked chunk by chunk for its
sum of squares (storing h as it goes) and then once more, recomputing h from x and residual: the ledger's re-read.
Same fast-math flags as normalization (`reassoc` for vector lanes in the sums, `contract` for FMA).

What a row costs beyond its loads and stores decides whether one core keeps up with memory, and the pipelined
loop is built to add as little as it can (on the 2-core CI host, one thread, float32, 1,823 rows of 4,096 or
8,192 columns, in DRAM: from 69–74% of an ordinary-store copy of the same bytes to 85%; 64 rows, in cache: from
46–56 GB/s to 55–65):

- no scratch row: the earlier kernel also kept row i+1's h in a per-thread float32 buffer, a third store stream
  beside h and y; stores are what limit the loop in cache (a 512-bit store takes two cycles, loads go two a
  cycle), and the buffer's loads and stores were one more stream through L1/L2 at DRAM sizes;
- the next row's x and residual are loaded before either store: x, residual, h and y are allocated alike, so at
  the same column their addresses agree in the low 12 bits, and a load issued after a store with those bits
  may wait on it (4K aliasing) — loads first cost nothing and gained 1–8% in a bare loop of these streams;
- the row loops are inlined into the block loop (`inline="always"`): no call per row, and no runtime alias
  checks rebuilt per row;
- each row's first elements are taken apart (`arrays.line_segments`) so that the vector loop stores whole cache
  lines of y and h: NumPy puts a large array 16 bytes past a line, so a 512-bit loop from a row's first element
  split every store across two lines. That split, not the streams, was what kept the loop at 69–83% of the copy:
  with it gone the kernel ran 1.4–1.5× faster at 4,096 and 8,192 columns (interleaved on fresh buffers, old kernel
  against new; no gain at 1,024 columns, where rows stay in cache; built for AVX2 with `NUMBA_CPU_NAME=znver3`, 256
  bits wide, on the same host: 1.26–1.54×) and read 93–103% of the copy ceiling in
  `results/add_rmsnorm_emeraldrapids/` (76–104% in its rerun). The unfused add stores whole lines the same way (it
  gained 1–5%); rmsnorm's step kernels, which unfused runs after it, gained nothing from it (0.90–1.02×, the three
  steps timed old against new at 1,024 to 8,192 columns: one store stream each), so they were left as they were and
  fusion is not credited with the alignment.

Before the stores were aligned, this is what the loop was measured against (the figures below are of that kernel):
the re-read of row i's h and the weight, two streams from L2 beside the four from memory: a bare loop storing h and
y of the same row from x and residual runs at the copy's rate, one that also reads the previous row's h at 94%, and
the weight costs about 8% more. How much depends on what the host's memory gives. Interleaved (order rotated each
round, every call on buffers no other call has in cache), 1,823 × 4,096, float32: when an ordinary-store copy read
56–57 GB/s, the bare loop ran at 100% of it, the bare loop that also reads the previous row's h at 82–86%, and the
weight too 80–82%; this kernel 77–80%, at the bound of its streams. When the copy read 36 GB/s: 100%, 96%, 97%, and
this kernel 91–92%. The re-read is the pipeline itself (row i's y waits for row i's sum of squares). Prefetching the
next rows did not help, and splitting the loop in chunks (to prefetch the re-read lines a chunk ahead) lost a third
of its speed before any prefetch.

In half precision the recompute costs two conversions per value where the buffer cost a float32 store and load:
rows of 1,024 columns in cache lose about 4%, rows in DRAM gain 7–10 points of the copy.
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.on_cpu.arrays import line_segments
from backends.numba.on_cpu.normalization_kernels import FASTMATH
from backends.numba.on_cpu.normalization_rows import reciprocal_std
from backends.numba.ops import VECTOR_CODECS, ZERO


@functools.cache
def add_kernel(dtype: str) -> Any:
    """h = x + residual, row by row in float32, stored in `dtype`, whole lines of h from each row's head on
    (`arrays.line_segments`), as the fused kernel stores them."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def residual_add(x, res, h):  # type: ignore[no-untyped-def]
        rows = x.shape[0]
        for r in prange(rows):
            for a, b in line_segments(h[r]):
                xs, rs, hs = x[r, a:b], res[r, a:b], h[r, a:b]
                for j in range(xs.size):
                    hs[j] = store(load(xs[j]) + load(rs[j]))

    return residual_add


@functools.cache
def _rows(dtype: str) -> tuple[Any, Any, Any]:
    """The loops of a row, inlined where they are called: (h of a row stored, with its sum of squares; the
    pipelined loop; y of a row)."""
    load, store = VECTOR_CODECS[dtype]
    if dtype == "float32":

        @register_jitable(inline="always")
        def h_again(xr, rr, hr, j):  # type: ignore[no-untyped-def]
            """h[j] of a row stored one row earlier: float32 storage holds h exactly, so it is read back."""
            return hr[j]

    else:

        @register_jitable(inline="always")
        def h_again(xr, rr, hr, j):  # type: ignore[no-untyped-def]
            """h[j] of a row stored one row earlier: storage rounded it, so it is recomputed in float32."""
            return load(xr[j]) + load(rr[j])

    @register_jitable(inline="always")
    def add_square(xr, rr, hr):  # type: ignore[no-untyped-def]
        total = ZERO
        for a, b in line_segments(hr):
            xs, rs, hs = xr[a:b], rr[a:b], hr[a:b]
            for j in range(xs.size):
                v = load(xs[j]) + load(rs[j])
                hs[j] = store(v)
                total += v * v
        return total

    @register_jitable(inline="always")
    def output_then_add_square(xr, rr, hr, yr, rstd, wf, xn, rn, hn):  # type: ignore[no-untyped-def]
        """y of this row from its h in float32; h of the next row stored, and its sum of squares. The next
        row's values are loaded before either store (see the module's docstring); the row's head is taken
        apart so that the vector loop stores whole lines of y and of the next h."""
        total = ZERO
        for a, b in line_segments(yr):
            xs, rs, hs, ys, ws = xr[a:b], rr[a:b], hr[a:b], yr[a:b], wf[a:b]
            xns, rns, hns = xn[a:b], rn[a:b], hn[a:b]
            for j in range(xs.size):
                v = load(xns[j]) + load(rns[j])
                ys[j] = store(h_again(xs, rs, hs, j) * rstd * ws[j])
                hns[j] = store(v)
                total += v * v
        return total

    @register_jitable(inline="always")
    def output(xr, rr, hr, yr, rstd, wf):  # type: ignore[no-untyped-def]
        for a, b in line_segments(yr):
            xs, rs, hs, ys, ws = xr[a:b], rr[a:b], hr[a:b], yr[a:b], wf[a:b]
            for j in range(xs.size):
                ys[j] = store(h_again(xs, rs, hs, j) * rstd * ws[j])

    return add_square, output_then_add_square, output


@functools.cache
def _wide_row(dtype: str) -> Any:
    """One row wider than `tile`: chunk by chunk h stored and its squares summed, then x and residual re-read."""
    load, store = VECTOR_CODECS[dtype]

    @register_jitable(inline="always")
    def wide_row(xr, rr, hr, yr, wf, tile):  # type: ignore[no-untyped-def]
        cols = xr.size
        total = ZERO
        for a, b in line_segments(hr):  # whole lines of h in the second; a tile is a whole number of lines
            for start in range(a, b, tile):
                stop = min(start + tile, b)
                xs, rs, hs = xr[start:stop], rr[start:stop], hr[start:stop]
                part = ZERO
                for j in range(xs.size):
                    v = load(xs[j]) + load(rs[j])
                    hs[j] = store(v)
                    part += v * v
                total += part
        rstd = reciprocal_std(total / np.float32(cols))
        for a, b in line_segments(yr):  # the re-read
            xs, rs, ys, ws = xr[a:b], rr[a:b], yr[a:b], wf[a:b]
            for j in range(xs.size):
                ys[j] = store((load(xs[j]) + load(rs[j])) * rstd * ws[j])

    return wide_row


BLOCKS_PER_THREAD = 32
"""Pipelined blocks of rows per thread. More than normalization's 8: shorter blocks (29 rows of 1,823 on 2
threads) leave less of a tail to the other thread when one is slowed by a neighbour on a shared host, and a
block's fill (its first row read alone) is still 3% of its rows. Interleaved on fresh buffers, 8 and 32 ran
within 2% of each other at 1,823 × 1,024 and × 4,096: a choice for shared hosts, not a measured gain."""


@functools.cache
def fused_kernel(dtype: str) -> Any:
    """fused(x, res, weight, h, y, wf) for rows that fit one tile: h and y in one parallel loop over pipelined
    blocks of rows; wf is the weight converted to float32 (scratch of cols values).

    Rows wider than the tile take `fused_wide_kernel`, a kernel of its own: the launcher knows the width when it
    builds, so neither kernel carries the other's loop.
    """
    load = VECTOR_CODECS[dtype][0]
    add_square, output_then_add_square, output = _rows(dtype)

    @njit(parallel=True, fastmath=FASTMATH)
    def add_rmsnorm_fused(x, res, weight, h, y, wf):  # type: ignore[no-untyped-def]
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
                    total = output_then_add_square(
                        x[r], res[r], h[r], y[r], reciprocal_std(total / n), wf, x[r + 1], res[r + 1], h[r + 1]
                    )
                output(x[r1 - 1], res[r1 - 1], h[r1 - 1], y[r1 - 1], reciprocal_std(total / n), wf)

    return add_rmsnorm_fused


@functools.cache
def fused_wide_kernel(dtype: str) -> Any:
    """fused_wide(x, res, weight, h, y, tile, wf) for rows wider than `tile`: a row per iteration, walked
    chunk by chunk (`_wide_row`)."""
    load = VECTOR_CODECS[dtype][0]
    wide_row = _wide_row(dtype)

    @njit(parallel=True, fastmath=FASTMATH)
    def add_rmsnorm_fused_wide(x, res, weight, h, y, tile, wf):  # type: ignore[no-untyped-def]
        for j in range(x.shape[1]):
            wf[j] = load(weight[j])
        for r in prange(x.shape[0]):
            wide_row(x[r], res[r], h[r], y[r], wf, tile)

    return add_rmsnorm_fused_wide
