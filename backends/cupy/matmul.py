"""Matmul in CuPy: generated CUDA C (RawKernels, so NVRTC checks them without a GPU) and cuBLAS as `library`.

`unblocked` is one thread per output walking K through global memory (consecutive threads take consecutive
columns, so B's loads coalesce and A's broadcast), with nothing staged on chip. `tiled` is the classic
shared-memory kernel: a block per BM×BN output tile, (BM/TM)·(BN/TN) ≤ 256 threads each holding a TM×TN
register tile (TM = BM/16, TN = BN/16, at least 1), A's BM×BK and B's BK×BN slices staged in shared memory as
float32 for each step of K. It is the same algorithm and thread layout as the Numba CUDA kernel, with the tile
baked into the source so every loop over it unrolls. With `fused` the bias+gelu epilogue runs on the register
tile before its only store; otherwise it is its own elementwise kernel reading A·B back in the storage dtype.
`library` is `cupy.matmul` (cuBLAS; float16 accumulates in float32, float32 stays full float32 unless the user
sets CUPY_TF32) followed, with the epilogue, by the same elementwise kernel. float16 storage goes through the
PTX conversions of `backends.cupy.device` (NVRTC from the wheels has no cuda_fp16.h).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET, cupy
from backends.cupy.build import ARCH, build
from backends.cupy.device import CONVERSIONS, CTYPES, OPS_SOURCE
from suite.core.launch import cdiv
from suite.core.registry import Launcher, kernel
from suite.core.targets import NATIVE, NotRunnable

SMEM_LIMIT = 48 * 1024
"""Static shared memory per block; a larger tile would need the dynamic opt-in, which these kernels skip."""
MAX_REGISTER_TILE = 64

UNBLOCKED = r"""
extern "C" __global__ void {name}(const {T}* __restrict__ a, const {T}* __restrict__ b, {T}* __restrict__ c,
                                  int m, int n, int k) {{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)m * n) return;
    long long i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int kk = 0; kk < k; ++kk) acc += load(a + i * k + kk) * load(b + (long long)kk * n + j);
    store(c + idx, acc);
}}
"""

TILED = r"""
#define BM {bm}
#define BN {bn}
#define BK {bk}
#define TM {tm}
#define TN {tn}
#define RY (BM / TM)
#define RX (BN / TN)
#define THREADS (RX * RY)
extern "C" __global__ void {name}(
        const {T}* __restrict__ a, const {T}* __restrict__ b, const {T}* __restrict__ bias, {T}* __restrict__ c,
        int m, int n, int k) {{
    __shared__ float sa[BK][BM + 1];  // A transposed, rows padded: the block's stores into it spread over banks
    __shared__ float sb[BK][BN];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * RX + tx;
    const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
    float acc[TM][TN];
    #pragma unroll
    for (int x = 0; x < TM; ++x)
        #pragma unroll
        for (int y = 0; y < TN; ++y) acc[x][y] = 0.0f;
    for (int k0 = 0; k0 < k; k0 += BK) {{
        for (int e = tid; e < BM * BK; e += THREADS) {{  // consecutive threads: consecutive k of one A row
            int r = e / BK, kk = e % BK;
            bool in = row0 + r < m && k0 + kk < k;
            sa[kk][r] = in ? load(a + (row0 + r) * k + k0 + kk) : 0.0f;
        }}
        for (int e = tid; e < BK * BN; e += THREADS) {{  // ... and consecutive columns of one B row
            int kk = e / BN, cc = e % BN;
            bool in = k0 + kk < k && col0 + cc < n;
            sb[kk][cc] = in ? load(b + (long long)(k0 + kk) * n + col0 + cc) : 0.0f;
        }}
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {{
            float ar[TM], br[TN];
            #pragma unroll
            for (int x = 0; x < TM; ++x) ar[x] = sa[kk][ty + x * RY];
            #pragma unroll
            for (int y = 0; y < TN; ++y) br[y] = sb[kk][tx + y * RX];
            #pragma unroll
            for (int x = 0; x < TM; ++x)
                #pragma unroll
                for (int y = 0; y < TN; ++y) acc[x][y] = fmaf(ar[x], br[y], acc[x][y]);
        }}
        __syncthreads();
    }}
    #pragma unroll
    for (int x = 0; x < TM; ++x) {{
        long long i = row0 + ty + x * RY;
        #pragma unroll
        for (int y = 0; y < TN; ++y) {{
            long long j = col0 + tx + y * RX;
            if (i < m && j < n) {{
                float v = acc[x][y];
{epilogue}
                store(c + i * n + j, v);
            }}
        }}
    }}
}}
"""

EPILOGUE = r"""
extern "C" __global__ void {name}(const {T}* __restrict__ x, const {T}* __restrict__ bias, {T}* __restrict__ y,
                                  long long total, int n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) store(y + i, op_gelu(load(x + i) + load(bias + i % n)));
}}
"""

BIAS_GELU = " " * 16 + "v = op_gelu(v + load(bias + j));"


def thread_tile(bm: int, bn: int) -> tuple[int, int]:
    """(TM, TN): each thread's register tile, so that a block has at most 16×16 threads."""
    return max(1, bm // 16), max(1, bn // 16)


def refusal(tile: list[int]) -> str:
    """Why a tile cannot run on this kernel ("" when it can)."""
    bm, bn, bk = tile
    tm, tn = thread_tile(bm, bn)
    smem = 4 * (bk * (bm + 1) + bk * bn)
    if smem > SMEM_LIMIT:
        return f"tile {tile} needs {smem} bytes of shared memory; static shared memory is 48 KiB"
    if tm * tn > MAX_REGISTER_TILE:
        return f"tile {tile} gives each thread {tm}×{tn} accumulators (more than {MAX_REGISTER_TILE})"
    return ""


def source(kind: str, dtype: str, tile: tuple[int, int, int] = (0, 0, 0), epilogue: bool = False) -> tuple[str, str]:
    """(CUDA source, kernel name) of one kernel: "unblocked", "tiled" (for `tile`) or "bias_gelu"."""
    T = CTYPES[dtype]
    head = CONVERSIONS + OPS_SOURCE
    if kind == "unblocked":
        name = f"matmul_unblocked_{dtype}"
        return head + UNBLOCKED.format(name=name, T=T), name
    if kind == "bias_gelu":
        name = f"bias_gelu_{dtype}"
        return head + EPILOGUE.format(name=name, T=T), name
    bm, bn, bk = tile
    tm, tn = thread_tile(bm, bn)
    name = f"matmul_tiled_{bm}x{bn}x{bk}_{dtype}{'_bias_gelu' if epilogue else ''}"
    body = TILED.format(name=name, T=T, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, epilogue=BIAS_GELU if epilogue else "")
    return head + body, name


def _compiled(
    kind: str, dtype: str, threads: int, tile: tuple[int, int, int] = (0, 0, 0), epilogue: bool = False
) -> Any:
    """The built kernel (cached by `build`), recorded with its block size for the resource report."""
    return build(*source(kind, dtype, tile, epilogue), threads=threads)


def _launcher(inputs: dict[str, Any], out: Any, params: dict, opts: dict, matmul: str, fuse: bool) -> Launcher:
    """`matmul` ("unblocked", "tiled" or "library") into out, or into a scratch and then the separate epilogue."""
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    dtype = np.dtype(out.dtype).name
    m, n = out.shape
    k = a.shape[1]
    epilogue = params["epilogue"] == "bias_gelu"
    separate = epilogue and not fuse
    mid = TARGET.empty(out.shape, dtype) if separate else out
    block = BACKEND.option(opts, "block")
    flat = (max(1, cdiv(m * n, block)),)
    dims = (np.int32(m), np.int32(n), np.int32(k))
    steps: list[Launcher] = []
    if matmul == "unblocked":
        steps.append(_step(_compiled("unblocked", dtype, block), flat, (block,), (a, b, mid, *dims)))
    elif matmul == "tiled":
        if why := refusal(params["tile"]):
            raise NotRunnable(f"cupy tiled matmul: {why}")
        bm, bn, bk = params["tile"]
        tm, tn = thread_tile(bm, bn)
        threads = (bn // tn, bm // tm)
        k_tiled = _compiled("tiled", dtype, threads[0] * threads[1], (bm, bn, bk), epilogue and fuse)
        grid = (cdiv(n, bn), cdiv(m, bm))
        steps.append(_step(k_tiled, grid, threads, (a, b, bias, mid, *dims)))
    else:
        steps.append(_cublas(a, b, mid))
    if separate:
        args = (mid, bias, out, np.int64(m * n), np.int32(n))
        steps.append(_step(_compiled("bias_gelu", dtype, block), flat, (block,), args))
    context = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for step in steps:
                step()

    return launch


def _step(k: Any, grid: tuple, block: tuple, args: tuple) -> Launcher:
    return lambda: k(grid, block, args)


def _cublas(a: Any, b: Any, c: Any) -> Launcher:
    """cupy.matmul into c: cuBLAS on a GPU; without one there is nothing to build ahead, so it cannot run."""
    if TARGET.probe().mode != NATIVE:

        def refuse() -> None:
            raise NotRunnable(f"cuBLAS through CuPy needs a GPU: nothing of it is compiled for {ARCH} ahead of time")

        return refuse
    return lambda: cupy.matmul(a, b, out=c)


@kernel(scenario="matmul", backend="cupy", variant="unblocked", device="cuda")
def unblocked(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    return _launcher(inputs, out, params, opts, "unblocked", fuse=False)


@kernel(scenario="matmul", backend="cupy", variant="tiled", device="cuda")
@kernel(scenario="matmul", backend="cupy", variant="unfused", device="cuda")
def tiled(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    return _launcher(inputs, out, params, opts, "tiled", fuse=False)


@kernel(scenario="matmul", backend="cupy", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    return _launcher(inputs, out, params, opts, "tiled", fuse=True)


@kernel(scenario="matmul", backend="cupy", variant="library", device="cuda")
def library(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    return _launcher(inputs, out, params, opts, "library", fuse=False)
