"""The Numba CUDA kernels of row normalization: each op's fused kernel and the unfused step templates.

Kernel factories apart from the entries that size, compile and launch them (`backends.numba.on_cuda.
normalization`). Each factory returns a plain Python function (what `cuda.jit` and `cuda.compile_ptx` take),
built per (op, BLOCK, THREADS): ITEMS = BLOCK / THREADS must be a compile-time constant for the local array.

Block reductions go through shared memory in two levels (see `_reductions`), not warp shuffles: the
simulator has none. Kernels compute in float32 (np.float32 constants: a bare Python float would promote to
float64).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from scenarios.normalization import EPS, kind
from suite.kit.launch import cdiv

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

ZERO, ONE, EPS32 = np.float32(0.0), np.float32(1.0), np.float32(EPS)
NEG_INF = np.float32(-np.inf)
SUB, NORMALIZE, DIVIDE, EXP, SCALE, SCALE_SHIFT = range(6)
ELEMENTWISE_CODES = {"center": SUB, "shift": SUB, "normalize": NORMALIZE, "divide": DIVIDE, "exp": EXP,
                     "scale": SCALE, "scale_shift": SCALE_SHIFT}  # fmt: skip


@functools.cache
def _reductions() -> tuple[Any, Any]:
    """block_sum and block_max (device functions): every thread gets the block's result.

    Two levels through shared memory — 32 threads fold THREADS/32 partials each, then thread 0 folds the 32
    pairwise — so four barriers whatever the block size: the simulator's cost is its barriers, and a tree of
    THREADS would take 2 + log₂(THREADS).
    """

    def block_sum(v, smem):  # type: ignore[no-untyped-def]
        t, n = cuda.threadIdx.x, cuda.blockDim.x
        cuda.syncthreads()  # the previous reduction has read smem[0]
        smem[t] = v
        cuda.syncthreads()
        if t < 32:
            acc = smem[t]
            for j in range(t + 32, n, 32):
                acc += smem[j]
            smem[t] = acc
        cuda.syncthreads()
        if t == 0:  # a pairwise fold: rounds like a tree, without a barrier per level
            width = 16
            while width > 0:
                for j in range(width):
                    smem[j] += smem[j + width]
                width //= 2
        cuda.syncthreads()
        return smem[0]

    def block_max(v, smem):  # type: ignore[no-untyped-def]
        t, n = cuda.threadIdx.x, cuda.blockDim.x
        cuda.syncthreads()
        smem[t] = v
        cuda.syncthreads()
        if t < 32:
            acc = smem[t]
            for j in range(t + 32, n, 32):
                acc = max(acc, smem[j])
            smem[t] = acc
        cuda.syncthreads()
        if t == 0:
            width = 16
            while width > 0:
                for j in range(width):
                    smem[j] = max(smem[j], smem[j + width])
                width //= 2
        cuda.syncthreads()
        return smem[0]

    return cuda.jit(device=True)(block_sum), cuda.jit(device=True)(block_max)


@functools.cache
def fused_source(op: str, block: int, threads: int) -> Callable[..., None]:
    """The fused kernel of `op` for chunks of `block` columns held by `threads` threads."""
    return {"layernorm": _layernorm, "rmsnorm": _rmsnorm, "softmax": _softmax}[op](block, threads)


def _layernorm(block: int, threads: int) -> Callable[..., None]:
    """Chan's merge of each chunk's mean and M2, then the output from the local array (one chunk) or x re-read."""
    items, block_sum = cdiv(block, threads), _reductions()[0]

    def layernorm(x, w, b, y):  # type: ignore[no-untyped-def]
        cols = x.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        v = cuda.local.array(items, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        chunks = (cols + block - 1) // block
        mean, m2, count = ZERO, ZERO, ZERO
        for i in range(chunks):  # one chunk when cols <= block: then v is the row
            start = i * block
            n = np.float32(min(block, cols - start))
            s = ZERO
            for k in range(items):
                c = t + k * threads
                v[k] = np.float32(x[row, start + c]) if c < block and start + c < cols else ZERO
                s += v[k]
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
        rstd = ONE / math.sqrt(m2 / np.float32(cols) + EPS32)
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    val = v[k] if chunks == 1 else np.float32(x[row, start + c])  # else: the re-read
                    y[row, start + c] = (val - mean) * rstd * np.float32(w[start + c]) + np.float32(b[start + c])

    return layernorm


def _rmsnorm(block: int, threads: int) -> Callable[..., None]:
    """The row's mean square, then the output from the local array (one chunk) or x re-read."""
    items, block_sum = cdiv(block, threads), _reductions()[0]

    def rmsnorm(x, w, y):  # type: ignore[no-untyped-def]
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
                v[k] = np.float32(x[row, start + c]) if c < block and start + c < cols else ZERO
                q += v[k] * v[k]
        rstd = ONE / math.sqrt(block_sum(q, smem) / np.float32(cols) + EPS32)
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    val = v[k] if chunks == 1 else np.float32(x[row, start + c])  # else: the re-read
                    y[row, start + c] = val * rstd * np.float32(w[start + c])

    return rmsnorm


def _softmax(block: int, threads: int) -> Callable[..., None]:
    """An online max with a rescaled sum, then the output from the local array (one chunk) or x re-read."""
    items = cdiv(block, threads)
    block_sum, block_max = _reductions()

    def softmax(x, y):  # type: ignore[no-untyped-def]
        cols = x.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        v = cuda.local.array(items, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        chunks = (cols + block - 1) // block
        m, total = NEG_INF, ZERO
        for i in range(chunks):  # online softmax: rescale the running sum when the max grows
            start = i * block
            mc = NEG_INF
            for k in range(items):
                c = t + k * threads
                v[k] = np.float32(x[row, start + c]) if c < block and start + c < cols else NEG_INF
                mc = max(mc, v[k])
            m_new = max(m, block_max(mc, smem))
            s = ZERO
            for k in range(items):
                v[k] = math.exp(v[k] - m_new)  # exp(-inf) = 0 for the items past the row
                s += v[k]
            total = total * math.exp(m - m_new) + block_sum(s, smem)
            m = m_new
        inv = ONE / total
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    e = v[k] if chunks == 1 else math.exp(np.float32(x[row, start + c]) - m)  # else: the re-read
                    y[row, start + c] = e * inv

    return softmax


@functools.cache
def step_source(op: str, block: int, threads: int) -> Callable[..., None]:
    """One unfused step: a row reduction, or an elementwise kernel on (rows, chunks)."""
    return (_reduce_source if kind(op) == "reduce" else _pointwise_source)(op, block, threads)


def _reduce_source(op: str, block: int, threads: int) -> Callable[..., None]:
    """stat[row] = mean, mean square, max or sum of the row: a strided loop per thread, then the block's."""
    block_sum, block_max = _reductions()
    is_max, square, average = op == "max", op == "mean_square", op in ("mean", "mean_square")

    def reduce_rows(src, stat):  # type: ignore[no-untyped-def]
        cols = src.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        acc = NEG_INF if is_max else ZERO
        for c in range(t, cols, threads):
            val = np.float32(src[row, c])
            acc = max(acc, val) if is_max else acc + (val * val if square else val)
        acc = block_max(acc, smem) if is_max else block_sum(acc, smem)
        if t == 0:
            stat[row] = acc / np.float32(cols) if average else acc

    return reduce_rows


def _pointwise_source(op: str, block: int, threads: int) -> Callable[..., None]:
    """dst = src with the step's op applied, a row statistic or weight and bias at hand; a chunk per block."""
    items = cdiv(block, threads)
    code = ELEMENTWISE_CODES[op]  # an int: string comparisons do not compile for CUDA

    def pointwise(src, stat, w, b, dst):  # type: ignore[no-untyped-def]
        cols = src.shape[1]
        row, t, start = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockIdx.y * block
        s = ZERO
        if code == SUB:
            s = stat[row]
        elif code == NORMALIZE:
            s = ONE / math.sqrt(stat[row] + EPS32)
        elif code == DIVIDE:
            s = ONE / stat[row]
        for k in range(items):
            c = start + t + k * threads
            if t + k * threads < block and c < cols:
                val = np.float32(src[row, c])
                if code == SUB:
                    val = val - s
                elif code == NORMALIZE or code == DIVIDE:  # noqa: SIM109 - two int compares on CUDA
                    val = val * s
                elif code == EXP:
                    val = math.exp(val)
                elif code == SCALE:
                    val = val * np.float32(w[c])
                else:
                    val = val * np.float32(w[c]) + np.float32(b[c])
                dst[row, c] = val

    return pointwise
