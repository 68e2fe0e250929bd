"""The CUDA C of CuPy's matmul kernels, apart from the entries that compile and launch them (`backends.cupy.matmul`).

`unblocked` is one thread per output walking K through global memory (consecutive threads take consecutive
columns, so B's loads coalesce and A's broadcast), with nothing staged on chip. `tiled` is a register-tiled
kernel (`TILED`, one source per tile so every loop over the tile unrolls): a block of 16×16 threads per BM×BN
output tile, each thread accumulating a TM×TN block of C in registers (TM = BM/16, TN = BN/16: 8×8 for
128×128, 4×4 for 64×64), K walked in BK slices through two shared-memory stages. While the block multiplies
the slice in one stage, each thread already holds the next slice's loads in registers and stores them into
the other stage afterwards: one barrier per slice, and the global loads' latency overlaps the FMAs. Operands
move four elements at a time (float4 for float32, two half2 words for float16) where the row is long enough
and aligned, one element at a time, zero-filled, on the edges of M, N and K; A's slice is stored transposed
(one row per k, padded by 4 floats so it stays 16-byte aligned) so each thread reads its TM rows of A and TN
columns of B as float4s. A thread's rows are ty·4 + i + g·64 (groups of 4 spread 64 apart, fewer when TM < 4)
and its columns likewise, so a warp's float4 reads of B fill consecutive 16-byte words (no bank conflicts)
and its stores of C coalesce. Two stages of 128×128×32 exceed 48 KiB, so shared memory is dynamic and opted
in above that. float16 is widened to float32 once, on its way into shared memory, and accumulated in float32.
With `fused` the bias+gelu epilogue runs on the register tile before its only store; otherwise it is its own
elementwise kernel reading A·B back in the storage dtype. `library` is `cupy.matmul` (cuBLAS; float16
accumulates in float32, float32 stays full float32 unless the user sets CUPY_TF32) followed, with the
epilogue, by the same elementwise kernel. float16 storage goes through the PTX conversions of
`backends.cupy.device` (NVRTC from the wheels has no cuda_fp16.h).
"""

from __future__ import annotations

from typing import Any

from backends.cupy.device import CONVERSIONS, CTYPES, OPS_SOURCE
from suite.kit.launch import cdiv

STATIC_SMEM = 48 * 1024
"""Shared memory a block gets without opting in; the tiled kernel opts in above it."""
SMEM_LIMIT = 227 * 1024
"""The most shared memory one block may opt in to on sm_90."""
MAX_REGISTER_TILE = 64
"""Accumulators per thread beyond which the register tile (with the staged loads beside it) would spill."""
STAGES = 2
PAD = 4
"""Floats added to each k-row of A's transposed slice: the row stays a multiple of 16 bytes for float4 reads."""
THREADS_Y = THREADS_X = 16

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

VECTOR_IO = r"""
// Four consecutive elements p[0..3] (the first at column `col` of a row `limit` long) as float32, zero past the
// row's end: one 16-byte load (float) or 8-byte load of two half2 words (float16) when `vec` says the row is
// aligned and all four lie inside it, else one guarded load each. A row outside the matrix passes limit 0.
__device__ __forceinline__ float4 load4(const float* p, int col, int limit, bool vec) {
    if (vec && col + 3 < limit) return *reinterpret_cast<const float4*>(p);
    float4 v;
    v.x = col < limit ? p[0] : 0.0f;
    v.y = col + 1 < limit ? p[1] : 0.0f;
    v.z = col + 2 < limit ? p[2] : 0.0f;
    v.w = col + 3 < limit ? p[3] : 0.0f;
    return v;
}
__device__ __forceinline__ float low_half(unsigned int w) { half_bits h = (half_bits)(w & 0xffffu); return load(&h); }
__device__ __forceinline__ float high_half(unsigned int w) { half_bits h = (half_bits)(w >> 16); return load(&h); }
__device__ __forceinline__ float4 load4(const half_bits* p, int col, int limit, bool vec) {
    if (vec && col + 3 < limit) {
        uint2 w = *reinterpret_cast<const uint2*>(p);
        return make_float4(low_half(w.x), high_half(w.x), low_half(w.y), high_half(w.y));
    }
    float4 v;
    v.x = col < limit ? load(p) : 0.0f;
    v.y = col + 1 < limit ? load(p + 1) : 0.0f;
    v.z = col + 2 < limit ? load(p + 2) : 0.0f;
    v.w = col + 3 < limit ? load(p + 3) : 0.0f;
    return v;
}
// V consecutive outputs v[0..V) into p[0..V) (column `col` of a row `limit` long), dropping those past its end:
// one vector store when V is 4, `vec` holds and all four lie inside.
__device__ __forceinline__ void store4(float* p, const float* v) { *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]); }
__device__ __forceinline__ unsigned int half_pair(float lo, float hi) {
    half_bits l, h;
    store(&l, lo);
    store(&h, hi);
    return l | (unsigned int)h << 16;
}
__device__ __forceinline__ void store4(half_bits* p, const float* v) {
    *reinterpret_cast<uint2*>(p) = make_uint2(half_pair(v[0], v[1]), half_pair(v[2], v[3]));
}
template <int V, typename T>
__device__ __forceinline__ void store_run(T* p, const float* v, int col, int limit, bool vec) {
    if (V == 4 && vec && col + 3 < limit) {
        store4(p, v);
        return;
    }
    #pragma unroll
    for (int w = 0; w < V; ++w)
        if (col + w < limit) store(p + w, v[w]);
}
// V consecutive floats of shared memory into registers: one float4 (float2) read for V = 4 (2).
template <int V>
__device__ __forceinline__ void read_run(const float* p, float* out) {
    if constexpr (V == 4) {
        float4 q = *reinterpret_cast<const float4*>(p);
        out[0] = q.x, out[1] = q.y, out[2] = q.z, out[3] = q.w;
    } else if constexpr (V == 2) {
        float2 q = *reinterpret_cast<const float2*>(p);
        out[0] = q.x, out[1] = q.y;
    } else {
        out[0] = *p;
    }
}
template <typename T>
__device__ __forceinline__ bool aligned4(const T* p) { return reinterpret_cast<unsigned long long>(p) % (4 * sizeof(T)) == 0; }
"""

TILED = r"""
#define BM {bm}
#define BN {bn}
#define BK {bk}
#define TM {tm}
#define TN {tn}
#define VM {vm}                 // a thread's rows come in runs of VM consecutive ones (4, or TM when smaller)
#define VN {vn}                 // ... and its columns in runs of VN
#define RY (BM / TM)            // threads along the rows of the tile (threadIdx.y) ...
#define RX (BN / TN)            // ... and along its columns (threadIdx.x)
#define THREADS (RX * RY)
#define SA (BM + {pad})          // floats per k-row of A's transposed slice
#define STAGE (BK * SA + BK * BN)  // floats per stage: A's slice (BK rows of SA), then B's (BK rows of BN)
#define A_RUNS (BM * BK / 4)    // 4-wide runs along k in A's BM×BK slice ...
#define B_RUNS (BK * BN / 4)    // ... and along n in B's BK×BN slice
#define A_LOADS ((A_RUNS + THREADS - 1) / THREADS)  // runs each thread moves per slice
#define B_LOADS ((B_RUNS + THREADS - 1) / THREADS)
extern "C" __global__ void __launch_bounds__(THREADS, 1) {name}(  // 1: ptxas may use up to 255 registers
        const {T}* __restrict__ a, const {T}* __restrict__ b, const {T}* __restrict__ bias, {T}* __restrict__ c,
        int m, int n, int k) {{
    extern __shared__ float4 smem4[];  // dynamic: {stages} stages of STAGE floats
    float* const smem = reinterpret_cast<float*>(smem4);
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * RX + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vec_a = k % 4 == 0 && aligned4(a), vec_b = n % 4 == 0 && aligned4(b), vec_c = n % 4 == 0 && aligned4(c);
    float4 ra[A_LOADS], rb[B_LOADS];  // the next slice, on its way from global to shared memory
    // Run e of A's slice: row e / (BK/4), k 4·(e % (BK/4)): consecutive threads read consecutive runs of a row.
    // Run e of B's slice: k-row e / (BN/4), column 4·(e % (BN/4)).
    auto fetch = [&](int k0) {{
        #pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {{
            const int e = tid + l * THREADS, r = e / (BK / 4), kk = e % (BK / 4) * 4;
            const bool live = e < A_RUNS && row0 + r < m;
            ra[l] = load4(a + (long long)(row0 + r) * k + k0 + kk, k0 + kk, live ? k : 0, vec_a);
        }}
        #pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {{
            const int e = tid + l * THREADS, kk = e / (BN / 4), cc = e % (BN / 4) * 4;
            const bool live = e < B_RUNS && k0 + kk < k;
            rb[l] = load4(b + (long long)(k0 + kk) * n + col0 + cc, col0 + cc, live ? n : 0, vec_b);
        }}
    }};
    auto stash = [&](int stage) {{
        float* const sa = smem + stage * STAGE;
        float* const sb = sa + BK * SA;
        #pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {{
            const int e = tid + l * THREADS, r = e / (BK / 4), kk = e % (BK / 4) * 4;
            if (e < A_RUNS) {{  // transposed: sa[kk][r]
                sa[(kk + 0) * SA + r] = ra[l].x;
                sa[(kk + 1) * SA + r] = ra[l].y;
                sa[(kk + 2) * SA + r] = ra[l].z;
                sa[(kk + 3) * SA + r] = ra[l].w;
            }}
        }}
        #pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {{
            const int e = tid + l * THREADS, kk = e / (BN / 4), cc = e % (BN / 4) * 4;
            if (e < B_RUNS) *reinterpret_cast<float4*>(sb + kk * BN + cc) = rb[l];
        }}
    }};
    float acc[TM][TN];
    #pragma unroll
    for (int x = 0; x < TM; ++x)
        #pragma unroll
        for (int y = 0; y < TN; ++y) acc[x][y] = 0.0f;
    const int slices = (k + BK - 1) / BK;
    fetch(0);
    stash(0);
    __syncthreads();
    for (int s = 0; s < slices; ++s) {{
        if (s + 1 < slices) fetch((s + 1) * BK);  // in flight while this slice's FMAs run
        const float* const sa = smem + (s % 2) * STAGE;
        const float* const sb = sa + BK * SA;
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {{
            float ar[TM], br[TN];
            #pragma unroll
            for (int g = 0; g < TM / VM; ++g) read_run<VM>(sa + kk * SA + g * RY * VM + ty * VM, ar + g * VM);
            #pragma unroll
            for (int g = 0; g < TN / VN; ++g) read_run<VN>(sb + kk * BN + g * RX * VN + tx * VN, br + g * VN);
            #pragma unroll
            for (int x = 0; x < TM; ++x)
                #pragma unroll
                for (int y = 0; y < TN; ++y) acc[x][y] = fmaf(ar[x], br[y], acc[x][y]);
        }}
        // The other stage was last read in slice s - 1, which every thread finished before the last barrier.
        if (s + 1 < slices) stash((s + 1) % 2);
        __syncthreads();
    }}
    #pragma unroll
    for (int x = 0; x < TM; ++x) {{
        const int i = row0 + x / VM * RY * VM + ty * VM + x % VM;
        #pragma unroll
        for (int g = 0; g < TN / VN; ++g) {{
            const int j = col0 + g * RX * VN + tx * VN;
            float v[VN];
            #pragma unroll
            for (int w = 0; w < VN; ++w) {{
                v[w] = acc[x][g * VN + w];
{epilogue}
            }}
            if (i < m) store_run<VN>(c + (long long)i * n + j, v, j, n, vec_c);
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

BIAS_GELU = " " * 16 + "if (j + w < n) v[w] = op_gelu(v[w] + load(bias + j + w));"


def thread_tile(bm: int, bn: int) -> tuple[int, int]:
    """(TM, TN): each thread's register tile, so that a block has at most 16×16 threads."""
    return max(1, bm // THREADS_Y), max(1, bn // THREADS_X)


def smem_bytes(bm: int, bn: int, bk: int) -> int:
    """Dynamic shared memory of the tiled kernel: two stages of A's padded transposed slice and B's slice."""
    return STAGES * 4 * (bk * (bm + PAD) + bk * bn)


def launch_config(m: int, n: int, tile: list[int]) -> dict[str, Any]:
    """What the tiled kernel is launched with for an M×N output (the row's `extra` records it)."""
    bm, bn, bk = tile
    tm, tn = thread_tile(bm, bn)
    return {
        "block_tile": [bm, bn, bk],
        "thread_tile": [tm, tn],
        "threads": [bn // tn, bm // tm],
        "threads_per_block": (bn // tn) * (bm // tm),
        "grid": [cdiv(n, bn), cdiv(m, bm)],
        "smem_stages": STAGES,
        "dynamic_smem_bytes": smem_bytes(bm, bn, bk),
    }


def refusal(tile: list[int]) -> str:
    """Why a tile cannot run on this kernel ("" when it can)."""
    bm, bn, bk = tile
    tm, tn = thread_tile(bm, bn)
    smem = smem_bytes(bm, bn, bk)
    if smem > SMEM_LIMIT:
        return f"tile {tile} needs {smem} bytes of shared memory (two stages); a block may have at most {SMEM_LIMIT}"
    if tm * tn > MAX_REGISTER_TILE:
        return f"tile {tile} gives each thread {tm}×{tn} accumulators (more than {MAX_REGISTER_TILE})"
    return ""


def body(kind: str, dtype: str, tile: tuple[int, int, int] = (0, 0, 0), epilogue: bool = False) -> tuple[str, str]:
    """(CUDA source without the shared device code, kernel name) of one kernel: see `source`."""
    T = CTYPES[dtype]
    if kind == "unblocked":
        name = f"matmul_unblocked_{dtype}"
        return UNBLOCKED.format(name=name, T=T), name
    if kind == "bias_gelu":
        name = f"bias_gelu_{dtype}"
        return EPILOGUE.format(name=name, T=T), name
    bm, bn, bk = tile
    tm, tn = thread_tile(bm, bn)
    name = f"matmul_tiled_{bm}x{bn}x{bk}_{dtype}{'_bias_gelu' if epilogue else ''}"
    text = TILED.format(
        name=name,
        T=T,
        bm=bm,
        bn=bn,
        bk=bk,
        tm=tm,
        tn=tn,
        vm=min(4, tm),
        vn=min(4, tn),
        pad=PAD,
        stages=STAGES,
        epilogue=BIAS_GELU if epilogue else "",
    )
    return VECTOR_IO + text, name


def source(kind: str, dtype: str, tile: tuple[int, int, int] = (0, 0, 0), epilogue: bool = False) -> tuple[str, str]:
    """(CUDA source, kernel name) of one kernel: "unblocked", "tiled" (for `tile`) or "bias_gelu"."""
    text, name = body(kind, dtype, tile, epilogue)
    return CONVERSIONS + OPS_SOURCE + text, name
