"""The Numba CUDA attention kernels: a flash-style fused kernel, and scores, row-softmax and P·V kernels.

Kernel factories apart from the entries that compile, record and launch them (`backends.numba.on_cuda.
attention`, whose docstring describes the design). Each returns a plain Python function (what `cuda.jit` and
`cuda.compile_ptx` take) for one tile shape, head_dim and mask: the shapes of the shared and local arrays
must be compile-time constants. The tiled kernels are built on the device functions of `attention_tiles`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from backends.numba.on_cuda.attention_tiles import DC, F32, NEG_INF, ONE, RM, TC, ZERO, tile_code

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

ROW_THREADS, ROWS = 8, 16
"""Softmax: threads per row, rows per block."""


def kernel_sources_for(block_m: int, block_n: int, head_dim: int, causal: bool) -> dict[str, Callable[..., None]]:
    """The kernels as Python functions (what `cuda.jit` and `cuda.compile_ptx` take), for one tile shape."""
    shape = (block_m, block_n, head_dim, causal)
    return {
        "flash": _flash_source(*shape),
        "scores": _scores_source(*shape),
        "pv": _pv_source(*shape),
        "softmax": softmax_source(causal),
    }


@functools.cache
def _flash_source(block_m: int, block_n: int, head_dim: int, causal: bool) -> Callable[..., None]:
    """The fused kernel, a kernel factory whose kernel is one unit: per query tile, the key tiles streamed
    through with an online softmax (running max and sum, accumulator rescaled), nothing L×L stored."""
    t = tile_code(block_m, block_n, head_dim, causal)
    c = t.config
    BM, BN, D, TR, CN, DN, BUF = c.BM, c.BN, c.D, c.TR, c.CN, c.DN, c.BUF
    BNP, QBUF = BN + 1, BM * (DC + 1)  # shapes must be constants, not expressions
    tile_scores, tile_pv, visible, key_end = t.tile_scores, t.tile_pv, t.visible, t.key_end

    def flash(q, k, v, out, scale):  # type: ignore[no-untyped-def]
        heads, seq_len = q.shape[1], q.shape[2]
        tid, q0 = cuda.threadIdx.x, cuda.blockIdx.x * BM
        b, h, ty, tx = cuda.blockIdx.y // heads, cuda.blockIdx.y % heads, tid // TC, tid % TC
        kh = h // (heads // k.shape[1])  # the K/V head of query head h
        qc = cuda.shared.array(QBUF, F32)
        buf = cuda.shared.array(BUF, F32)  # a chunk of K, then rows of V
        ss = cuda.shared.array((BM, BNP), F32)
        stats = cuda.shared.array((3, BM), F32)  # running max, running sum, this tile's rescale factor
        part = cuda.shared.array((2, BM, 2), F32)  # partial max and sum of two threads per row
        sc = cuda.local.array((RM, CN), F32)
        acc = cuda.local.array((RM, DN), F32)
        for a in range(RM):
            for e in range(DN):
                acc[a, e] = ZERO
        if tid < BM:
            stats[0, tid], stats[1, tid] = NEG_INF, ZERO
        rows, end = min(BM, seq_len - q0), key_end(q0, seq_len)
        r, half = tid // 2, tid % 2
        for n0 in range(0, end, BN):
            tile_scores(q, k, b, h, kh, q0, rows, n0, end, scale, qc, buf, sc, tid, ty, tx)
            for a in range(RM):
                for bb in range(CN):
                    j = tx + TC * bb
                    ss[ty + TR * a, j] = sc[a, bb] if visible(q0 + ty + TR * a, n0 + j, end) else NEG_INF
            cuda.syncthreads()
            top = NEG_INF
            for j in range(half, BN, 2):
                top = max(top, ss[r, j])
            part[0, r, half] = top
            cuda.syncthreads()
            top = max(stats[0, r], max(part[0, r, 0], part[0, r, 1]))  # finite: key 0 is in the first tile
            total = ZERO
            for j in range(half, BN, 2):
                ss[r, j] = math.exp(ss[r, j] - top)
                total += ss[r, j]
            part[1, r, half] = total
            cuda.syncthreads()
            if half == 0:
                alpha = math.exp(stats[0, r] - top)
                stats[0, r], stats[1, r], stats[2, r] = top, stats[1, r] * alpha + part[1, r, 0] + part[1, r, 1], alpha
            cuda.syncthreads()
            for a in range(RM):
                for e in range(DN):
                    acc[a, e] *= stats[2, ty + TR * a]
            tile_pv(v, b, kh, n0, end, ss, buf, acc, tid, ty, tx)
        for a in range(RM):
            row = ty + TR * a
            if row < rows:
                inv = ONE / stats[1, row]
                for e in range(DN):
                    if tx + TC * e < D:
                        out[b, h, q0 + row, tx + TC * e] = acc[a, e] * inv

    return flash


@functools.cache
def _scores_source(block_m: int, block_n: int, head_dim: int, causal: bool) -> Callable[..., None]:
    """Unfused S = Q·Kᵀ·scale, tile by tile; masked scores are not stored."""
    t = tile_code(block_m, block_n, head_dim, causal)
    c = t.config
    BM, BN, TR, CN, BUF = c.BM, c.BN, c.TR, c.CN, c.BUF
    QBUF = BM * (DC + 1)  # shapes must be constants, not expressions
    tile_scores, visible, key_end = t.tile_scores, t.visible, t.key_end

    def scores(q, k, s, scale):  # type: ignore[no-untyped-def]
        heads, seq_len = q.shape[1], q.shape[2]
        tid, q0 = cuda.threadIdx.x, cuda.blockIdx.x * BM
        b, h, ty, tx = cuda.blockIdx.y // heads, cuda.blockIdx.y % heads, tid // TC, tid % TC
        kh = h // (heads // k.shape[1])  # the K/V head of query head h
        qc = cuda.shared.array(QBUF, F32)
        kc = cuda.shared.array(BUF, F32)
        sc = cuda.local.array((RM, CN), F32)
        rows, end = min(BM, seq_len - q0), key_end(q0, seq_len)
        for n0 in range(0, end, BN):
            tile_scores(q, k, b, h, kh, q0, rows, n0, end, scale, qc, kc, sc, tid, ty, tx)
            for a in range(RM):
                for bb in range(CN):
                    i, j = q0 + ty + TR * a, n0 + tx + TC * bb
                    if i < seq_len and visible(i, j, end):  # masked scores are not stored
                        s[b, h, i, j] = sc[a, bb]

    return scores


@functools.cache
def _pv_source(block_m: int, block_n: int, head_dim: int, causal: bool) -> Callable[..., None]:
    """Unfused O = P·V: P tiles loaded into the shared tile the fused kernel keeps its probabilities in."""
    t = tile_code(block_m, block_n, head_dim, causal)
    c = t.config
    BM, BN, D, TR, THREADS, DN, BUF = c.BM, c.BN, c.D, c.TR, c.THREADS, c.DN, c.BUF
    BNP = BN + 1  # shapes must be constants, not expressions
    tile_pv, visible, key_end = t.tile_pv, t.visible, t.key_end

    def pv(p, v, out):  # type: ignore[no-untyped-def]
        heads, seq_len = out.shape[1], out.shape[2]
        tid, q0 = cuda.threadIdx.x, cuda.blockIdx.x * BM
        b, h, ty, tx = cuda.blockIdx.y // heads, cuda.blockIdx.y % heads, tid // TC, tid % TC
        kh = h // (heads // v.shape[1])  # the K/V head of query head h
        vc = cuda.shared.array(BUF, F32)
        ss = cuda.shared.array((BM, BNP), F32)
        acc = cuda.local.array((RM, DN), F32)
        for a in range(RM):
            for e in range(DN):
                acc[a, e] = ZERO
        rows, end = min(BM, seq_len - q0), key_end(q0, seq_len)
        for n0 in range(0, end, BN):
            cuda.syncthreads()
            for idx in range(tid, BM * BN, THREADS):  # masked probabilities are zero, never read
                i, j = idx // BN, idx % BN
                seen = i < rows and visible(q0 + i, n0 + j, end)
                ss[i, j] = np.float32(p[b, h, q0 + i, n0 + j]) if seen else ZERO
            tile_pv(v, b, kh, n0, end, ss, vc, acc, tid, ty, tx)
        for a in range(RM):
            row = ty + TR * a
            if row < rows:
                for e in range(DN):
                    if tx + TC * e < D:
                        out[b, h, q0 + row, tx + TC * e] = acc[a, e]

    return pv


@functools.cache
def softmax_source(causal: bool) -> Callable[..., None]:
    """ROW_THREADS threads per row of S, ROWS rows per block: a strided online max and sum per thread, a tree
    reduction in shared memory, then P. A warp reads four rows, 32 contiguous bytes of each, per load."""

    def softmax(s, p):  # type: ignore[no-untyped-def]
        heads, seq_len = s.shape[1], s.shape[2]
        tid = cuda.threadIdx.x
        lane, slot = tid % ROW_THREADS, tid // ROW_THREADS
        row = cuda.blockIdx.x * ROWS + slot
        b, h, i = row // (heads * seq_len), (row // seq_len) % heads, row % seq_len
        red = cuda.shared.array((2, ROWS, ROW_THREADS), F32)
        n = 0 if row >= s.shape[0] * heads * seq_len else i + 1 if causal else seq_len
        m, total = NEG_INF, ZERO
        for j in range(lane, n, ROW_THREADS):
            x = np.float32(s[b, h, i, j])
            top = max(m, x)
            total = total * math.exp(m - top) + math.exp(x - top)
            m = top
        red[0, slot, lane], red[1, slot, lane] = m, total
        step = ROW_THREADS // 2
        while step > 0:
            cuda.syncthreads()
            if lane < step:
                m0, m1 = red[0, slot, lane], red[0, slot, lane + step]
                top = max(m0, m1)
                if top != NEG_INF:  # a thread with no element holds (-inf, 0)
                    red[1, slot, lane] = red[1, slot, lane] * math.exp(m0 - top) + red[1, slot, lane + step] * math.exp(
                        m1 - top
                    )
                    red[0, slot, lane] = top
            step //= 2
        cuda.syncthreads()
        if n > 0:
            top, inv = red[0, slot, 0], ONE / red[1, slot, 0]
            for j in range(lane, n, ROW_THREADS):
                p[b, h, i, j] = math.exp(np.float32(s[b, h, i, j]) - top) * inv

    return softmax
