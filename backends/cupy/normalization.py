"""Row normalization (layernorm, rmsnorm, softmax) in CuPy: generated CUDA C, one thread block per row when fused.

Fused: a block of THREADS threads owns a row. A chunk is BLOCK = min(tile, next power of two ≥ cols) columns,
ITEMS = BLOCK / THREADS of them per thread, held in registers. A row of at most BLOCK columns is loaded once and
normalised from registers; a wider row is walked chunk by chunk for its statistics (Chan's merge of chunk means
and M2, or an online max with a rescaled sum) and read again to write the output — the ledger's re-read.
Block reductions use warp shuffles, then every warp reduces the per-warp partials itself, so each thread holds
the total without another barrier.

Unfused walks the scenario's decomposition: a row reduction per statistic (one block per row, a strided loop),
and one elementwise kernel per matrix step on a (rows, cdiv(cols, BLOCK)) grid. Matrices are stored in the
case's dtype, statistics in float32. float16 is handled as raw bits with the conversions of `backends.cupy.device`
(no cuda_fp16.h: NVRTC from the wheels has no include path); sqrtf, division and expf are the accurate
ones, the same in both variants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET
from backends.cupy.build import build
from backends.cupy.device import CONVERSIONS, CTYPES
from scenarios.normalization import DECOMPOSITIONS, EPS, ROW_STATS, kind
from suite.core.launch import cdiv, chunk_columns, row_threads
from suite.core.registry import kernel

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
extern "C" __global__ void {name}({params}, long long cols) {{
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

FUSED_PARAMS = {
    "layernorm": "const {T}* __restrict__ x, const {T}* __restrict__ w, const {T}* __restrict__ b, {T}* __restrict__ y",
    "rmsnorm": "const {T}* __restrict__ x, const {T}* __restrict__ w, {T}* __restrict__ y",
    "softmax": "const {T}* __restrict__ x, {T}* __restrict__ y",
}

REDUCE = r"""
extern "C" __global__ void {name}(const {T}* __restrict__ src, float* __restrict__ stat, long long cols) {{
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
extern "C" __global__ void {name}(const {T}* __restrict__ src, const float* __restrict__ stat,
        const {T}* __restrict__ w, const {T}* __restrict__ b, {T}* __restrict__ dst, long long cols) {{
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
    head = HEAD.format(name=name, params=FUSED_PARAMS[op].format(**shape), **shape)
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


def _compiled(source: tuple[str, str], threads: int) -> Any:
    """The kernel, recorded for the resource report (`build` caches the compile)."""
    return build(*source, threads=threads)


def geometry(cols: int, params: dict, opts: dict) -> tuple[int, int]:
    """(BLOCK, THREADS) of a case: its chunk of columns, and the threads given a row for the options `block` and
    `max_items` (the latter shows what a fused kernel holding too much of its row per thread costs)."""
    block = chunk_columns(cols, int(params["tile"]))
    return block, row_threads(block, BACKEND.option(opts, "block"), BACKEND.option(opts, "max_items"))


def _launcher(launches: list[tuple[Any, tuple[int, ...], tuple[Any, ...]]], threads: int, opts: dict) -> Callable:
    context = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for k, grid, args in launches:
                k(grid, (threads,), args)

    return launch


def fused_entry(op: str, inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Callable[[], None]:
    rows, cols = out.shape
    (block, threads), dtype = geometry(cols, params, opts), np.dtype(out.dtype).name
    k = _compiled(fused_source(op, dtype, block, threads), threads)
    names = {"layernorm": ("x", "weight", "bias"), "rmsnorm": ("x", "weight"), "softmax": ("x",)}[op]
    return _launcher([(k, (rows,), (*(inputs[n] for n in names), out, np.int64(cols)))], threads, opts)


def unfused_entry(op: str, inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Callable[[], None]:
    rows, cols = out.shape
    (block, threads), dtype = geometry(cols, params, opts), np.dtype(out.dtype).name
    env = dict(inputs) | {"y": out}
    placeholder = TARGET.empty((1,), "float32")
    launches = []
    for st in DECOMPOSITIONS[op]:
        if st.writes not in env:
            env[st.writes] = TARGET.empty((rows,) if st.writes in ROW_STATS else (rows, cols),
                                          "float32" if st.writes in ROW_STATS else dtype)  # fmt: skip
        k = _compiled(step_source(st.op, dtype, block, threads), threads)
        src, dst = env[st.reads[0]], env[st.writes]
        if kind(st.op) == "reduce":
            launches.append((k, (rows,), (src, dst, np.int64(cols))))
            continue
        stat = env[st.reads[1]] if kind(st.op) == "rowwise" else placeholder
        w, b = env.get("weight", src), env.get("bias", src)
        launches.append((k, (rows, cdiv(cols, block)), (src, stat, w, b, dst, np.int64(cols))))
    return _launcher(launches, threads, opts)


def _register(op: str) -> None:
    @kernel(scenario=op, backend="cupy", variant="fused", device="cuda")
    def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Callable[[], None]:
        return fused_entry(op, inputs, out, params, opts)

    @kernel(scenario=op, backend="cupy", variant="unfused", device="cuda")
    def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Callable[[], None]:
        return unfused_entry(op, inputs, out, params, opts)


for _op in DECOMPOSITIONS:
    _register(_op)
