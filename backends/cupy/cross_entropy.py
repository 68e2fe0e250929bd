"""Cross-entropy in CuPy: generated CUDA C with the structure of the Numba CUDA kernels, a block per token.

Fused: each thread strides over the row with its own online max and rescaled sum, the block merges them (warp
shuffles, then the per-warp partials: the normalization family's `REDUCTIONS`) and thread 0 writes the token's
loss. Unfused: log-softmax (logp in the case's dtype), gather, and the mean both variants end with. float16
travels as raw bits (`backends.cupy.device`); targets as 64-bit integers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET
from backends.cupy.build import build
from backends.cupy.device import CONVERSIONS, CTYPES
from backends.cupy.normalization_kernels import REDUCTIONS
from scenarios.cross_entropy import IGNORE_INDEX
from suite.core.registry import Launch, kernel
from suite.kit.launch_shape import block_chosen_by, launch_notes

STATS = r"""
#define IGNORE ({ignore}LL)
// (max, sum of exp(x - max)) of row `row` in every thread of the block.
__device__ float2 row_stats(const {T}* __restrict__ x, long long row, long long vocab, float* smem) {{
    float m = NEG_INF, s = 0.0f;
    for (long long j = threadIdx.x; j < vocab; j += blockDim.x) {{
        const float v = load(x + row * vocab + j);
        if (v > m) {{ s = s * expf(m - v) + 1.0f; m = v; }} else {{ s += expf(v - m); }}
    }}
    const float big = block_max(m, smem);
    return make_float2(big, block_sum(m > NEG_INF ? s * expf(m - big) : 0.0f, smem));
}}
"""

KERNELS = {
    "rows": r"""
extern "C" __global__ void {name}(const {T}* __restrict__ x, const long long* __restrict__ targets,
                                  float* __restrict__ losses, long long vocab) {{
    __shared__ float smem[32];
    const long long row = blockIdx.x;
    const float2 st = row_stats(x, row, vocab, smem);
    if (threadIdx.x == 0) {{
        const long long t = targets[row];
        losses[row] = t == IGNORE ? 0.0f : st.x + logf(st.y) - load(x + row * vocab + t);
    }}
}}""",
    "log_softmax": r"""
extern "C" __global__ void {name}(const {T}* __restrict__ x, {T}* __restrict__ logp, long long vocab) {{
    __shared__ float smem[32];
    const long long row = blockIdx.x;
    const float2 st = row_stats(x, row, vocab, smem);
    const float shift = st.x + logf(st.y);
    for (long long j = threadIdx.x; j < vocab; j += blockDim.x) store(logp + row * vocab + j, load(x + row * vocab + j) - shift);
}}""",
    "gather": r"""
extern "C" __global__ void {name}(const {T}* __restrict__ logp, const long long* __restrict__ targets,
                                  float* __restrict__ losses, long long tokens, long long vocab) {{
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row < tokens) {{
        const long long t = targets[row];
        losses[row] = t == IGNORE ? 0.0f : -load(logp + row * vocab + t);
    }}
}}""",
    "mean": r"""
extern "C" __global__ void {name}(const float* __restrict__ losses, const long long* __restrict__ targets,
                                  {T}* __restrict__ out, long long tokens) {{
    __shared__ float smem[32];
    float total = 0.0f, count = 0.0f;
    for (long long i = threadIdx.x; i < tokens; i += blockDim.x)
        if (targets[i] != IGNORE) {{ total += losses[i]; count += 1.0f; }}
    total = block_sum(total, smem);
    count = block_sum(count, smem);
    if (threadIdx.x == 0) store(out, total / count);
}}""",
}


def source(name: str, dtype: str) -> tuple[str, str]:
    """(CUDA source, kernel name) of kernel `name` over logits of `dtype`."""
    kernel_name = f"ce_{name}_{dtype}"
    text = STATS.format(T=CTYPES[dtype], ignore=IGNORE_INDEX) + KERNELS[name].format(name=kernel_name, T=CTYPES[dtype])
    return CONVERSIONS + REDUCTIONS + text, kernel_name


@kernel(scenario="cross_entropy", backend="cupy", variant=("fused", "unfused"))
def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """The variant's RawKernels (the module's docstring says what each computes), launched in order on one stream."""
    names = {"fused": ("rows", "mean"), "unfused": ("log_softmax", "gather", "mean")}[variant]
    x, targets = inputs["logits"], inputs["targets"]
    (tokens, vocab), dtype = x.shape, np.dtype(out.dtype).name
    threads = int(BACKEND.option(opts, "block") or 256)
    losses = TARGET.empty((tokens,), "float32")
    logp = TARGET.empty(x.shape, dtype) if "log_softmax" in names else None
    t, v = np.int64(tokens), np.int64(vocab)
    plan = {
        "rows": (tokens, (x, targets, losses, v)),
        "log_softmax": (tokens, (x, logp, v)),
        "gather": (-(-tokens // threads), (logp, targets, losses, t, v)),
        "mean": (1, (losses, targets, out, t)),
    }
    launches = [(build(*source(name, dtype), threads=threads), plan[name][0], plan[name][1]) for name in names]
    context = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for k, grid, args in launches:
                k((grid,), (threads,), args)

    by = block_chosen_by(BACKEND.option(opts, "block"))
    return Launch(launch, notes=launch_notes({"threads": threads}, (tokens,), by, kernels=len(launches)))
