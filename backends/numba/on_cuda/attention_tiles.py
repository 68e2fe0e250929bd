"""Device functions the Numba CUDA attention kernels share, and the tile layout they are built for.

A block is one (query tile of block_m rows, batch·head); its 2·block_m threads form a (block_m/4) × 8 grid:
thread (ty, tx) computes the scores of rows ty + R·a (a < 4, R = block_m/4) and keys tx + 8·b, and owns the
float32 output accumulator of those rows at dims tx + 8·e. Q and K reach shared memory 32 dims at a time, V a
few whole rows at a time (so that every index into the accumulator is a compile-time constant and it stays
in registers). The kernels themselves are `attention_kernels`; these are the pieces they have in common.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numba
import numpy as np

from backends.numba import simulating
from suite.kit.launch import cdiv

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

F32 = numba.float32
NEG_INF, ZERO, ONE = np.float32(-np.inf), np.float32(0.0), np.float32(1.0)
TC, RM, DC = 8, 4, 32
"""Thread columns, rows per thread, dims per shared chunk of Q and K."""


def config(block_m: int, block_n: int, head_dim: int) -> SimpleNamespace:
    """The launch shape and shared-memory layout of the tiled kernels.

    `buf` holds a 32-dim chunk of K (block_n rows of 33) for the scores, then KC whole rows of V (head_dim + 1
    each) at a time for P·V: KC is the largest power of two of rows that fits in the same space.
    """
    buf = block_n * (DC + 1)
    kc = 1 << int(math.log2(max(1, min(block_n, buf // (head_dim + 1)))))
    shared = 4 * (block_m * (DC + 1) + buf + block_m * (block_n + 1) + 3 * block_m + 4 * block_m)
    return SimpleNamespace(
        BM=block_m,
        BN=block_n,
        D=head_dim,
        TR=block_m // RM,
        THREADS=2 * block_m,
        CN=block_n // TC,
        CHUNKS=cdiv(head_dim, DC),
        DN=cdiv(head_dim, TC),
        BUF=buf,
        KC=kc,
        shared_bytes=shared,
    )


def _device(fn: Callable) -> Any:
    """A device function, inlined on the GPU so that the register tiles it touches stay in registers."""
    if simulating():
        return cuda.jit(device=True)(fn)
    return cuda.jit(device=True, forceinline=True)(fn)


@functools.cache
def _score_code(block_m: int, block_n: int, head_dim: int) -> Any:
    """tile_scores, the device function every tiled kernel computes its patch of a score tile with, and the
    staging of Q and K through shared memory it is built on, for one tile shape."""
    c = config(block_m, block_n, head_dim)
    BM, BN, D, TR, THREADS, CN = c.BM, c.BN, c.D, c.TR, c.THREADS, c.CN
    DCP = DC + 1  # padded rows of the shared tiles: a column walk hits every bank once

    @_device
    def load_chunk(src, b, h, row0, rows, d0, scale, dst, dst_rows, tid):  # type: ignore[no-untyped-def]
        """dst[r·33 + dd] = src[b, h, row0 + r, d0 + dd]·scale for r < rows, zeros elsewhere (dims d0..d0+31)."""
        for idx in range(tid, dst_rows * DC, THREADS):
            r, dd = idx // DC, idx % DC
            ok = r < rows and d0 + dd < D
            dst[r * DCP + dd] = np.float32(src[b, h, row0 + r, d0 + dd]) * scale if ok else ZERO

    @_device
    def chunk_scores(qc, kc, sc, ty, tx):  # type: ignore[no-untyped-def]
        for dd in range(DC):
            for a in range(RM):
                qa = qc[(ty + TR * a) * DCP + dd]
                for bb in range(CN):
                    sc[a, bb] += qa * kc[(tx + TC * bb) * DCP + dd]

    @_device
    def tile_scores(q, k, b, h, kh, q0, rows, n0, end, scale, qc, kc, sc, tid, ty, tx):  # type: ignore[no-untyped-def]
        """sc[a, bb] = q[b, h, q0 + ty + R·a]·k[b, kh, n0 + tx + 8·bb]·scale (kh: query head h's K/V head),
        staged through shared memory 32 dims at a time."""
        for a in range(RM):
            for bb in range(CN):
                sc[a, bb] = ZERO
        for d0 in range(0, D, DC):
            cuda.syncthreads()
            load_chunk(q, b, h, q0, rows, d0, scale, qc, BM, tid)
            load_chunk(k, b, kh, n0, end - n0, d0, ONE, kc, BN, tid)
            cuda.syncthreads()
            chunk_scores(qc, kc, sc, ty, tx)

    return tile_scores


@functools.cache
def tile_code(block_m: int, block_n: int, head_dim: int, causal: bool) -> SimpleNamespace:
    """Device functions shared by the tiled kernels, for one tile shape and mask."""
    c = config(block_m, block_n, head_dim)
    BM, BN, D, TR, THREADS, DN, KC = c.BM, c.BN, c.D, c.TR, c.THREADS, c.DN, c.KC
    DP = D + 1  # padded rows of the shared V tile: a column walk hits every bank once
    tile_scores = _score_code(block_m, block_n, head_dim)

    @_device
    def tile_pv(v, b, kh, n0, end, ss, vc, acc, tid, ty, tx):  # type: ignore[no-untyped-def]
        """acc[a, e] += Σ_j ss[ty + R·a, j]·v[b, kh, n0 + j, tx + 8·e] (kh: the K/V head), V staged KC whole
        rows at a time, so that every index into acc is a constant and acc stays in registers."""
        for j0 in range(0, BN, KC):
            cuda.syncthreads()
            for idx in range(tid, KC * D, THREADS):
                j, d = idx // D, idx % D
                vc[j * DP + d] = np.float32(v[b, kh, n0 + j0 + j, d]) if n0 + j0 + j < end else ZERO
            cuda.syncthreads()
            for j in range(KC):
                for a in range(RM):
                    p = ss[ty + TR * a, j0 + j]
                    for e in range(DN):
                        if tx + TC * e < D:
                            acc[a, e] += p * vc[j * DP + tx + TC * e]

    @_device
    def visible(query, key, end):  # type: ignore[no-untyped-def]
        return key < end and (not causal or key <= query)

    @_device
    def key_end(q0, seq_len):  # type: ignore[no-untyped-def]
        return min(seq_len, q0 + BM) if causal else seq_len

    return SimpleNamespace(config=c, tile_scores=tile_scores, tile_pv=tile_pv, visible=visible, key_end=key_end)
