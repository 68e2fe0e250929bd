"""Attention on CUDA with Numba: a flash-style fused kernel against scores, row-softmax and P·V kernels.

A block is one (query tile of block_m rows, batch·head) in every kernel but the softmax (16 rows a block,
8 threads a row). Its 2·block_m threads form a (block_m/4) × 8 grid: thread (ty, tx) computes the scores of
rows ty + R·a (a < 4, R = block_m/4) and keys tx + 8·b, and owns the float32 output accumulator of those
rows at dims tx + 8·e. Q and K reach shared memory 32 dims at a time, V a few whole rows at a time (so that
every index into the accumulator is a compile-time constant and it stays in registers), all through buffers
whose size does not depend on head_dim: (block_m + block_n)·33 + block_m·(block_n + 1) + 7·block_m floats,
35 KB at 64 × 64, under the 48 KB of static shared memory a Numba kernel can have. Scores and probabilities
sit in the shared tile `ss` between phases; two threads per row reduce its max and sum there.

Fused, the block keeps the running max m, sum l and accumulator across key tiles and rescales them by
exp(m_old - m_new) (the online softmax). Unfused, the scores kernel stores the tile to S, the softmax kernel
writes P, and the P·V kernel loads P tiles into the same shared tile: the same code on both sides of the
device-memory boundary. Masked elements of S and P are neither stored nor read. Both run in the simulator.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numba
import numpy as np

from backends.numba import simulating, stream_arg
from backends.numba.record import record_numba
from suite.core.launch import cdiv
from suite.core.registry import Launcher, kernel

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

DTYPES = ("float32", "float16")
F32 = numba.float32
NEG_INF, ZERO, ONE = np.float32(-np.inf), np.float32(0.0), np.float32(1.0)
TC, RM, DC = 8, 4, 32
"""Thread columns, rows per thread, dims per shared chunk of Q and K."""
ROW_THREADS, ROWS = 8, 16
"""Softmax: threads per row, rows per block."""
SHARED_LIMIT = 48 * 1024
"""Static shared memory a Numba kernel may use (more needs an opt-in Numba cannot make)."""


def config(block_m: int, block_n: int, head_dim: int) -> SimpleNamespace:
    """The launch shape and shared-memory layout of the tiled kernels.

    `buf` holds a 32-dim chunk of K (block_n rows of 33) for the scores, then KC whole rows of V (head_dim + 1
    each) at a time for P·V: KC is the largest power of two of rows that fits in the same space.
    """
    buf = block_n * (DC + 1)
    kc = 1 << int(math.log2(max(1, min(block_n, buf // (head_dim + 1)))))
    shared = 4 * (block_m * (DC + 1) + buf + block_m * (block_n + 1) + 3 * block_m + 4 * block_m)
    return SimpleNamespace(
        BM=block_m, BN=block_n, D=head_dim, TR=block_m // RM, THREADS=2 * block_m, CN=block_n // TC,
        CHUNKS=cdiv(head_dim, DC), DN=cdiv(head_dim, TC), BUF=buf, KC=kc, shared_bytes=shared,
    )  # fmt: skip


def _device(fn: Callable) -> Any:
    """A device function, inlined on the GPU so that the register tiles it touches stay in registers."""
    if simulating():
        return cuda.jit(device=True)(fn)
    return cuda.jit(device=True, forceinline=True)(fn)


@functools.cache
def _tile_code(block_m: int, block_n: int, head_dim: int, causal: bool) -> SimpleNamespace:
    """Device functions shared by the tiled kernels, for one tile shape and mask."""
    c = config(block_m, block_n, head_dim)
    BM, BN, D, TR, THREADS, CN, DN, KC = c.BM, c.BN, c.D, c.TR, c.THREADS, c.CN, c.DN, c.KC
    DCP, DP = DC + 1, D + 1  # padded rows of the shared tiles: a column walk hits every bank once

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
    def tile_scores(q, k, b, h, q0, rows, n0, end, scale, qc, kc, sc, tid, ty, tx):  # type: ignore[no-untyped-def]
        """sc[a, bb] = q[q0 + ty + R·a]·k[n0 + tx + 8·bb]·scale, staged through shared memory 32 dims at a time."""
        for a in range(RM):
            for bb in range(CN):
                sc[a, bb] = ZERO
        for d0 in range(0, D, DC):
            cuda.syncthreads()
            load_chunk(q, b, h, q0, rows, d0, scale, qc, BM, tid)
            load_chunk(k, b, h, n0, end - n0, d0, ONE, kc, BN, tid)
            cuda.syncthreads()
            chunk_scores(qc, kc, sc, ty, tx)

    @_device
    def tile_pv(v, b, h, n0, end, ss, vc, acc, tid, ty, tx):  # type: ignore[no-untyped-def]
        """acc[a, e] += Σ_j ss[ty + R·a, j]·v[n0 + j, tx + 8·e], V staged KC whole rows at a time, so that
        every index into acc is a constant and acc stays in registers."""
        for j0 in range(0, BN, KC):
            cuda.syncthreads()
            for idx in range(tid, KC * D, THREADS):
                j, d = idx // D, idx % D
                vc[j * DP + d] = np.float32(v[b, h, n0 + j0 + j, d]) if n0 + j0 + j < end else ZERO
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


@functools.cache
def kernel_sources_for(block_m: int, block_n: int, head_dim: int, causal: bool) -> dict[str, Callable[..., None]]:
    """The kernels as Python functions (what `cuda.jit` and `cuda.compile_ptx` take), for one tile shape."""
    t = _tile_code(block_m, block_n, head_dim, causal)
    c = t.config
    BM, BN, D, TR, THREADS, CN, DN, BUF = c.BM, c.BN, c.D, c.TR, c.THREADS, c.CN, c.DN, c.BUF
    BNP, QBUF = BN + 1, BM * (DC + 1)  # shapes must be constants, not expressions
    tile_scores, tile_pv, visible, key_end = t.tile_scores, t.tile_pv, t.visible, t.key_end

    def flash(q, k, v, out, scale):  # type: ignore[no-untyped-def]
        heads, seq_len = q.shape[1], q.shape[2]
        tid, q0 = cuda.threadIdx.x, cuda.blockIdx.x * BM
        b, h, ty, tx = cuda.blockIdx.y // heads, cuda.blockIdx.y % heads, tid // TC, tid % TC
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
            tile_scores(q, k, b, h, q0, rows, n0, end, scale, qc, buf, sc, tid, ty, tx)
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
            tile_pv(v, b, h, n0, end, ss, buf, acc, tid, ty, tx)
        for a in range(RM):
            row = ty + TR * a
            if row < rows:
                inv = ONE / stats[1, row]
                for e in range(DN):
                    if tx + TC * e < D:
                        out[b, h, q0 + row, tx + TC * e] = acc[a, e] * inv

    def scores(q, k, s, scale):  # type: ignore[no-untyped-def]
        heads, seq_len = q.shape[1], q.shape[2]
        tid, q0 = cuda.threadIdx.x, cuda.blockIdx.x * BM
        b, h, ty, tx = cuda.blockIdx.y // heads, cuda.blockIdx.y % heads, tid // TC, tid % TC
        qc = cuda.shared.array(QBUF, F32)
        kc = cuda.shared.array(BUF, F32)
        sc = cuda.local.array((RM, CN), F32)
        rows, end = min(BM, seq_len - q0), key_end(q0, seq_len)
        for n0 in range(0, end, BN):
            tile_scores(q, k, b, h, q0, rows, n0, end, scale, qc, kc, sc, tid, ty, tx)
            for a in range(RM):
                for bb in range(CN):
                    i, j = q0 + ty + TR * a, n0 + tx + TC * bb
                    if i < seq_len and visible(i, j, end):  # masked scores are not stored
                        s[b, h, i, j] = sc[a, bb]

    def pv(p, v, out):  # type: ignore[no-untyped-def]
        heads, seq_len = v.shape[1], v.shape[2]
        tid, q0 = cuda.threadIdx.x, cuda.blockIdx.x * BM
        b, h, ty, tx = cuda.blockIdx.y // heads, cuda.blockIdx.y % heads, tid // TC, tid % TC
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
            tile_pv(v, b, h, n0, end, ss, vc, acc, tid, ty, tx)
        for a in range(RM):
            row = ty + TR * a
            if row < rows:
                for e in range(DN):
                    if tx + TC * e < D:
                        out[b, h, q0 + row, tx + TC * e] = acc[a, e]

    return {"flash": flash, "scores": scores, "pv": pv, "softmax": softmax_source(causal)}


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


def kernel_sources(variant: str, params: dict, dtype: str) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    fns = kernel_sources_for(int(params["block_m"]), int(params["block_n"]), int(params["head_dim"]),
                             bool(params["causal"]))  # fmt: skip
    a = f"{dtype}[:, :, :, ::1]"
    sigs = {
        "flash": f"void({a}, {a}, {a}, {a}, float32)",
        "scores": f"void({a}, {a}, {a}, float32)",
        "softmax": f"void({a}, {a})",
        "pv": f"void({a}, {a}, {a})",
    }
    names = ["flash"] if variant == "fused" else ["scores", "softmax", "pv"]
    return {name: (fns[name], sigs[name]) for name in names}


@functools.cache
def _dispatcher(name: str, block_m: int, block_n: int, head_dim: int, causal: bool) -> Any:
    return cuda.jit(kernel_sources_for(block_m, block_n, head_dim, causal)[name])


def _launcher(steps: list[tuple[str, tuple, int, tuple]], params: dict, opts: dict) -> Launcher:
    """Compile (on a GPU) and configure every step: (kernel name, grid, threads, args); launching is all left."""
    key = (int(params["block_m"]), int(params["block_n"]), int(params["head_dim"]), bool(params["causal"]))
    c = config(*key[:3])
    if c.shared_bytes > SHARED_LIMIT:
        raise ValueError(
            f"numba/cuda attention: tiles {key[0]}×{key[1]} need {c.shared_bytes} bytes of shared memory, over "
            f"the {SHARED_LIMIT} a Numba kernel may use; use smaller block_m or block_n"
        )
    stream, prepared = stream_arg(opts.get("stream")), []
    for name, grid, threads, args in steps:
        dispatcher = _dispatcher(name, *key)
        compiled = None
        if not simulating():
            compiled = dispatcher.compile(tuple(numba.typeof(a) for a in args))
        record_numba((__name__, "_dispatcher", (name, *key)), args, threads, name=name, compiled=compiled)
        prepared.append((dispatcher, grid, threads, args))

    def launch() -> None:
        for dispatcher, grid, threads, args in prepared:
            dispatcher[grid, threads, stream](*args)

    return launch


def _check(inputs: dict[str, Any], out: Any) -> None:
    if str(out.dtype) not in DTYPES or any(inputs[n].dtype != out.dtype for n in ("q", "k", "v")):
        raise ValueError(f"numba/cuda attention: q, k, v and out must share one dtype of {DTYPES}")


def _grid(params: dict) -> tuple[int, int]:
    return cdiv(params["seq_len"], params["block_m"]), params["batch"] * params["heads"]


@kernel(scenario="attention", backend="numba", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One kernel: per query tile, K and V streamed through in tiles, online softmax, nothing L×L stored."""
    _check(inputs, out)
    scale = np.float32(1.0 / math.sqrt(params["head_dim"]))
    args = (inputs["q"], inputs["k"], inputs["v"], out, scale)
    return _launcher([("flash", _grid(params), 2 * params["block_m"], args)], params, opts)


@kernel(scenario="attention", backend="numba", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """Scores, softmax and P·V as three kernels; S and P (L×L per head) stored in the case's dtype."""
    _check(inputs, out)
    shape = (params["batch"], params["heads"], params["seq_len"], params["seq_len"])
    s, p = cuda.device_array(shape, dtype=out.dtype), cuda.device_array(shape, dtype=out.dtype)
    scale, grid, threads = np.float32(1.0 / math.sqrt(params["head_dim"])), _grid(params), 2 * params["block_m"]
    rows = params["batch"] * params["heads"] * params["seq_len"]
    steps = [
        ("scores", grid, threads, (inputs["q"], inputs["k"], s, scale)),
        ("softmax", (cdiv(rows, ROWS),), ROWS * ROW_THREADS, (s, p)),
        ("pv", grid, threads, (p, inputs["v"], out)),
    ]
    return _launcher(steps, params, opts)
