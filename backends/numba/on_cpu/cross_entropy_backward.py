"""Cross-entropy's backward and training step on the host CPU with Numba: the gradient written by the forward's
own row pass (fused, Liger-Kernel's approach) against a backward kernel reading the saved log-softmax (unfused).

Fused forward: one parallel loop over tokens; each row's online max and sum (`online_chunk`, the forward's), its
loss, then a second sweep over the row while it sits in L2 writing exp(x − max)·dy/(counted·sum), dy/counted
taken from the target: the logits are read from memory once for loss and gradient, and the mean kernel follows.
Ignored rows write zeros without being read. It saves only the gradient; in a training step its buffer is the
gradient's own, so the backward launches nothing (see `fused_backward`); in the backward phase, where the
forward ran while the case was prepared, the backward copies the saved gradient into the output.
Unfused forward: the forward family's log-softmax, gather and mean kernels, logp kept; its backward reads logp
and writes (exp(logp) − onehot)·dy/counted. Both count the targets in a short serial prologue of the row
kernel. Storage dtypes as the forward module (float32, float16 through its bits), compute in float32.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from backends.numba.on_cpu.arrays import per_thread, storage
from backends.numba.on_cpu.cross_entropy import (
    FASTMATH,
    ZERO,
    _gather,
    _log_softmax,
    compiled,
    mean_kernel,
    row_stats,
)
from backends.numba.ops import VECTOR_CODECS, exp_float32
from scenarios.cross_entropy import IGNORE_INDEX
from suite.kit.training import Pass, training

ONE = np.float32(1.0)


@numba.njit(cache=False)
def counted_tokens(targets):  # type: ignore[no-untyped-def]
    count = 0
    for t in range(targets.size):
        if targets[t] != IGNORE_INDEX:
            count += 1
    return count


@functools.cache
def fused_rows_with_grad(dtype: str) -> Any:
    """Loss per token and the row's gradient, each row read from memory once."""
    load, store = VECTOR_CODECS[dtype]
    stats = row_stats(dtype)

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def rows(x, targets, dy, losses, grad, tile, scratch):  # type: ignore[no-untyped-def]
        tokens, vocab = x.shape
        scale = load(dy[0]) / np.float32(counted_tokens(targets))
        for t in prange(tokens):
            row, g, target = x[t], grad[t], targets[t]
            if target == IGNORE_INDEX:
                losses[t] = ZERO
                for j in range(vocab):
                    g[j] = store(ZERO)
            else:
                m, total = stats(row, tile, scratch[numba.get_thread_id()])
                picked = load(row[target])
                losses[t] = m + np.float32(math.log(total)) - picked
                inv = scale / total
                for j in range(vocab):
                    g[j] = store(exp_float32(load(row[j]) - m) * inv)
                g[target] = store((exp_float32(picked - m) / total - ONE) * scale)

    return rows


@functools.cache
def logp_backward(dtype: str) -> Any:
    """dlogits = (exp(logp) − onehot(target))·dy/counted, zeros on ignored rows (logp not read there)."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def backward(logp, targets, dy, grad):  # type: ignore[no-untyped-def]
        tokens, vocab = logp.shape
        scale = load(dy[0]) / np.float32(counted_tokens(targets))
        for t in prange(tokens):
            lp, g, target = logp[t], grad[t], targets[t]
            if target == IGNORE_INDEX:
                for j in range(vocab):
                    g[j] = store(ZERO)
            else:
                for j in range(vocab):
                    g[j] = store(exp_float32(load(lp[j])) * scale)
                g[target] = store((exp_float32(load(lp[target])) - ONE) * scale)

    return backward


@njit(parallel=True, cache=False)
def copy_rows(src, dst):  # type: ignore[no-untyped-def]
    for t in prange(src.shape[0]):
        dst[t, :] = src[t, :]


def _arrays(inputs: dict[str, Any], y: np.ndarray) -> tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    dtype = str(y.dtype)
    x, targets, dy = inputs["logits"], inputs["targets"], inputs["dy"]
    if dtype not in VECTOR_CODECS or x.dtype != y.dtype or dy.dtype != y.dtype or targets.dtype != np.int64:
        raise ValueError(
            f"numba/cpu cross_entropy training: logits {x.dtype}, dy {dy.dtype}, targets {targets.dtype} -> "
            f"{dtype}; needs logits, dy and out of one of {list(VECTOR_CODECS)}, int64 targets"
        )
    return dtype, storage(x), targets, storage(dy), storage(y)


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict, grads: Any = None) -> Pass:
    """Loss and gradient in one pass over the logits, then the mean; saves the gradient only. In a training step
    (`grads` handed) the gradient goes straight into its output buffer."""
    dtype, x, targets, dy, out = _arrays(inputs, y)
    tile = min(int(params["tile"]), x.shape[1])
    losses, scratch = np.empty(x.shape[0], np.float32), per_thread(tile)
    dlogits = storage(grads["dlogits"]) if grads is not None else np.empty_like(x)
    rows = compiled(fused_rows_with_grad(dtype), x, targets, dy, losses, dlogits, tile, scratch)
    mean = compiled(mean_kernel(dtype), losses, targets, out)

    def run() -> None:
        rows(x, targets, dy, losses, dlogits, tile, scratch)
        mean(losses, targets, out)

    return Pass(run, {"dlogits": dlogits})


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """Nothing left to compute. In a training step the forward wrote the gradient into its output buffer and this
    launches nothing; in the backward phase, one parallel copy of the saved gradient into the output."""
    dlogits = storage(grads["dlogits"])
    if np.shares_memory(saved["dlogits"], dlogits):
        return Pass(lambda: None, notes={"dlogits": "written by the forward's row pass"})
    src = saved["dlogits"]
    copy = compiled(copy_rows, src, dlogits)
    return Pass(lambda: copy(src, dlogits), notes={"dlogits": "copied from the forward's saved gradient"})


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """log-softmax into logp (kept), gather −logp[target], mean: the forward family's unfused kernels."""
    dtype, x, targets, _, out = _arrays(inputs, y)
    tile = min(int(params["tile"]), x.shape[1])
    logp, losses, scratch = np.empty_like(x), np.empty(x.shape[0], np.float32), per_thread(tile)
    log_softmax = compiled(_log_softmax(dtype), x, logp, tile, scratch)
    gather = compiled(_gather(dtype), logp, targets, losses)
    mean = compiled(mean_kernel(dtype), losses, targets, out)

    def run() -> None:
        log_softmax(x, logp, tile, scratch)
        gather(logp, targets, losses)
        mean(losses, targets, out)

    return Pass(run, {"logp": logp, "targets": inputs["targets"]})


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """One kernel reading logp (and the targets, dy), writing dlogits."""
    dtype = str(grads["dlogits"].dtype)
    logp, targets, dy, out = saved["logp"], saved["targets"], storage(inputs["dy"]), storage(grads["dlogits"])
    backward = compiled(logp_backward(dtype), logp, targets, dy, out)
    return Pass(lambda: backward(logp, targets, dy, out))


training(
    "cross_entropy",
    backend="numba",
    device="cpu",
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
