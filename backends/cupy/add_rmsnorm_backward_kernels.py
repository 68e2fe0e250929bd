"""The CUDA C of CuPy's add_rmsnorm training kernels (`scenarios.add_rmsnorm.backward` has the math).

- `fused_forward_source`: the forward's fused kernel (`add_rmsnorm_kernels.FUSED_BODY`, its text reused) that also
  stores the row's rstd, the one tensor the fused backward needs that the forward would not otherwise write.
- `fused_backward_source`: a block of THREADS threads per row block of dweight's partials (the grid's x), walking
  its rows. A row of one chunk is loaded once into registers (h and dy[1], ITEMS a thread), its Σ g·γ·h block-summed
  and its gradients written from them; a wider row is walked twice, h and dy[1] read again (the ledger's re-read).
  Each thread adds dy[1]·h·rstd of its columns into the block's float32 partial row: in registers across the
  rows when the row is one chunk, else in the partial row itself (only that thread's columns, so no barrier).
- `weight_partials_source`, `statistic_grad_source`, `h_grad_source`: the unfused backward's own steps (its scale
  backward is the normalization family's scale step, `normalization_kernels.step_source("scale", ...)`).
- `reduce_source`: the partial rows summed in order into dweight, shared by both variants.

dweight takes no atomics: a block owns its partial row (written whole at every launch, zeros where it has no
rows) and the reduction sums the rows in block order, so the result does not depend on scheduling. Every kernel
carries `__launch_bounds__(THREADS, 1)` and the block reductions of `normalization_kernels` (whose docstring says
why); float16 travels as raw bits through `device.CONVERSIONS`.
"""

from __future__ import annotations

from backends.cupy.add_rmsnorm_kernels import FUSED_BODY
from backends.cupy.device import CONVERSIONS, CTYPES
from backends.cupy.normalization_kernels import HEAD, REDUCTIONS
from suite.kit.launch import cdiv

RSTD = "    const float rstd = 1.0f / sqrtf(block_sum(q, smem) / (float)cols + EPS);\n"
"""The forward's line that forms rstd; the saving kernel stores it right after."""

FUSED_BACKWARD = r"""
extern "C" __global__ void __launch_bounds__({THREADS}, 1)
{name}(const {T}* __restrict__ h, const float* __restrict__ rstd, const {T}* __restrict__ w,
       const {T}* __restrict__ dy0, const {T}* __restrict__ dy1, {T}* __restrict__ dx, {T}* __restrict__ dr,
       float* __restrict__ part, long long rows, long long cols) {{
    __shared__ float smem[32];
    float hv[{ITEMS}], gv[{ITEMS}], acc[{ITEMS}];
    #define VALID(k, start) (threadIdx.x + (k) * {THREADS} < {BLOCK} && (start) + threadIdx.x + (k) * {THREADS} < cols)
    #define COL(k, start) ((start) + threadIdx.x + (k) * {THREADS})
    #define EACH for (int k = 0; k < {ITEMS}; ++k)
    const long long per = (rows + gridDim.x - 1) / gridDim.x, r0 = (long long)blockIdx.x * per;
    const long long r1 = min(rows, r0 + per), chunks = (cols + {BLOCK} - 1) / {BLOCK};
    const float inv_cols = 1.0f / (float)cols;
    float* p = part + (long long)blockIdx.x * cols;
    #pragma unroll
    EACH acc[k] = 0.0f;
    if (chunks > 1) {{  // the partial row is added to in place: zero this thread's columns of it
        for (long long start = 0; start < cols; start += {BLOCK}) {{
            #pragma unroll
            EACH if (VALID(k, start)) p[COL(k, start)] = 0.0f;
        }}
    }}
    for (long long r = r0; r < r1; ++r) {{
        const long long row = r * cols;
        const float rs = rstd[r];
        float s = 0.0f;
        for (long long start = 0; start < cols; start += {BLOCK}) {{
            #pragma unroll
            EACH if (VALID(k, start)) {{
                const long long c = COL(k, start);
                hv[k] = load(h + row + c);
                gv[k] = load(dy1 + row + c);
                s += gv[k] * load(w + c) * hv[k];
            }}
        }}
        const float kk = rs * rs * rs * block_sum(s, smem) * inv_cols;
        for (long long start = 0; start < cols; start += {BLOCK}) {{
            #pragma unroll
            EACH if (VALID(k, start)) {{
                const long long c = COL(k, start);
                if (chunks > 1) {{  // the second walk: h and dy[1] read again
                    hv[k] = load(h + row + c);
                    gv[k] = load(dy1 + row + c);
                }}
                const float v = load(dy0 + row + c) + rs * gv[k] * load(w + c) - kk * hv[k];
                store(dx + row + c, v);
                store(dr + row + c, v);
                if (chunks == 1) acc[k] += gv[k] * hv[k] * rs;
                else p[c] += gv[k] * hv[k] * rs;
            }}
        }}
    }}
    if (chunks == 1) {{
        #pragma unroll
        EACH if (VALID(k, 0)) p[COL(k, 0)] = acc[k];
    }}
}}
"""

REDUCE = r"""
extern "C" __global__ void __launch_bounds__({THREADS}, 1)
{name}(const float* __restrict__ part, {T}* __restrict__ dw, long long blocks, long long cols) {{
    const long long start = (long long)blockIdx.x * {BLOCK};
    for (int k = 0; k < {ITEMS}; ++k) {{
        const long long c = start + threadIdx.x + k * {THREADS};
        if (threadIdx.x + k * {THREADS} < {BLOCK} && c < cols) {{
            float total = part[c];
            for (long long b = 1; b < blocks; ++b) total += part[b * cols + c];
            store(dw + c, total);
        }}
    }}
}}
"""

WEIGHT_PARTIALS = r"""
extern "C" __global__ void __launch_bounds__({THREADS}, 1)
{name}(const {T}* __restrict__ dy1, const {T}* __restrict__ hhat, float* __restrict__ part, long long rows,
       long long cols) {{
    const long long per = (rows + gridDim.x - 1) / gridDim.x, r0 = (long long)blockIdx.x * per;
    const long long r1 = min(rows, r0 + per), start = (long long)blockIdx.y * {BLOCK};
    for (int k = 0; k < {ITEMS}; ++k) {{
        const long long c = start + threadIdx.x + k * {THREADS};
        if (threadIdx.x + k * {THREADS} < {BLOCK} && c < cols) {{
            float total = 0.0f;
            for (long long r = r0; r < r1; ++r) total += load(dy1 + r * cols + c) * load(hhat + r * cols + c);
            part[(long long)blockIdx.x * cols + c] = total;
        }}
    }}
}}
"""

STATISTIC_GRAD = r"""
extern "C" __global__ void __launch_bounds__({THREADS}, 1)
{name}(const {T}* __restrict__ dhhat, const {T}* __restrict__ h, const float* __restrict__ ms,
       float* __restrict__ dms, long long cols) {{
    __shared__ float smem[32];
    const long long row = (long long)blockIdx.x * cols;
    float s = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += {THREADS}) s += load(dhhat + row + c) * load(h + row + c);
    s = block_sum(s, smem);
    if (threadIdx.x == 0) {{
        const float rs = 1.0f / sqrtf(ms[blockIdx.x] + EPS);
        dms[blockIdx.x] = -0.5f * rs * rs * rs * s;
    }}
}}
"""

H_GRAD = r"""
extern "C" __global__ void __launch_bounds__({THREADS}, 1)
{name}(const {T}* __restrict__ dy0, const {T}* __restrict__ dhhat, const {T}* __restrict__ h,
       const float* __restrict__ ms, const float* __restrict__ dms, {T}* __restrict__ dx, {T}* __restrict__ dr,
       long long cols) {{
    const long long row = (long long)blockIdx.x * cols, start = (long long)blockIdx.y * {BLOCK};
    const float rs = 1.0f / sqrtf(ms[blockIdx.x] + EPS), d = dms[blockIdx.x] * (2.0f / (float)cols);
    for (int k = 0; k < {ITEMS}; ++k) {{
        const long long c = start + threadIdx.x + k * {THREADS};
        if (threadIdx.x + k * {THREADS} < {BLOCK} && c < cols) {{
            const float v = load(dy0 + row + c) + load(dhhat + row + c) * rs + d * load(h + row + c);
            store(dx + row + c, v);
            store(dr + row + c, v);
        }}
    }}
}}
"""


def _shape(dtype: str, block: int, threads: int) -> dict:
    return {"T": CTYPES[dtype], "BLOCK": block, "THREADS": threads, "ITEMS": cdiv(block, threads)}


def fused_forward_source(dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of the forward's fused kernel also writing rstd[row]."""
    name = f"add_rmsnorm_fused_saving_{dtype}_b{block}_t{threads}"
    t = CTYPES[dtype]
    params = (
        f"const {t}* __restrict__ x, const {t}* __restrict__ r, const {t}* __restrict__ w, "
        f"{t}* __restrict__ h, {t}* __restrict__ y, float* __restrict__ rstd_out"
    )
    shape = _shape(dtype, block, threads)
    body = FUSED_BODY.format(**shape)
    if RSTD not in body:
        raise RuntimeError("the forward's fused kernel no longer forms rstd as the saving kernel expects")
    body = body.replace(RSTD, RSTD + "    if (threadIdx.x == 0) rstd_out[blockIdx.x] = rstd;\n")
    return CONVERSIONS + REDUCTIONS + HEAD.format(name=name, params=params, **shape) + body, name


def _source(template: str, stem: str, dtype: str, block: int, threads: int) -> tuple[str, str]:
    name = f"add_rmsnorm_{stem}_{dtype}_b{block}_t{threads}"
    return CONVERSIONS + REDUCTIONS + template.format(name=name, **_shape(dtype, block, threads)), name


def fused_backward_source(dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of the fused backward on a grid of row blocks."""
    return _source(FUSED_BACKWARD, "backward", dtype, block, threads)


def reduce_source(dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of the partials' reduction on a grid of column chunks."""
    return _source(REDUCE, "dweight_reduce", dtype, block, threads)


def weight_partials_source(dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of the unfused partials of dy[1]·ĥ on a (row blocks, chunks) grid."""
    return _source(WEIGHT_PARTIALS, "dweight_partials", dtype, block, threads)


def statistic_grad_source(dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of dms, a block per row."""
    return _source(STATISTIC_GRAD, "dms", dtype, block, threads)


def h_grad_source(dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of h's gradient into dx and dresidual on a (rows, chunks) grid."""
    return _source(H_GRAD, "h_grad", dtype, block, threads)
