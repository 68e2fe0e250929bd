"""Matmul on the host CPU with Numba: unblocked (the naive triple loop) against tiled, and the bias+gelu epilogue.

`unblocked` computes each output from a row of A and a column of B read from memory, with nothing staged:
the column is strided, so every product misses reuse by design. `tiled` runs one parallel task per BM×BN
output tile; for each BK slice it packs A's BM×BK block and B's BK×BN block into contiguous float32 buffers
(converting float16 bits once per element there, not once per product) and accumulates into a float32 tile
two rows and four steps of K per pass: an accumulator element is loaded and stored once per four products
and a packed B element serves two rows. The loop over the full BN has a constant trip count, so LLVM
vectorises it; edge tiles compute all BN columns (and at most one row past the edge) into accumulator slots
that are never stored, and the last K slice is zero-padded to a multiple of four. `fused` applies bias+gelu to the accumulator
tile before its only store; `unfused` (and `unblocked`/`tiled` with the epilogue) writes A·B to memory in the
storage dtype and runs a separate elementwise kernel. The K sum runs in order in every kernel (the tiled one
adds four products to an accumulator per pass, in K order), so all variants round alike; see FASTMATH.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.ops import CODECS, gelu
from suite.core.registry import Launcher, kernel

UNROLL = 4
"""Steps of K per pass over an accumulator row (the micro-kernel below is written out for exactly 4)."""
FASTMATH = {"contract"}
"""Only contraction: LLVM may fuse a multiply and the add that consumes it into one FMA (one rounding, not
two). The K sum keeps its order, nothing is reassociated, and the tiled kernel runs 1.35-1.6× faster on
AVX-512 hosts (half the floating-point instructions). Every kernel here takes it, so unblocked and tiled still
round identically step by step and fused and unfused differ only in where A·B is stored."""


@register_jitable
def _plain(v: float, bias: float) -> float:
    return v


@register_jitable
def _bias_gelu(v: float, bias: float) -> float:
    return gelu(v + bias)


def _finish(epilogue: bool) -> Callable[[float, float], float]:
    return _bias_gelu if epilogue else _plain


@functools.cache
def _unblocked_kernel(dtype: str) -> Any:
    load, store = CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def unblocked(a, b, c):  # type: ignore[no-untyped-def]
        m, k = a.shape
        n = b.shape[1]
        for i in prange(m):
            for j in range(n):
                acc = np.float32(0.0)
                for kk in range(k):
                    acc += load(a[i, kk]) * load(b[kk, j])
                c[i, j] = store(acc)

    return unblocked


@functools.cache
def _tiled_kernel(bm: int, bn: int, bk: int, dtype: str, epilogue: bool) -> Any:
    """One kernel per (tile, dtype, epilogue): the tile sizes are compile-time constants of the loops."""
    load, store = CODECS[dtype]
    finish = _finish(epilogue)

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def tiled(a, b, bias, c):  # type: ignore[no-untyped-def]
        m, k = a.shape
        n = b.shape[1]
        tiles_n = (n + bn - 1) // bn
        for t in prange(((m + bm - 1) // bm) * tiles_n):
            i0, j0 = (t // tiles_n) * bm, (t % tiles_n) * bn
            rows, cols = min(bm, m - i0), min(bn, n - j0)
            acc = np.zeros((bm, bn), dtype=np.float32)
            ap = np.zeros((bm, bk), dtype=np.float32)
            bp = np.zeros((bk, bn), dtype=np.float32)
            for k0 in range(0, k, bk):
                depth = min(bk, k - k0)
                for i in range(rows):
                    for kk in range(depth):
                        ap[i, kk] = load(a[i0 + i, k0 + kk])
                    for kk in range(depth, bk):  # the last slice: zeros up to a multiple of UNROLL
                        ap[i, kk] = 0.0
                for kk in range(depth):
                    for j in range(cols):
                        bp[kk, j] = load(b[k0 + kk, j0 + j])
                for kk in range(depth, bk):
                    for j in range(bn):
                        bp[kk, j] = 0.0
                for i in range(0, rows, 2):
                    for kk in range(0, depth, UNROLL):
                        a00, a01, a02, a03 = ap[i, kk], ap[i, kk + 1], ap[i, kk + 2], ap[i, kk + 3]
                        a10, a11, a12, a13 = ap[i + 1, kk], ap[i + 1, kk + 1], ap[i + 1, kk + 2], ap[i + 1, kk + 3]
                        for j in range(bn):
                            b0, b1, b2, b3 = bp[kk, j], bp[kk + 1, j], bp[kk + 2, j], bp[kk + 3, j]
                            acc[i, j] = acc[i, j] + a00 * b0 + a01 * b1 + a02 * b2 + a03 * b3
                            acc[i + 1, j] = acc[i + 1, j] + a10 * b0 + a11 * b1 + a12 * b2 + a13 * b3
            for i in range(rows):
                for j in range(cols):
                    c[i0 + i, j0 + j] = store(finish(acc[i, j], load(bias[j0 + j])))

    return tiled


@functools.cache
def _epilogue_kernel(dtype: str) -> Any:
    """out = gelu(x + bias) elementwise, x the stored A·B: the epilogue as its own kernel."""
    load, store = CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def bias_gelu(x, bias, out):  # type: ignore[no-untyped-def]
        m, n = x.shape
        for i in prange(m):
            for j in range(n):
                out[i, j] = store(gelu(load(x[i, j]) + load(bias[j])))

    return bias_gelu


def _storage(a: np.ndarray) -> np.ndarray:
    """The array as the kernels see it: halves as their uint16 bits (a view, no copy)."""
    return a.view(np.uint16) if a.dtype == np.float16 else a


def _compiled(dispatcher: Any, *arrays: np.ndarray) -> Any:
    dispatcher.compile(tuple(numba.typeof(x) for x in arrays))
    return dispatcher


def _dtype(inputs: dict[str, Any], out: np.ndarray) -> str:
    dtype = str(out.dtype)
    if dtype not in CODECS or any(inputs[x].dtype != out.dtype for x in ("a", "b", "bias")):
        found = ", ".join(f"{x} {inputs[x].dtype}" for x in ("a", "b", "bias"))
        raise ValueError(f"numba/cpu matmul: {found} -> out {dtype}; needs one of {list(CODECS)} throughout")
    return dtype


def _steps(matmul: str, inputs: dict[str, Any], out: np.ndarray, params: dict) -> Launcher:
    """The matmul kernel `matmul` ("unblocked" or "tiled"), then the epilogue as a separate kernel if any.

    Nothing is fused here: with an epilogue, A·B goes to a scratch array in the storage dtype and back.
    """
    dtype = _dtype(inputs, out)
    a, b, bias, c = (_storage(x) for x in (inputs["a"], inputs["b"], inputs["bias"], out))
    epilogue = params["epilogue"] == "bias_gelu"
    mid = np.empty_like(c) if epilogue else c
    if matmul == "unblocked":
        mm, mm_args = _compiled(_unblocked_kernel(dtype), a, b, mid), (a, b, mid)
    else:
        mm, mm_args = _compiled(_tiled_kernel(*params["tile"], dtype, False), a, b, bias, mid), (a, b, bias, mid)
    epi = _compiled(_epilogue_kernel(dtype), mid, bias, c) if epilogue else None

    def launch() -> None:
        mm(*mm_args)
        if epi is not None:
            epi(mid, bias, c)

    return launch


@kernel(scenario="matmul", backend="numba", variant="unblocked", device="cpu")
def unblocked(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """The naive triple loop: A's row and B's strided column from memory for every output."""
    return _steps("unblocked", inputs, out, params)


@kernel(scenario="matmul", backend="numba", variant="tiled", device="cpu")
@kernel(scenario="matmul", backend="numba", variant="unfused", device="cpu")
def tiled(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """The tiled kernel; with the epilogue, followed by the separate bias+gelu kernel."""
    return _steps("tiled", inputs, out, params)


@kernel(scenario="matmul", backend="numba", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """The tiled kernel with the epilogue (if any) applied to the accumulator tile before its only store."""
    dtype = _dtype(inputs, out)
    a, b, bias, c = (_storage(x) for x in (inputs["a"], inputs["b"], inputs["bias"], out))
    mm = _compiled(_tiled_kernel(*params["tile"], dtype, params["epilogue"] == "bias_gelu"), a, b, bias, c)

    def launch() -> None:
        mm(a, b, bias, c)

    return launch
