"""The CUDA C of CuPy's row normalization kernels: the fused kernel of each op and the unfused step templates.

Kernel text apart from the entries that compile and launch it (`backends.cupy.normalization`), so that either
reads on its own. Sources are generated per chunk shape: BLOCK columns per chunk, THREADS threads per row,
ITEMS = BLOCK / THREADS values per thread (compile-time constants, so the chunk stays in registers). Every
kernel carries `__launch_bounds__(THREADS, 1)`: unbounded, ptxas may give a thread more registers than a
block of THREADS can have (72 for layernorm's 16 values a thread, over the 64 of a 1024-thread block), and
the launch fails with "too many resources requested"; bounded, it fits the block or reports the spill. The 1
(one resident block suffices) lets a thread have all the block leaves it: `__launch_bounds__(256)` alone made
ptxas stop at 128 registers and spill the 64 values a thread of a 16384-column chunk holds.
Block reductions use warp shuffles, then every warp reduces the per-warp partials itself, so each thread
holds the total without another barrier.
"""

from __future__ import annotations

from backends.cupy.device import CONVERSIONS, CTYPES
from scenarios.normalization import EPS, kind
from suite.core import scenario
from suite.kit.launch import cdiv

REDUCTIONS = rf"""
#define EPS {EPS!r}f
#define NEG_INF __int_as_float(0xff800000)
__device__ __forceinline__ float warp_sum(float v) {{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}}
__device__ __forceinline__ float warp_max(float v) {{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}}
// The block's total in every thread: each warp reduces the per-warp partials itself (blockDim.x % 32 == 0).
__device__ float block_sum(float v, float* smem) {{
    v = warp_sum(v);
    __syncthreads();  // the previous reduction has read smem
    if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    return warp_sum(lane < (int)(blockDim.x >> 5) ? smem[lane] : 0.0f);
}}
__device__ float block_max(float v, float* smem) {{
    v = warp_max(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    return warp_max(lane < (int)(blockDim.x >> 5) ? smem[lane] : NEG_INF);
}}
"""

HEAD = r"""
extern "C" __global__ void __launch_bounds__({THREADS}, 1) {name}({params}, long long cols) {{
    __shared__ float smem[32];
    const long long row = (long long)blockIdx.x * cols;
    float v[{ITEMS}];
    #define VALID(k, start) (threadIdx.x + (k) * {THREADS} < {BLOCK} && (start) + threadIdx.x + (k) * {THREADS} < cols)
    #define COL(k, start) ((start) + threadIdx.x + (k) * {THREADS})
    #define EACH for (int k = 0; k < {ITEMS}; ++k)
    const long long chunks = (cols + {BLOCK} - 1) / {BLOCK};
"""
"""Each fused kernel: row offset, registers for a chunk, and VALID/COL for item k of the chunk at `start`."""

FUSED_BODY = {
    "layernorm": r"""
    float mean = 0.0f, m2 = 0.0f, count = 0.0f;
    for (long long i = 0; i < chunks; ++i) {{  // one chunk when cols <= BLOCK: then v[] is the row
        const long long start = i * {BLOCK};
        const float n = (float)min((long long){BLOCK}, cols - start);
        float s = 0.0f;
        #pragma unroll
        EACH {{ v[k] = VALID(k, start) ? load(x + row + COL(k, start)) : 0.0f; s += v[k]; }}
        const float mean_c = block_sum(s, smem) / n;
        float q = 0.0f;
        #pragma unroll
        EACH {{ const float d = VALID(k, start) ? v[k] - mean_c : 0.0f; q += d * d; }}
        const float m2_c = block_sum(q, smem), total = count + n, delta = mean_c - mean;
        mean += delta * (n / total);  // Chan et al.; exact for the first chunk
        m2 += m2_c + delta * delta * (count * n / total);
        count = total;
    }}
    const float rstd = 1.0f / sqrtf(m2 / (float)cols + EPS);
    if (chunks == 1) {{
        #pragma unroll
        EACH if (VALID(k, 0)) store(y + row + COL(k, 0), (v[k] - mean) * rstd * load(w + COL(k, 0)) + load(b + COL(k, 0)));
        return;
    }}
    for (long long start = 0; start < cols; start += {BLOCK}) {{  // the re-read
        #pragma unroll
        EACH if (VALID(k, start)) {{
            const long long c = COL(k, start);
            store(y + row + c, (load(x + row + c) - mean) * rstd * load(w + c) + load(b + c));
        }}
    }}
""",
    "rmsnorm": r"""
    float q = 0.0f;
    for (long long start = 0; start < cols; start += {BLOCK}) {{
        #pragma unroll
        EACH {{ v[k] = VALID(k, start) ? load(x + row + COL(k, start)) : 0.0f; q += v[k] * v[k]; }}
    }}
    const float rstd = 1.0f / sqrtf(block_sum(q, smem) / (float)cols + EPS);
    if (chunks == 1) {{
        #pragma unroll
        EACH if (VALID(k, 0)) store(y + row + COL(k, 0), v[k] * rstd * load(w + COL(k, 0)));
        return;
    }}
    for (long long start = 0; start < cols; start += {BLOCK}) {{  // the re-read
        #pragma unroll
        EACH if (VALID(k, start)) {{
            const long long c = COL(k, start);
            store(y + row + c, load(x + row + c) * rstd * load(w + c));
        }}
    }}
""",
    "softmax": r"""
    float m = NEG_INF, total = 0.0f;
    for (long long i = 0; i < chunks; ++i) {{  // online softmax: rescale the running sum when the max grows
        const long long start = i * {BLOCK};
        float mc = NEG_INF;
        #pragma unroll
        EACH {{ v[k] = VALID(k, start) ? load(x + row + COL(k, start)) : NEG_INF; mc = fmaxf(mc, v[k]); }}
        const float m_new = fmaxf(m, block_max(mc, smem));
        float s = 0.0f;
        #pragma unroll
        EACH {{ v[k] = expf(v[k] - m_new); s += v[k]; }}  // exp(-inf) = 0 for the invalid items
        total = total * expf(m - m_new) + block_sum(s, smem);
        m = m_new;
    }}
    const float inv = 1.0f / total;
    if (chunks == 1) {{
        #pragma unroll
        EACH if (VALID(k, 0)) store(y + row + COL(k, 0), v[k] * inv);
        return;
    }}
    for (long long start = 0; start < cols; start += {BLOCK}) {{  // the re-read
        #pragma unroll
        EACH if (VALID(k, start)) {{
            const long long c = COL(k, start);
            store(y + row + c, expf(load(x + row + c) - m) * inv);
        }}
    }}
""",
}

C_NAMES = {"x": "x", "weight": "w", "bias": "b"}
"""An input's name in the kernels' parameter lists."""


def fused_params(op: str, ctype: str) -> str:
    """The fused kernel's parameters: the scenario's inputs in their order, then y."""
    inputs = [f"const {ctype}* __restrict__ {C_NAMES[n]}" for n in scenario.get(op).inputs]
    return ", ".join([*inputs, f"{ctype}* __restrict__ y"])


REDUCE = r"""
extern "C" __global__ void __launch_bounds__({THREADS}, 1)
{name}(const {T}* __restrict__ src, float* __restrict__ stat, long long cols) {{
    __shared__ float smem[32];
    const {T}* r = src + (long long)blockIdx.x * cols;
    float acc = {init};
    for (long long c = threadIdx.x; c < cols; c += {THREADS}) {{
        const float v = load(r + c);
        acc = {combine};
    }}
    acc = {block}(acc, smem);
    if (threadIdx.x == 0) stat[blockIdx.x] = {finish};
}}
"""
REDUCE_OPS = {
    "mean": ("0.0f", "acc + v", "block_sum", "acc / (float)cols"),
    "mean_square": ("0.0f", "acc + v * v", "block_sum", "acc / (float)cols"),
    "max": ("NEG_INF", "fmaxf(acc, v)", "block_max", "acc"),
    "sum": ("0.0f", "acc + v", "block_sum", "acc"),
}

ELEMENTWISE = r"""
extern "C" __global__ void __launch_bounds__({THREADS}, 1)
{name}(const {T}* __restrict__ src, const float* __restrict__ stat, const {T}* __restrict__ w,
       const {T}* __restrict__ b, {T}* __restrict__ dst, long long cols) {{
    const long long row = (long long)blockIdx.x * cols, start = (long long)blockIdx.y * {BLOCK};
    const float s = {prepare};
    for (int k = 0; k < {ITEMS}; ++k) {{
        const long long c = start + threadIdx.x + k * {THREADS};
        if (threadIdx.x + k * {THREADS} < {BLOCK} && c < cols) {{
            const float v = load(src + row + c);
            store(dst + row + c, {expr});
        }}
    }}
}}
"""
ELEMENTWISE_OPS = {
    "center": ("stat[blockIdx.x]", "v - s"),
    "shift": ("stat[blockIdx.x]", "v - s"),
    "normalize": ("1.0f / sqrtf(stat[blockIdx.x] + EPS)", "v * s"),
    "divide": ("1.0f / stat[blockIdx.x]", "v * s"),
    "exp": ("0.0f", "expf(v)"),
    "scale": ("0.0f", "v * load(w + c)"),
    "scale_shift": ("0.0f", "v * load(w + c) + load(b + c)"),
}
"""op -> (per-row prepared value s, output expression of v); unused pointers are passed a placeholder."""


def fused_source(op: str, dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of the fused kernel for chunks of `block` columns and `threads` threads."""
    name = f"{op}_fused_{dtype}_b{block}_t{threads}"
    shape = {"T": CTYPES[dtype], "BLOCK": block, "THREADS": threads, "ITEMS": cdiv(block, threads)}
    head = HEAD.format(name=name, params=fused_params(op, CTYPES[dtype]), **shape)
    return CONVERSIONS + REDUCTIONS + head + FUSED_BODY[op].format(**shape) + "}\n", name


def step_source(op: str, dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of one unfused step."""
    name = f"{op}_step_{dtype}_b{block}_t{threads}"
    shape = {"name": name, "T": CTYPES[dtype], "BLOCK": block, "THREADS": threads, "ITEMS": cdiv(block, threads)}
    if kind(op) == "reduce":
        init, combine, block_fn, finish = REDUCE_OPS[op]
        body = REDUCE.format(init=init, combine=combine, block=block_fn, finish=finish, **shape)
    else:
        prepare, expr = ELEMENTWISE_OPS[op]
        body = ELEMENTWISE.format(prepare=prepare, expr=expr, **shape)
    return CONVERSIONS + REDUCTIONS + body, name
