"""The Numba CUDA kernels of add_rmsnorm: the fused kernel and the unfused residual add, as plain Python functions
(what `cuda.jit` and `cuda.compile_ptx` take), built per (BLOCK, THREADS) like normalization's.

The fused kernel is rmsnorm's (`normalization_kernels._rmsnorm`) with the add in front: a block owns a row, each
thread holds ITEMS = BLOCK / THREADS values of h = x + residual in a local array, stores h as it forms it and
writes y from the local array when the row is one chunk; a wider row is walked again, x and residual re-read and
h recomputed. The block sum is normalization's shared-memory reduction (the simulator has no warp shuffles).
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
def fused_source(block: int, threads: int) -> Callable[..., None]:
    """The fused kernel for chunks of `block` columns held by `threads` threads."""
    items, block_sum = cdiv(block, threads), _reductions()[0]

    def add_rmsnorm(x, res, w, h, y):  # type: ignore[no-untyped-def]
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
        rstd = ONE / math.sqrt(block_sum(q, smem) / np.float32(cols) + EPS32)
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    again = np.float32(x[row, start + c]) + np.float32(res[row, start + c]) if chunks > 1 else ZERO
                    val = v[k] if chunks == 1 else again  # else: the re-read of x and residual
                    y[row, start + c] = val * rstd * np.float32(w[start + c])

    return add_rmsnorm


@functools.cache
def add_source(block: int, threads: int) -> Callable[..., None]:
    """h = x + residual in float32 on a (rows, chunks) grid, a chunk of `block` columns per block."""
    items = cdiv(block, threads)

    def residual_add(x, res, h):  # type: ignore[no-untyped-def]
        cols = x.shape[1]
        row, t, start = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockIdx.y * block
        for k in range(items):
            c = start + t + k * threads
            if t + k * threads < block and c < cols:
                h[row, c] = np.float32(x[row, c]) + np.float32(res[row, c])

    return residual_add
