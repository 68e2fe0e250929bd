"""The CUDA C of CuPy's attention kernels: one source holds the fused kernel and the three unfused ones.

Kernel text apart from the entries that compile and launch it (`backends.cupy.attention`, whose docstring
describes the tiling). Only `__syncthreads` coordinates threads (no warp shuffles), so the tests can also
run this very source on the host, one std::thread per CUDA thread, with a host `prelude` in place of
`DEVICE_PRELUDE`, to check its numbers where no GPU is available.

GROUP, query heads per K/V head, is compiled in: block y = b·heads + h reads K/V head y / GROUP =
b·kv_heads + h / GROUP in place (grouped-query attention), a division by a constant; GROUP 1 is multi-head.
"""

from __future__ import annotations

from backends.cupy.device import CTYPES

ROW_THREADS, ROWS = 8, 16
"""Softmax: threads per row, rows per block."""

DEVICE_PRELUDE = r"""
typedef unsigned short half_bits;
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(half_bits h) {
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(h));
    return v;
}
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(half_bits* p, float v) {
    half_bits h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    *p = h;
}
#define NEG_INF __int_as_float(0xff800000)
"""

CONFIG = r"""
#define BM {block_m}
#define BN {block_n}
#define HEAD_DIM {head_dim}
#define GROUP {group}
#define CAUSAL {causal}
#define ROW_THREADS {row_threads}
#define ROWS {rows}
typedef {ctype} T;
"""

TILES = r"""
#define DC 32
#define TC 8
#define RM 4
#define TR (BM / RM)
#define THREADS (2 * BM)
#define CN (BN / TC)
#define CHUNKS ((HEAD_DIM + DC - 1) / DC)
#define EPC (DC / TC)
#define DN (CHUNKS * EPC)

__device__ __forceinline__ int key_end(int q0, int seq_len) { return CAUSAL ? min(seq_len, q0 + BM) : seq_len; }
__device__ __forceinline__ bool visible(int query, int key, int end) { return key < end && (!CAUSAL || key <= query); }

// dst[r][dd] = src[row0 + r][d0 + dd] * scale for r < rows, zeros elsewhere (a chunk of 32 dims, padded rows).
__device__ __forceinline__ void load_chunk(const T* __restrict__ src, int row0, int rows, int d0, float scale,
                                           float* dst, int dst_rows) {
    for (int idx = threadIdx.x; idx < dst_rows * DC; idx += THREADS) {
        int r = idx / DC, dd = idx % DC;
        dst[r * (DC + 1) + dd] =
            (r < rows && d0 + dd < HEAD_DIM) ? to_float(src[(long long)(row0 + r) * HEAD_DIM + d0 + dd]) * scale : 0.0f;
    }
}

// sc[a][b] = q[q0 + ty + TR·a] · k[n0 + tx + TC·b] · scale, Q and K staged through shared memory chunk by chunk.
__device__ __forceinline__ void tile_scores(const T* __restrict__ q, const T* __restrict__ k, int q0, int rows,
                                            int n0, int end, float scale, float* qc, float* kc, float sc[RM][CN]) {
    const int ty = threadIdx.x / TC, tx = threadIdx.x % TC;
#pragma unroll
    for (int a = 0; a < RM; ++a)
#pragma unroll
        for (int b = 0; b < CN; ++b) sc[a][b] = 0.0f;
    for (int c = 0; c < CHUNKS; ++c) {
        __syncthreads();
        load_chunk(q, q0, rows, c * DC, scale, qc, BM);
        load_chunk(k, n0, end - n0, c * DC, 1.0f, kc, BN);
        __syncthreads();
#pragma unroll 4
        for (int dd = 0; dd < DC; ++dd) {
            float qa[RM];
#pragma unroll
            for (int a = 0; a < RM; ++a) qa[a] = qc[(ty + TR * a) * (DC + 1) + dd];
#pragma unroll
            for (int b = 0; b < CN; ++b) {
                float kb = kc[(tx + TC * b) * (DC + 1) + dd];
#pragma unroll
                for (int a = 0; a < RM; ++a) sc[a][b] += qa[a] * kb;
            }
        }
    }
}

// acc[a][e] += Σ_j ss[ty + TR·a][j] · v[n0 + j][tx + TC·e], V staged through shared memory chunk by chunk.
__device__ __forceinline__ void tile_pv(const T* __restrict__ v, int n0, int end, const float* ss, float* vc,
                                        float acc[RM][DN]) {
    const int ty = threadIdx.x / TC, tx = threadIdx.x % TC;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        __syncthreads();
        load_chunk(v, n0, end - n0, c * DC, 1.0f, vc, BN);
        __syncthreads();
        for (int j = 0; j < BN; ++j) {
#pragma unroll
            for (int a = 0; a < RM; ++a) {
                float p = ss[(ty + TR * a) * (BN + 1) + j];
#pragma unroll
                for (int e = 0; e < EPC; ++e) acc[a][c * EPC + e] += p * vc[j * (DC + 1) + tx + TC * e];
            }
        }
    }
}
"""

KERNELS = r"""
extern "C" __global__ void __launch_bounds__(THREADS, 1)
attn_flash(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ out,
           int seq_len, float scale) {
    __shared__ float qc[BM * (DC + 1)];
    __shared__ float kc[BN * (DC + 1)];
    __shared__ float ss[BM * (BN + 1)];
    __shared__ float stats[3 * BM];  // running max, running sum, this tile's rescale factor
    __shared__ float part[2 * BM * 2];  // partial max and sum of the two threads of a row
    const int tid = threadIdx.x, ty = tid / TC, tx = tid % TC, r = tid / 2, half = tid % 2;
    const int q0 = blockIdx.x * BM, rows = min(BM, seq_len - q0), end = key_end(q0, seq_len);
    const long long off = (long long)blockIdx.y * seq_len * HEAD_DIM;
    const long long kv_off = (long long)(blockIdx.y / GROUP) * seq_len * HEAD_DIM;  // b·kv_heads + h / GROUP
    float acc[RM][DN] = {};
    if (tid < BM) {
        stats[tid] = NEG_INF;
        stats[BM + tid] = 0.0f;
    }
    for (int n0 = 0; n0 < end; n0 += BN) {
        float sc[RM][CN];
        tile_scores(q + off, k + kv_off, q0, rows, n0, end, scale, qc, kc, sc);
#pragma unroll
        for (int a = 0; a < RM; ++a)
#pragma unroll
            for (int b = 0; b < CN; ++b) {
                int i = ty + TR * a, j = tx + TC * b;
                ss[i * (BN + 1) + j] = visible(q0 + i, n0 + j, end) ? sc[a][b] : NEG_INF;
            }
        __syncthreads();
        float top = NEG_INF;
        for (int j = half; j < BN; j += 2) top = fmaxf(top, ss[r * (BN + 1) + j]);
        part[r * 2 + half] = top;
        __syncthreads();
        top = fmaxf(stats[r], fmaxf(part[r * 2], part[r * 2 + 1]));  // finite: key 0 is in the first tile
        float total = 0.0f;
        for (int j = half; j < BN; j += 2) {
            float p = expf(ss[r * (BN + 1) + j] - top);
            ss[r * (BN + 1) + j] = p;
            total += p;
        }
        part[2 * BM + r * 2 + half] = total;
        __syncthreads();
        if (half == 0) {
            float alpha = expf(stats[r] - top);
            stats[r] = top;
            stats[BM + r] = stats[BM + r] * alpha + part[2 * BM + r * 2] + part[2 * BM + r * 2 + 1];
            stats[2 * BM + r] = alpha;
        }
        __syncthreads();
#pragma unroll
        for (int a = 0; a < RM; ++a)
#pragma unroll
            for (int e = 0; e < DN; ++e) acc[a][e] *= stats[2 * BM + ty + TR * a];
        tile_pv(v + kv_off, n0, end, ss, kc, acc);
    }
#pragma unroll
    for (int a = 0; a < RM; ++a) {
        int i = ty + TR * a;
        if (i < rows) {
            float inv = 1.0f / stats[BM + i];
#pragma unroll
            for (int e = 0; e < DN; ++e)
                if (tx + TC * e < HEAD_DIM) store(out + off + (long long)(q0 + i) * HEAD_DIM + tx + TC * e, acc[a][e] * inv);
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
attn_scores(const T* __restrict__ q, const T* __restrict__ k, T* __restrict__ s, int seq_len, float scale) {
    __shared__ float qc[BM * (DC + 1)];
    __shared__ float kc[BN * (DC + 1)];
    const int ty = threadIdx.x / TC, tx = threadIdx.x % TC;
    const int q0 = blockIdx.x * BM, rows = min(BM, seq_len - q0), end = key_end(q0, seq_len);
    const long long off = (long long)blockIdx.y * seq_len * HEAD_DIM;
    const long long kv_off = (long long)(blockIdx.y / GROUP) * seq_len * HEAD_DIM;  // b·kv_heads + h / GROUP
    T* s_head = s + (long long)blockIdx.y * seq_len * seq_len;
    for (int n0 = 0; n0 < end; n0 += BN) {
        float sc[RM][CN];
        tile_scores(q + off, k + kv_off, q0, rows, n0, end, scale, qc, kc, sc);
#pragma unroll
        for (int a = 0; a < RM; ++a) {
            const int i = q0 + ty + TR * a;
            T* s_row = s_head + (long long)i * seq_len;
#pragma unroll
            for (int b = 0; b < CN; ++b)
                if (i < seq_len && visible(i, n0 + tx + TC * b, end)) store(s_row + n0 + tx + TC * b, sc[a][b]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(ROWS * ROW_THREADS)
attn_softmax(const T* __restrict__ s, T* __restrict__ p, long long total_rows, int seq_len) {
    __shared__ float red[2 * ROWS * ROW_THREADS];
    const int lane = threadIdx.x % ROW_THREADS, slot = threadIdx.x / ROW_THREADS;
    const long long row = (long long)blockIdx.x * ROWS + slot;
    const int i = (int)(row % seq_len);
    const int n = row >= total_rows ? 0 : CAUSAL ? i + 1 : seq_len;
    const T* x = s + row * seq_len;
    float m = NEG_INF, total = 0.0f;
    for (int j = lane; j < n; j += ROW_THREADS) {
        float xj = to_float(x[j]), top = fmaxf(m, xj);
        total = total * expf(m - top) + expf(xj - top);
        m = top;
    }
    float* rm = red + slot * ROW_THREADS;
    float* rs = red + (ROWS + slot) * ROW_THREADS;
    rm[lane] = m;
    rs[lane] = total;
    for (int step = ROW_THREADS / 2; step > 0; step /= 2) {
        __syncthreads();
        if (lane < step) {
            float m0 = rm[lane], m1 = rm[lane + step], top = fmaxf(m0, m1);
            if (top != NEG_INF) {  // a thread with no element holds (-inf, 0)
                rs[lane] = rs[lane] * expf(m0 - top) + rs[lane + step] * expf(m1 - top);
                rm[lane] = top;
            }
        }
    }
    __syncthreads();
    if (n > 0) {
        float top = rm[0], inv = 1.0f / rs[0];
        for (int j = lane; j < n; j += ROW_THREADS) store(p + row * seq_len + j, expf(to_float(x[j]) - top) * inv);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
attn_pv(const T* __restrict__ p, const T* __restrict__ v, T* __restrict__ out, int seq_len) {
    __shared__ float vc[BN * (DC + 1)];
    __shared__ float ss[BM * (BN + 1)];
    const int ty = threadIdx.x / TC, tx = threadIdx.x % TC;
    const int q0 = blockIdx.x * BM, rows = min(BM, seq_len - q0), end = key_end(q0, seq_len);
    const long long off = (long long)blockIdx.y * seq_len * HEAD_DIM;
    const long long kv_off = (long long)(blockIdx.y / GROUP) * seq_len * HEAD_DIM;  // b·kv_heads + h / GROUP
    const T* p_head = p + (long long)blockIdx.y * seq_len * seq_len;
    float acc[RM][DN] = {};
    for (int n0 = 0; n0 < end; n0 += BN) {
        __syncthreads();
        for (int idx = threadIdx.x; idx < BM * BN; idx += THREADS) {  // masked probabilities are zero, never read
            int i = idx / BN, j = idx % BN;
            bool seen = i < rows && visible(q0 + i, n0 + j, end);
            ss[i * (BN + 1) + j] = seen ? to_float(p_head[(long long)(q0 + i) * seq_len + n0 + j]) : 0.0f;
        }
        tile_pv(v + kv_off, n0, end, ss, vc, acc);
    }
#pragma unroll
    for (int a = 0; a < RM; ++a) {
        int i = ty + TR * a;
        if (i < rows)
#pragma unroll
            for (int e = 0; e < DN; ++e)
                if (tx + TC * e < HEAD_DIM) store(out + off + (long long)(q0 + i) * HEAD_DIM + tx + TC * e, acc[a][e]);
    }
}
"""

NAMES = {"fused": ("attn_flash",), "unfused": ("attn_scores", "attn_softmax", "attn_pv")}


def shared_bytes(block_m: int, block_n: int) -> int:
    """Static shared memory of the fused kernel (the largest of the four) for these tiles."""
    return 4 * ((block_m + block_n) * 33 + block_m * (block_n + 1) + 7 * block_m)


def group(params: dict) -> int:
    """Query heads per K/V head: 1 where the case names no kv_heads (multi-head attention)."""
    return int(params["heads"]) // int(params.get("kv_heads") or params["heads"])


def source(params: dict, dtype: str, prelude: str = DEVICE_PRELUDE) -> str:
    """The CUDA source of the four kernels for one tile shape, head_dim, mask and dtype."""
    config = CONFIG.format(
        block_m=int(params["block_m"]),
        block_n=int(params["block_n"]),
        head_dim=int(params["head_dim"]),
        causal=int(bool(params["causal"])),
        group=group(params),
        row_threads=ROW_THREADS,
        rows=ROWS,
        ctype=CTYPES[dtype],
    )
    return prelude + config + TILES + KERNELS
