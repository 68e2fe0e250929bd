"""Linear cross-entropy's backward and training step in CuPy: cuBLAS (`cupy.matmul`) for every GEMM, as the forward
module, generated CUDA C for the row kernels (a block per token, the cross-entropy family's row statistics and
block reductions); the chunked backward (fused) against the one over every token (unfused), the algorithm of
`backends.numba.on_cpu.linear_cross_entropy_backward`.

Fused forward: the forward module's chunks (a chunk's GEMM into one chunk × vocab buffer, its row kernel, the
cross-entropy family's mean), its row kernel (`rows_lse`) writing each token's log-sum-exp beside the loss; it
keeps the inputs and that (4 bytes a token). Fused backward, per chunk of tokens: the chunk's logits again
(GEMM), g = exp(l − lse)·dy/counted with dy/counted off the target, in place (`grad_lse`), dhidden[chunk] =
g · Wᵀ into the output rows, and dweight's term hiddenᵀ[chunk] · g: into dweight itself for the first chunk,
into an H × V float32 scratch for the others (cuBLAS asked for a float32 result), which `add_into` adds to
dweight, as the ledger counts. In a training step the forward does that per-chunk work itself,
right after each chunk's row kernel (the logits computed once, Liger's order), and the backward launches
nothing. Unfused forward: the GEMM into every token's logits, the cross-entropy family's
log-softmax in place, gather and mean; logp kept. Unfused backward: g from logp (`grad_logp`) into a
tokens × vocab buffer, then the two GEMMs over all of it.

Each gradient block counts the batch's counted tokens itself (the mean's divisor: the targets stay in L2)
rather than in a kernel of its own, so the launches are the ledger's. The gradient kernels write g over the
logits they read, so those two pointers carry no `__restrict__`. Without a GPU every row kernel compiles for
sm_90 and the GEMMs cannot run (nothing of cuBLAS is built ahead of time): the backward's kernels are built
and recorded before the forward's first GEMM refuses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET, cupy
from backends.cupy.build import build
from backends.cupy.cross_entropy import STATS
from backends.cupy.cross_entropy import source as ce_source
from backends.cupy.device import CONVERSIONS, CTYPES
from backends.cupy.matmul import _cublas
from backends.cupy.normalization_kernels import REDUCTIONS
from scenarios.cross_entropy import IGNORE_INDEX
from scenarios.linear_cross_entropy import chunks
from suite.core.registry import Launcher
from suite.core.targets import NATIVE
from suite.kit.launch_shape import block_chosen_by, launch_notes
from suite.kit.training import Pass, Written, training

GRAD = r"""
// dy / counted tokens of the whole batch, in every thread of the block.
__device__ float grad_scale(const long long* __restrict__ targets, long long tokens, const {T}* __restrict__ dy,
                            float* smem) {{
    float count = 0.0f;
    for (long long i = threadIdx.x; i < tokens; i += blockDim.x) count += targets[i] != IGNORE ? 1.0f : 0.0f;
    return load(dy) / block_sum(count, smem);
}}
// g = (exp(x - shift) - onehot(t)) * scale along row `row`, zeros where t is ignored (x not read there).
__device__ void grad_row(const {T}* x, {T}* g, long long row, long long t, float shift, float scale, long long vocab) {{
    for (long long j = threadIdx.x; j < vocab; j += blockDim.x) {{
        float v = 0.0f;
        if (t != IGNORE) {{
            v = expf(load(x + row * vocab + j) - shift) * scale;
            if (j == t) v -= scale;
        }}
        store(g + row * vocab + j, v);
    }}
}}
"""

KERNELS = {
    "rows_lse": r"""
extern "C" __global__ void {name}(const {T}* __restrict__ x, const long long* __restrict__ targets,
                                  float* __restrict__ losses, float* __restrict__ lse, long long vocab) {{
    __shared__ float smem[32];
    const long long row = blockIdx.x;
    const float2 st = row_stats(x, row, vocab, smem);
    if (threadIdx.x == 0) {{
        const float shift = st.x + logf(st.y);
        const long long t = targets[row];
        lse[row] = shift;
        losses[row] = t == IGNORE ? 0.0f : shift - load(x + row * vocab + t);
    }}
}}""",
    "grad_lse": r"""
extern "C" __global__ void {name}(const {T}* x, {T}* g, const long long* __restrict__ all_targets,
                                  const long long* __restrict__ targets, const float* __restrict__ lse,
                                  const {T}* __restrict__ dy, long long tokens, long long vocab) {{
    __shared__ float smem[32];
    const float scale = grad_scale(all_targets, tokens, dy, smem);
    const long long row = blockIdx.x;
    grad_row(x, g, row, targets[row], lse[row], scale, vocab);
}}""",
    "grad_logp": r"""
extern "C" __global__ void {name}(const {T}* __restrict__ logp, {T}* __restrict__ g,
                                  const long long* __restrict__ targets, const {T}* __restrict__ dy,
                                  long long tokens, long long vocab) {{
    __shared__ float smem[32];
    const float scale = grad_scale(targets, tokens, dy, smem);
    const long long row = blockIdx.x;
    grad_row(logp, g, row, targets[row], 0.0f, scale, vocab);
}}""",
    "add_into": r"""
extern "C" __global__ void {name}({T}* __restrict__ total, const float* __restrict__ term, long long n) {{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) store(total + i, load(total + i) + term[i]);
}}""",
}


def source(name: str, dtype: str) -> tuple[str, str]:
    """(CUDA source, kernel name) of kernel `name` over arrays of `dtype`."""
    kernel_name, ctype = f"lce_{name}_{dtype}", CTYPES[dtype]
    text = (
        STATS.format(T=ctype, ignore=IGNORE_INDEX)
        + GRAD.format(T=ctype)
        + KERNELS[name].format(name=kernel_name, T=ctype)
    )
    return CONVERSIONS + REDUCTIONS + text, kernel_name


def _gemm(a: Any, b: Any, c: Any) -> Launcher:
    """c = a · b through cuBLAS; a float32 c of float16 operands asks cuBLAS for float32 (its accumulators)."""
    if c.dtype == a.dtype or TARGET.probe().mode != NATIVE:
        return _cublas(a, b, c)  # refuses without a GPU
    return lambda: cupy.matmul(a, b, out=c, dtype=c.dtype)


def _settings(opts: dict) -> tuple[int, Any]:
    return int(BACKEND.option(opts, "block") or 256), BACKEND.launch_stream(opts.get("stream"))


def _pass(steps: list, settings: dict, tokens: int, opts: dict, context: Any, saved: dict | None = None) -> Pass:
    """Steps are GEMM closures or (kernel, grid, args) launched with the block's threads."""
    threads = settings["threads"]

    def run() -> None:
        with context():
            for step in steps:
                if callable(step):
                    step()
                else:
                    kernel, grid, args = step
                    kernel((grid,), (threads,), args)

    by = block_chosen_by(BACKEND.option(opts, "block"))
    return Pass(run, saved if saved is not None else {}, launch_notes(settings, (tokens,), by, kernels=len(steps)))


def _kernel(name: str, dtype: str, threads: int, family: str = "lce") -> Any:
    text, kernel_name = source(name, dtype) if family == "lce" else ce_source(name, dtype)
    return build(text, kernel_name, threads=threads)


def _gradient_steps(h: Any, w: Any, targets: Any, lse: Any, dy: Any, grads: Any, logits: Any, threads: int) -> Any:
    """steps(i, a, b): chunk i's logits (tokens a..b−1, in `logits`) made its g in place, then dhidden's rows and
    dweight's term from it: into dweight for the first chunk, into a float32 scratch added in for the others."""
    dh, dw = grads["dhidden"], grads["dweight"]
    (tokens, vocab), dtype = (h.shape[0], w.shape[1]), np.dtype(dh.dtype).name
    term = TARGET.empty(dw.shape, "float32") if len(chunks(tokens, logits.shape[0])) > 1 else None
    grad, add = _kernel("grad_lse", dtype, threads), _kernel("add_into", dtype, threads)
    n = int(np.prod(dw.shape))

    def steps(i: int, a: int, b: int) -> list:
        x, g = h[a:b], logits[: b - a]
        out = [
            (grad, b - a, (g, g, targets, targets[a:b], lse[a:b], dy, np.int64(tokens), np.int64(vocab))),
            _cublas(g, w.T, dh[a:b]),
        ]
        if i == 0:
            return [*out, _cublas(x.T, g, dw)]
        return [*out, _gemm(x.T, g, term), (add, -(-n // threads), (dw, term, np.int64(n)))]

    return steps


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict, grads: Any = None) -> Pass:
    """The chunked forward, its row kernel writing the log-sum-exp too; keeps the inputs and the lse. In a training
    step (`grads` handed) each chunk's logits become its gradient at once: g in place, dhidden's rows, dweight's
    term (Liger's order, three GEMMs a chunk); the backward is left nothing."""
    h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    (tokens, vocab), dtype = (h.shape[0], w.shape[1]), np.dtype(y.dtype).name
    chunk = int(params["chunk"])
    threads, context = _settings(opts)
    logits = TARGET.empty((min(chunk, tokens), vocab), dtype)
    losses, lse = TARGET.empty((tokens,), "float32"), TARGET.empty((tokens,), "float32")
    rows, mean = _kernel("rows_lse", dtype, threads), _kernel("mean", dtype, threads, family="ce")
    gradient = _gradient_steps(h, w, targets, lse, inputs["dy"], grads, logits, threads) if grads is not None else None
    steps: list = []
    for i, (a, b) in enumerate(chunks(tokens, chunk)):
        part = logits[: b - a]
        steps.append(_cublas(h[a:b], w, part))
        steps.append((rows, b - a, (part, targets[a:b], losses[a:b], lse[a:b], np.int64(vocab))))
        if gradient is not None:
            steps.extend(gradient(i, a, b))
    steps.append((mean, 1, (losses, targets, y, np.int64(tokens))))
    kept = {"hidden": h, "weight": w, "targets": targets, "logsumexp": lse}
    saved = kept if grads is None else Written(kept)
    return _pass(steps, {"threads": threads, "chunk": min(chunk, tokens)}, tokens, opts, context, saved)


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """Chunk by chunk: logits again, g in place, dhidden rows, dweight's term (added in past the first chunk): the
    backward phase has only the lse the forward kept, so each chunk's logits are computed twice across the two
    passes. In a training step the forward wrote both gradients and this launches nothing."""
    if isinstance(saved, Written):
        return Pass(lambda: None, notes={"gradients": "written by the forward, chunk by chunk"})
    h, w, targets, lse = saved["hidden"], saved["weight"], saved["targets"], saved["logsumexp"]
    (tokens, vocab), dtype = (h.shape[0], w.shape[1]), np.dtype(grads["dhidden"].dtype).name
    chunk = int(params["chunk"])
    threads, context = _settings(opts)
    spans = chunks(tokens, chunk)
    logits = TARGET.empty((min(chunk, tokens), vocab), dtype)
    gradient = _gradient_steps(h, w, targets, lse, inputs["dy"], grads, logits, threads)
    steps: list = []
    for i, (a, b) in enumerate(spans):
        steps.append(_cublas(h[a:b], w, logits[: b - a]))
        steps.extend(gradient(i, a, b))
    settings = {"threads": threads, "chunk": min(chunk, tokens), "chunks": len(spans)}
    return _pass(steps, settings, tokens, opts, context)


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """Every token's logits, the log-softmax in place over them (kept), the gather and the mean."""
    h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    (tokens, vocab), dtype = (h.shape[0], w.shape[1]), np.dtype(y.dtype).name
    threads, context = _settings(opts)
    logp, losses = TARGET.empty((tokens, vocab), dtype), TARGET.empty((tokens,), "float32")
    t, v = np.int64(tokens), np.int64(vocab)
    log_softmax, gather, mean = (
        _kernel(name, dtype, threads, family="ce") for name in ("log_softmax", "gather", "mean")
    )
    steps = [
        _cublas(h, w, logp),
        (log_softmax, tokens, (logp, logp, v)),
        (gather, -(-tokens // threads), (logp, targets, losses, t, v)),
        (mean, 1, (losses, targets, y, t)),
    ]
    saved = {"hidden": h, "weight": w, "targets": targets, "logp": logp}
    return _pass(steps, {"threads": threads}, tokens, opts, context, saved)


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """g for every token into a tokens × vocab buffer, then dhidden = g · Wᵀ and dweight = hiddenᵀ · g."""
    h, w, targets, logp = saved["hidden"], saved["weight"], saved["targets"], saved["logp"]
    dy, dh, dw = inputs["dy"], grads["dhidden"], grads["dweight"]
    (tokens, vocab), dtype = logp.shape, np.dtype(logp.dtype).name
    threads, context = _settings(opts)
    g = TARGET.empty((tokens, vocab), dtype)
    grad = _kernel("grad_logp", dtype, threads)
    steps = [
        (grad, tokens, (logp, g, targets, dy, np.int64(tokens), np.int64(vocab))),
        _cublas(g, w.T, dh),
        _cublas(h.T, g, dw),
    ]
    return _pass(steps, {"threads": threads}, tokens, opts, context)


training(
    "linear_cross_entropy",
    backend="cupy",
    device="cuda",
    like=lambda a: TARGET.empty(a.shape, str(a.dtype)),
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
