"""The CUDA C of CuPy's add_rmsnorm kernels: the fused kernel and the unfused residual add.

The fused kernel is the rmsnorm fused kernel of `normalization_kernels` (its head, block reductions and float16
conversions, reused as they are) with the add in front: a block of THREADS threads owns a row, each thread
holds ITEMS = BLOCK / THREADS values of h = x + residual in registers, stores h as it forms it, and writes y from
the registers when the row is one chunk; a wider row is walked again, x and residual re-read and h recomputed,
so y never depends on h's rounding to storage. rmsnorm's unfused steps are `normalization_kernels.step_source`.
"""

from __future__ import annotations

from backends.cupy.device import CONVERSIONS, CTYPES
from backends.cupy.normalization_kernels import HEAD, REDUCTIONS
from suite.kit.launch import cdiv

FUSED_BODY = r"""
    float q = 0.0f;
    for (long long start = 0; start < cols; start += {BLOCK}) {{
        #pragma unroll
        EACH {{
            const bool valid = VALID(k, start);
            const long long c = COL(k, start);
            v[k] = valid ? load(x + row + c) + load(r + row + c) : 0.0f;
            if (valid) store(h + row + c, v[k]);
            q += v[k] * v[k];
        }}
    }}
    const float rstd = 1.0f / sqrtf(block_sum(q, smem) / (float)cols + EPS);
    if (chunks == 1) {{
        #pragma unroll
        EACH if (VALID(k, 0)) store(y + row + COL(k, 0), v[k] * rstd * load(w + COL(k, 0)));
        return;
    }}
    for (long long start = 0; start < cols; start += {BLOCK}) {{  // the re-read of x and residual
        #pragma unroll
        EACH if (VALID(k, start)) {{
            const long long c = COL(k, start);
            store(y + row + c, (load(x + row + c) + load(r + row + c)) * rstd * load(w + c));
        }}
    }}
}}
"""

ADD = r"""
extern "C" __global__ void __launch_bounds__({THREADS}, 1)
{name}(const {T}* __restrict__ x, const {T}* __restrict__ r, {T}* __restrict__ h, long long cols) {{
    const long long row = (long long)blockIdx.x * cols, start = (long long)blockIdx.y * {BLOCK};
    for (int k = 0; k < {ITEMS}; ++k) {{
        const long long c = start + threadIdx.x + k * {THREADS};
        if (threadIdx.x + k * {THREADS} < {BLOCK} && c < cols) store(h + row + c, load(x + row + c) + load(r + row + c));
    }}
}}
"""


def _shape(dtype: str, block: int, threads: int) -> dict:
    return {"T": CTYPES[dtype], "BLOCK": block, "THREADS": threads, "ITEMS": cdiv(block, threads)}


def fused_source(dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of the fused kernel for chunks of `block` columns and `threads` threads."""
    name = f"add_rmsnorm_fused_{dtype}_b{block}_t{threads}"
    t = CTYPES[dtype]
    params = (
        f"const {t}* __restrict__ x, const {t}* __restrict__ r, const {t}* __restrict__ w, "
        f"{t}* __restrict__ h, {t}* __restrict__ y"
    )
    shape = _shape(dtype, block, threads)
    return CONVERSIONS + REDUCTIONS + HEAD.format(name=name, params=params, **shape) + FUSED_BODY.format(**shape), name


def add_source(dtype: str, block: int, threads: int) -> tuple[str, str]:
    """(CUDA source, kernel name) of the unfused residual add on a (rows, chunks) grid."""
    name = f"residual_add_{dtype}_b{block}_t{threads}"
    return CONVERSIONS + ADD.format(name=name, **_shape(dtype, block, threads)), name
