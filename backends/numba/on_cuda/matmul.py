"""Matmul on CUDA with Numba: unblocked (one thread per output, operands from device memory) against tiled
(BM×BK and BK×BN slices staged in shared memory), and the bias+gelu epilogue fused or as its own kernel.

`unblocked` gives each thread one output and walks K reading A's row and B's column from global memory:
nothing is staged on chip on purpose (the hardware caches still catch what they can). `tiled` gives each block
a BM×BN output tile and each of its (BM/TM)·(BN/TN) ≤ 256 threads a TM×TN register tile, TM = BM/16 and
TN = BN/16 (at least 1); for every BK slice the block loads A's and B's slices into shared memory as float32
(converting float16 once per element), synchronises, and every thread multiplies its strip of A by its strip
of B from there: each staged element is used BN (resp. BM) times. Thread (ty, tx) owns rows ty + x·BM/TM and
columns tx + y·BN/TN, so a warp reads consecutive shared-memory words of B; A is stored transposed with a
padded row (BM+1 words) so the block's stores into it do not collide in one bank. Shared arrays need sizes
known when the kernel compiles, so one kernel is generated and cached per (tile, epilogue).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.ops import gelu
from backends.numba.record import record_numba
from suite.core.launch import cdiv
from suite.core.registry import Launcher, kernel
from suite.core.targets import NotRunnable

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

DTYPES = ("float32", "float16")
SMEM_LIMIT = 48 * 1024
"""Static shared memory per block; more needs the dynamic opt-in, which Numba does not expose."""
MAX_REGISTER_TILE = 64
"""Accumulators per thread beyond which the register tile would spill."""


def thread_tile(bm: int, bn: int) -> tuple[int, int]:
    """(TM, TN): each thread's register tile, so that a block has at most 16×16 threads."""
    return max(1, bm // 16), max(1, bn // 16)


def smem_bytes(bm: int, bn: int, bk: int) -> int:
    return 4 * (bk * (bm + 1) + bk * bn)


def refusal(tile: list[int]) -> str:
    """Why a tile cannot run on this kernel ("" when it can)."""
    bm, bn, bk = tile
    tm, tn = thread_tile(bm, bn)
    if smem_bytes(bm, bn, bk) > SMEM_LIMIT:
        return f"tile {tile} needs {smem_bytes(bm, bn, bk)} bytes of shared memory; static shared memory is 48 KiB"
    if tm * tn > MAX_REGISTER_TILE:
        return f"tile {tile} gives each thread {tm}×{tn} accumulators (more than {MAX_REGISTER_TILE})"
    return ""


def unblocked_source() -> Callable[..., None]:
    def unblocked(a, b, c):  # type: ignore[no-untyped-def]
        m, k = a.shape
        n = b.shape[1]
        idx = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x  # consecutive threads: consecutive j
        if idx < m * n:
            i, j = idx // n, idx % n
            acc = np.float32(0.0)
            for kk in range(k):
                acc += np.float32(a[i, kk]) * np.float32(b[kk, j])
            c[i, j] = acc

    return unblocked


@functools.cache
def tiled_source(bm: int, bn: int, bk: int, epilogue: bool) -> Callable[..., None]:
    """The tiled kernel for one tile as a Python function (what `cuda.jit` and `cuda.compile_ptx` take)."""
    tm, tn = thread_tile(bm, bn)
    ry, rx = bm // tm, bn // tn  # threads per block along rows and columns
    threads = ry * rx
    bmp = bm + 1

    def tiled(a, b, bias, c):  # type: ignore[no-untyped-def]
        m, k = a.shape
        n = b.shape[1]
        sa = cuda.shared.array((bk, bmp), np.float32)
        sb = cuda.shared.array((bk, bn), np.float32)
        acc = cuda.local.array((tm, tn), np.float32)
        ar = cuda.local.array(tm, np.float32)
        br = cuda.local.array(tn, np.float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * rx + tx
        row0, col0 = np.int64(cuda.blockIdx.y) * bm, np.int64(cuda.blockIdx.x) * bn
        for x in range(tm):
            for y in range(tn):
                acc[x, y] = np.float32(0.0)
        for k0 in range(0, k, bk):
            for e in range(tid, bm * bk, threads):  # consecutive threads read consecutive k of one A row
                r, kk = e // bk, e % bk
                sa[kk, r] = np.float32(a[row0 + r, k0 + kk]) if row0 + r < m and k0 + kk < k else np.float32(0.0)
            for e in range(tid, bk * bn, threads):  # ... and consecutive columns of one B row
                kk, cc = e // bn, e % bn
                sb[kk, cc] = np.float32(b[k0 + kk, col0 + cc]) if k0 + kk < k and col0 + cc < n else np.float32(0.0)
            cuda.syncthreads()
            for kk in range(bk):
                for x in range(tm):
                    ar[x] = sa[kk, ty + x * ry]
                for y in range(tn):
                    br[y] = sb[kk, tx + y * rx]
                for x in range(tm):
                    for y in range(tn):
                        acc[x, y] += ar[x] * br[y]
            cuda.syncthreads()
        for x in range(tm):
            i = row0 + ty + x * ry
            for y in range(tn):
                j = col0 + tx + y * rx
                if i < m and j < n:
                    v = acc[x, y]
                    if epilogue:
                        v = gelu(v + np.float32(bias[j]))
                    c[i, j] = v

    return tiled


def epilogue_source() -> Callable[..., None]:
    def bias_gelu(x, bias, out):  # type: ignore[no-untyped-def]
        m, n = x.shape
        idx = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        if idx < m * n:
            i, j = idx // n, idx % n
            out[i, j] = gelu(np.float32(x[i, j]) + np.float32(bias[j]))

    return bias_gelu


@functools.cache
def _jit(source: Callable[..., None]) -> Any:
    return cuda.jit(source)


UNBLOCKED, EPILOGUE = unblocked_source(), epilogue_source()


def kernel_sources(variant: str, params: dict, dtype: str) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    m2, v1 = f"{dtype}[:, ::1]", f"{dtype}[::1]"
    epilogue = params["epilogue"] == "bias_gelu"
    tiled_sig = f"void({m2}, {m2}, {v1}, {m2})"
    out: dict[str, tuple[Callable[..., None], str]] = {}
    if variant == "unblocked":
        out["unblocked"] = (UNBLOCKED, f"void({m2}, {m2}, {m2})")
    elif variant == "fused":
        out["tiled+bias_gelu" if epilogue else "tiled"] = (tiled_source(*params["tile"], epilogue), tiled_sig)
    elif variant in ("tiled", "unfused"):
        out["tiled"] = (tiled_source(*params["tile"], False), tiled_sig)
    if epilogue and variant != "fused":
        out["bias_gelu"] = (EPILOGUE, f"void({m2}, {v1}, {m2})")
    return out


def _prepare(factory: tuple, grid: tuple, block: tuple, stream: Any, *args: Any) -> Launcher:
    """Compile (on a GPU) the kernel `factory` = (module, attribute, args) names for these arrays now, and
    record it for the resource report; the returned closure only launches."""
    source = globals()[factory[1]]  # every factory names a function of this module
    dispatcher = _jit(source(*factory[2]) if factory[2] is not None else source)
    compiled = None if simulating() else dispatcher.compile(tuple(numba.typeof(x) for x in args))
    threads = math.prod(block)
    name = factory[1] if factory[2] is None else f"{factory[1]}{factory[2]}"
    record_numba(factory, [x for x in args if hasattr(x, "shape")], threads, name=name, compiled=compiled)

    def launch() -> None:  # configured per launch: the simulator's kernel object keeps its last configuration
        dispatcher[grid, block, stream](*args)

    return launch


def _launcher(inputs: dict[str, Any], out: Any, params: dict, opts: dict, matmul: str, fuse: bool) -> Launcher:
    """`matmul` ("unblocked" or "tiled") into out, or into a scratch array and then the separate epilogue."""
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    if str(out.dtype) not in DTYPES or any(x.dtype != out.dtype for x in (a, b, bias)):
        raise ValueError(f"numba/cuda matmul: a {a.dtype}, b {b.dtype}, bias {bias.dtype} -> out {out.dtype}")
    m, n = out.shape
    epilogue = params["epilogue"] == "bias_gelu"
    separate = epilogue and not fuse
    mid = cuda.device_array(out.shape, dtype=out.dtype) if separate else out
    block, stream = BACKEND.option(opts, "block"), stream_arg(opts.get("stream"))
    flat = (max(1, cdiv(m * n, block)),)
    if matmul == "unblocked":
        steps = [_prepare((__name__, "UNBLOCKED", None), flat, (block,), stream, a, b, mid)]
    else:
        bm, bn, bk = params["tile"]
        if why := refusal(params["tile"]):
            raise NotRunnable(f"numba/cuda tiled matmul: {why}")
        tm, tn = thread_tile(bm, bn)
        grid, threads = (cdiv(n, bn), cdiv(m, bm)), (bn // tn, bm // tm)
        factory = (__name__, "tiled_source", (bm, bn, bk, epilogue and fuse))
        steps = [_prepare(factory, grid, threads, stream, a, b, bias, mid)]
    if separate:
        steps.append(_prepare((__name__, "EPILOGUE", None), flat, (block,), stream, mid, bias, out))

    def launch() -> None:
        for step in steps:
            step()

    return launch


@kernel(scenario="matmul", backend="numba", variant="unblocked", device="cuda")
def unblocked(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One thread per output, A's row and B's column from device memory; the epilogue (if any) separate."""
    return _launcher(inputs, out, params, opts, "unblocked", fuse=False)


@kernel(scenario="matmul", backend="numba", variant="tiled", device="cuda")
@kernel(scenario="matmul", backend="numba", variant="unfused", device="cuda")
def tiled(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """The shared-memory tiled kernel; with the epilogue, followed by the separate bias+gelu kernel."""
    return _launcher(inputs, out, params, opts, "tiled", fuse=False)


@kernel(scenario="matmul", backend="numba", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """The tiled kernel with the epilogue (if any) applied to the register tile before its only store."""
    return _launcher(inputs, out, params, opts, "tiled", fuse=True)
