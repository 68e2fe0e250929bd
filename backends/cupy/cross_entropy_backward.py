"""Cross-entropy's backward and training step in CuPy: generated CUDA C with the structure of the Numba CUDA
kernels, the gradient written by the forward's own row block (fused, Liger-Kernel's approach) against a backward
kernel reading the saved log-softmax (unfused). A block per token, as the forward module's kernels.

dlogits = (softmax(x) − onehot(target))·dy/counted, zero on rows whose target is ignore_index; `counted` is the
number of tokens not ignored. No block can wait for another, so every row block counts the targets itself (its
threads stride over them, then a block sum) before it scales its row: the targets come from DRAM once and from L2
after, which keeps the ledger's kernels (no counting kernel, no host-side sum).

Fused forward: an ignored row writes zeros and a zero loss without reading its logits; any other takes the row's
max and sum (`row_stats`, the forward's), thread 0 writes its loss, then the block walks the row again while it
sits in L2 writing (exp(x − max)/sum − onehot)·dy/counted; the forward's mean kernel follows. It saves only the
gradient. In a training step (`grads` handed) the gradient's buffer is the output's own and the backward launches
nothing; in the backward phase the backward copies the saved gradient into the output (a grid-stride copy,
COPY_ITEMS elements a thread). Unfused forward: the forward module's log-softmax, gather and mean kernels, logp
kept with the targets; its backward writes (exp(logp) − onehot)·dy/counted. float16 travels as raw bits, float32
arithmetic; without a GPU every kernel is compiled for sm_90 and recorded, and launching raises NotRunnable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET
from backends.cupy import cross_entropy as forward
from backends.cupy.build import build
from backends.cupy.device import CONVERSIONS, CTYPES
from backends.cupy.normalization_kernels import REDUCTIONS
from scenarios.cross_entropy import IGNORE_INDEX
from suite.kit.launch_shape import block_chosen_by, launch_notes
from suite.kit.training import Pass, training

COPY_ITEMS = 4
"""Elements each thread of the copy moves (grid-stride, so consecutive threads take consecutive elements)."""

COUNTED = r"""
// The number of targets that are not ignore_index, in every thread of the block.
__device__ float counted(const long long* __restrict__ targets, long long tokens, float* smem) {
    float c = 0.0f;
    for (long long i = threadIdx.x; i < tokens; i += blockDim.x) c += targets[i] != IGNORE ? 1.0f : 0.0f;
    return block_sum(c, smem);
}
"""

KERNELS = {
    "rows_grad": r"""
extern "C" __global__ void {name}(const {T}* __restrict__ x, const long long* __restrict__ targets,
                                  const {T}* __restrict__ dy, float* __restrict__ losses, {T}* __restrict__ grad,
                                  long long tokens, long long vocab) {{
    __shared__ float smem[32];
    const long long row = blockIdx.x;
    const long long t = targets[row];  // the same in every thread: the block takes one branch, barriers included
    {T}* g = grad + row * vocab;
    if (t == IGNORE) {{
        if (threadIdx.x == 0) losses[row] = 0.0f;
        for (long long j = threadIdx.x; j < vocab; j += blockDim.x) store(g + j, 0.0f);
        return;
    }}
    const float scale = load(dy) / counted(targets, tokens, smem);
    const float2 st = row_stats(x, row, vocab, smem);
    const {T}* r = x + row * vocab;
    if (threadIdx.x == 0) losses[row] = st.x + logf(st.y) - load(r + t);
    const float inv = 1.0f / st.y;
    for (long long j = threadIdx.x; j < vocab; j += blockDim.x) {{
        const float p = expf(load(r + j) - st.x) * inv;
        store(g + j, (j == t ? p - 1.0f : p) * scale);
    }}
}}""",
    "logp_backward": r"""
extern "C" __global__ void {name}(const {T}* __restrict__ logp, const long long* __restrict__ targets,
                                  const {T}* __restrict__ dy, {T}* __restrict__ grad, long long tokens,
                                  long long vocab) {{
    __shared__ float smem[32];
    const long long row = blockIdx.x;
    const long long t = targets[row];
    {T}* g = grad + row * vocab;
    if (t == IGNORE) {{
        for (long long j = threadIdx.x; j < vocab; j += blockDim.x) store(g + j, 0.0f);
        return;
    }}
    const float scale = load(dy) / counted(targets, tokens, smem);
    const {T}* lp = logp + row * vocab;
    for (long long j = threadIdx.x; j < vocab; j += blockDim.x) {{
        const float p = expf(load(lp + j));
        store(g + j, (j == t ? p - 1.0f : p) * scale);
    }}
}}""",
    "copy": r"""
extern "C" __global__ void {name}(const {T}* __restrict__ src, {T}* __restrict__ dst, long long n) {{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}}""",
}


def source(name: str, dtype: str) -> tuple[str, str]:
    """(CUDA source, kernel name) of backward kernel `name` over logits of `dtype`."""
    kernel_name = f"ce_{name}_{dtype}"
    stats = forward.STATS.format(T=CTYPES[dtype], ignore=IGNORE_INDEX)
    text = stats + COUNTED + KERNELS[name].format(name=kernel_name, T=CTYPES[dtype])
    return CONVERSIONS + REDUCTIONS + text, kernel_name


Step = tuple[Any, int, tuple[Any, ...]]


def _pass(steps: list[Step], threads: int, opts: dict, saved: dict | None = None) -> Pass:
    """Launch `steps` (kernel, grid, args) in order on the suite's stream, `threads` a block."""
    context = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with context():
            for k, grid, args in steps:
                k((grid,), (threads,), args)

    by = block_chosen_by(BACKEND.option(opts, "block"))
    return Pass(run, saved or {}, launch_notes({"threads": threads}, (steps[0][1],), by, kernels=len(steps)))


def _setup(inputs: dict[str, Any], y: Any, opts: dict) -> tuple[Any, Any, Any, str, int]:
    x, targets, dy = inputs["logits"], inputs["targets"], inputs["dy"]
    dtype = np.dtype(y.dtype).name
    if dtype not in CTYPES or x.dtype != y.dtype or dy.dtype != y.dtype or np.dtype(targets.dtype) != np.int64:
        raise ValueError(f"cupy cross_entropy training: logits {x.dtype}, dy {dy.dtype}, targets {targets.dtype}")
    return x, targets, dy, dtype, int(BACKEND.option(opts, "block") or 256)


def _forward_kernel(name: str, dtype: str, threads: int) -> Any:
    return build(*forward.source(name, dtype), threads=threads)


def _kernel(name: str, dtype: str, threads: int) -> Any:
    return build(*source(name, dtype), threads=threads)


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict, grads: Any = None) -> Pass:
    """Loss and gradient in one block per row, then the mean; saves the gradient only. In a training step
    (`grads` handed) the gradient goes straight into its output buffer."""
    x, targets, dy, dtype, threads = _setup(inputs, y, opts)
    tokens, t, v = x.shape[0], np.int64(x.shape[0]), np.int64(x.shape[1])
    losses = TARGET.empty((tokens,), "float32")
    dlogits = grads["dlogits"] if grads is not None else TARGET.empty(x.shape, dtype)
    steps = [
        (_kernel("rows_grad", dtype, threads), tokens, (x, targets, dy, losses, dlogits, t, v)),
        (_forward_kernel("mean", dtype, threads), 1, (losses, targets, y, t)),
    ]
    return _pass(steps, threads, opts, {"dlogits": dlogits})


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """Nothing left to compute. In a training step the forward wrote the gradient into its output buffer and this
    launches nothing; in the backward phase, one copy kernel from the saved gradient into the output."""
    src, dst = saved["dlogits"], grads["dlogits"]
    if src is dst:
        return Pass(lambda: None, notes={"dlogits": "written by the forward's row pass"})
    threads = int(BACKEND.option(opts, "block") or 256)
    grid = max(1, -(-src.size // (threads * COPY_ITEMS)))
    copy = _kernel("copy", np.dtype(src.dtype).name, threads)
    copied = _pass([(copy, grid, (src, dst, np.int64(src.size)))], threads, opts)
    return Pass(copied.run, notes={**copied.notes, "dlogits": "copied from the forward's saved gradient"})


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """log-softmax into logp (kept), gather −logp[target], mean: the forward module's unfused kernels."""
    x, targets, _, dtype, threads = _setup(inputs, y, opts)
    tokens, t, v = x.shape[0], np.int64(x.shape[0]), np.int64(x.shape[1])
    logp, losses = TARGET.empty(x.shape, dtype), TARGET.empty((tokens,), "float32")
    steps = [
        (_forward_kernel("log_softmax", dtype, threads), tokens, (x, logp, v)),
        (_forward_kernel("gather", dtype, threads), -(-tokens // threads), (logp, targets, losses, t, v)),
        (_forward_kernel("mean", dtype, threads), 1, (losses, targets, y, t)),
    ]
    return _pass(steps, threads, opts, {"logp": logp, "targets": targets})


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """One block per row reading logp (and the targets, dy), writing dlogits."""
    logp, targets, dy, out = saved["logp"], saved["targets"], inputs["dy"], grads["dlogits"]
    (tokens, vocab), threads = logp.shape, int(BACKEND.option(opts, "block") or 256)
    backward = _kernel("logp_backward", np.dtype(logp.dtype).name, threads)
    args = (logp, targets, dy, out, np.int64(tokens), np.int64(vocab))
    return _pass([(backward, tokens, args)], threads, opts)


training(
    "cross_entropy",
    backend="cupy",
    device="cuda",
    like=lambda a: TARGET.empty(a.shape, str(a.dtype)),
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
