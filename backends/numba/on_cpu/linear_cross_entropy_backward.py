"""Linear cross-entropy's backward and training step on the host CPU: NumPy's BLAS for every GEMM (as the forward
module), Numba for the row kernels, the chunked backward (fused) against the one over every token (unfused).

Fused forward: the family's fused forward (a chunk's GEMM into one chunk × vocab buffer, its row kernel, then the
mean), its row kernel writing each token's log-sum-exp beside the loss; it keeps the inputs and that (4 bytes a
token). Fused backward, per chunk of tokens: the chunk's logits again (GEMM), g = exp(l − lse)·dy/counted with
dy/counted off the target, in place in the same buffer (`chunk_grad`), dhidden[chunk] = g · Wᵀ straight into the
output rows, and dweight's term hiddenᵀ[chunk] · g: into dweight itself for the first chunk, into an H × V
scratch added in by a parallel kernel for the others (NumPy's matmul has no β = 1 to accumulate in place).
Fused training step: the forward does all of it, Liger-Kernel's way: each chunk's GEMM and row kernel, then at
once g in place, dhidden's rows and dweight's term from the logits still in cache (three GEMMs a chunk, not four),
and the backward launches nothing; the backward phase keeps the recomputation, since what it is handed is only
what the forward kept (the lse), and one chunk buffer serves the whole step.
Unfused forward: the GEMM into every token's logits, the cross-entropy family's log-softmax in place over them,
its gather and mean; logp kept. Unfused backward: g for every token into a tokens × vocab buffer (the
cross-entropy family's backward kernel), then the two GEMMs over all of it. float32 only, as the forward:
NumPy has no half-precision BLAS, so float16 cases are `Unsupported`.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from backends.numba.on_cpu.arrays import per_thread
from backends.numba.on_cpu.cross_entropy import (
    FASTMATH,
    ZERO,
    _gather,
    _log_softmax,
    compiled,
    mean_kernel,
    row_stats,
)
from backends.numba.on_cpu.cross_entropy_backward import counted_tokens, logp_backward
from backends.numba.ops import exp_float32
from scenarios.cross_entropy import IGNORE_INDEX
from scenarios.linear_cross_entropy import chunks
from suite.core.registry import Unsupported
from suite.kit.training import Pass, Written, training

float32_row_stats = row_stats("float32")


@njit(parallel=True, fastmath=FASTMATH, cache=False)
def rows_with_lse(x, targets, losses, lse, tile, scratch):  # type: ignore[no-untyped-def]
    """The forward family's fused row kernel (float32), also writing each counted token's log-sum-exp."""
    for t in prange(x.shape[0]):
        row = x[t]
        m, total = float32_row_stats(row, tile, scratch[numba.get_thread_id()])
        target = targets[t]
        shift = m + np.float32(math.log(total))
        lse[t] = shift
        losses[t] = ZERO if target == IGNORE_INDEX else shift - row[target]


@njit(cache=False)
def grad_scale(dy, targets):  # type: ignore[no-untyped-def]
    """dy / counted tokens, in float32: the whole batch's count, whichever chunk a kernel works on."""
    return np.float32(dy[0]) / np.float32(counted_tokens(targets))


@njit(parallel=True, fastmath=FASTMATH, cache=False)
def chunk_grad(logits, targets, lse, scale):  # type: ignore[no-untyped-def]
    """The chunk's logits become g in place: exp(l − lse)·scale, scale off the target, zero on ignored rows.
    `scale` arrives as the Python float `grad_scale` returns (float64 to Numba's typing) and is used in float32."""
    rows, vocab = logits.shape
    scale = np.float32(scale)
    for t in prange(rows):
        row, target = logits[t], targets[t]
        if target == IGNORE_INDEX:
            row[:] = ZERO
        else:
            shift = lse[t]
            for j in range(vocab):
                row[j] = exp_float32(row[j] - shift) * scale
            row[target] -= scale


@njit(parallel=True, cache=False)
def add_into(total, term):  # type: ignore[no-untyped-def]
    for i in prange(total.shape[0]):
        total[i, :] += term[i, :]


def _arrays(inputs: dict[str, Any], dtype: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    h, w, targets, dy = inputs["hidden"], inputs["weight"], inputs["targets"], inputs["dy"]
    if dtype != np.float32:
        raise Unsupported(f"{dtype}: NumPy has no half-precision BLAS for the LM head's GEMMs")
    if h.dtype != np.float32 or w.dtype != np.float32 or dy.dtype != np.float32 or targets.dtype != np.int64:
        raise ValueError(
            f"numba/cpu linear_cross_entropy training: hidden {h.dtype}, weight {w.dtype}, dy {dy.dtype}, "
            f"targets {targets.dtype}; needs float32 and int64 targets"
        )
    return h, w, targets, dy


def _gradient_steps(
    h: np.ndarray, w: np.ndarray, targets: np.ndarray, lse: np.ndarray, dy: np.ndarray, grads: Any, logits: np.ndarray
) -> tuple[Any, list[tuple], Any]:
    """(scale, per-chunk work, step): `step(s, work[i])` turns chunk i's logits (in `logits`) into its g in place
    and writes dhidden's rows and dweight's term from it (into dweight for the first chunk, through an H × V
    float32 scratch added in for the others). `scale(dy, targets)` gives the s it takes."""
    dh, dw = grads["dhidden"], grads["dweight"]
    spans = chunks(h.shape[0], logits.shape[0])
    term = np.empty_like(dw) if len(spans) > 1 else dw
    scale = compiled(grad_scale, dy, targets)
    grad = compiled(chunk_grad, logits, targets, lse, 1.0)
    add = compiled(add_into, dw, term)
    work = [(i, h[a:b], logits[: b - a], targets[a:b], lse[a:b], dh[a:b]) for i, (a, b) in enumerate(spans)]

    def step(s: float, i: int, x: np.ndarray, g: np.ndarray, t: np.ndarray, shift: np.ndarray, rows: Any) -> None:
        grad(g, t, shift, s)
        np.matmul(g, w.T, out=rows)
        if i == 0:
            np.matmul(x.T, g, out=dw)
        else:
            np.matmul(x.T, g, out=term)
            add(dw, term)

    return scale, work, step


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict, grads: Any = None) -> Pass:
    """The chunked forward, its row kernel writing the log-sum-exp too; keeps the inputs and the lse. In a training
    step (`grads` handed) each chunk's logits become its gradient while they are in cache: g in place, then
    dhidden's rows and dweight's term (Liger's order), three GEMMs a chunk in all; the backward is left nothing."""
    h, w, targets, dy = _arrays(inputs, y.dtype)
    tokens, vocab = h.shape[0], w.shape[1]
    chunk, tile = int(params["chunk"]), min(int(params["tile"]), vocab)
    logits = np.empty((min(chunk, tokens), vocab), np.float32)
    losses, lse, scratch = np.empty(tokens, np.float32), np.empty(tokens, np.float32), per_thread(tile)
    rows = compiled(rows_with_lse, logits, targets, losses, lse, tile, scratch)
    mean = compiled(mean_kernel("float32"), losses, targets, y)
    spans = [(h[a:b], logits[: b - a], targets[a:b], losses[a:b], lse[a:b]) for a, b in chunks(tokens, chunk)]
    kept = {"hidden": h, "weight": w, "targets": targets, "logsumexp": lse}
    if grads is None:

        def run() -> None:
            for x, part, t, loss, shift in spans:
                np.matmul(x, w, out=part)
                rows(part, t, loss, shift, tile, scratch)
            mean(losses, targets, y)

        return Pass(run, kept)

    scale, work, step = _gradient_steps(h, w, targets, lse, dy, grads, logits)

    def train() -> None:
        s = scale(dy, targets)
        for (x, part, t, loss, shift), each in zip(spans, work, strict=True):
            np.matmul(x, w, out=part)
            rows(part, t, loss, shift, tile, scratch)
            step(s, *each)
        mean(losses, targets, y)

    return Pass(train, Written(kept), notes={"chunks": len(spans)})


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """Chunk by chunk: logits again, g in place, dhidden rows, dweight's term (accumulated past the first). The
    backward phase has only what the forward kept (the lse), so it recomputes each chunk's logits: four GEMMs a
    chunk across the two passes. In a training step the forward wrote both gradients and this launches nothing."""
    if isinstance(saved, Written):
        return Pass(lambda: None, notes={"gradients": "written by the forward, chunk by chunk"})
    h, w, targets, lse = saved["hidden"], saved["weight"], saved["targets"], saved["logsumexp"]
    dy = inputs["dy"]
    logits = np.empty((min(int(params["chunk"]), h.shape[0]), w.shape[1]), np.float32)
    scale, work, step = _gradient_steps(h, w, targets, lse, dy, grads, logits)

    def run() -> None:
        s = scale(dy, targets)
        for each in work:
            np.matmul(each[1], w, out=each[2])
            step(s, *each)

    return Pass(run, notes={"chunks": len(work)})


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """Every token's logits, the log-softmax in place over them (kept), the gather and the mean."""
    h, w, targets, _ = _arrays(inputs, y.dtype)
    tile = min(int(params["tile"]), w.shape[1])
    logp = np.empty((h.shape[0], w.shape[1]), np.float32)
    losses, scratch = np.empty(h.shape[0], np.float32), per_thread(tile)
    log_softmax = compiled(_log_softmax("float32"), logp, logp, tile, scratch)
    gather = compiled(_gather("float32"), logp, targets, losses)
    mean = compiled(mean_kernel("float32"), losses, targets, y)

    def run() -> None:
        np.matmul(h, w, out=logp)
        log_softmax(logp, logp, tile, scratch)
        gather(logp, targets, losses)
        mean(losses, targets, y)

    return Pass(run, {"hidden": h, "weight": w, "targets": targets, "logp": logp})


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """g for every token into a tokens × vocab buffer, then dhidden = g · Wᵀ and dweight = hiddenᵀ · g."""
    h, w, targets, logp = saved["hidden"], saved["weight"], saved["targets"], saved["logp"]
    dy, dh, dw = inputs["dy"], grads["dhidden"], grads["dweight"]
    g = np.empty_like(logp)
    grad = compiled(logp_backward("float32"), logp, targets, dy, g)

    def run() -> None:
        grad(logp, targets, dy, g)
        np.matmul(g, w.T, out=dh)
        np.matmul(h.T, g, out=dw)

    return Pass(run)


training(
    "linear_cross_entropy",
    backend="numba",
    device="cpu",
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
