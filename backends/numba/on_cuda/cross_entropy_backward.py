"""Cross-entropy's backward and training step on CUDA with Numba (the same kernels run in the simulator): the
gradient written by the forward's own row block (fused, Liger-Kernel's approach) against a backward kernel
reading the saved log-softmax (unfused). A block per token, as the forward module's kernels.

dlogits = (softmax(x) − onehot(target))·dy/counted, zero on rows whose target is ignore_index; `counted` is the
number of tokens not ignored. No block can wait for another, so every row block counts the targets itself (its
threads stride over them, then a block sum) before it scales its row: the targets come from DRAM once and from L2
after, which keeps the ledger's kernels (no counting kernel, no host-side sum).

Fused forward: an ignored row writes zeros and a zero loss without reading its logits; any other takes the row's
max and sum (`_row_stats`, the forward's), thread 0 writes its loss, then the block walks the row again while it
sits in L2 writing (exp(x − max)/sum − onehot)·dy/counted; the forward's mean kernel follows. It saves only the
gradient. In a training step (`grads` handed) the gradient's buffer is the output's own and the backward launches
nothing; in the backward phase the backward copies the saved gradient into the output (a grid-stride copy,
COPY_ITEMS elements a thread). Unfused forward: the forward module's log-softmax, gather and mean kernels, logp
kept with the targets; its backward writes (exp(logp) − onehot)·dy/counted. Block reductions are the
normalization family's shared-memory ones (the simulator has no warp shuffles); float32 arithmetic, float32 and
float16 storage.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cuda import cross_entropy as forward
from backends.numba.on_cuda.normalization_kernels import _reductions
from backends.numba.record import record_numba
from scenarios.cross_entropy import IGNORE_INDEX
from suite.core.registry import Launcher
from suite.kit.launch_shape import block_chosen_by, launch_notes
from suite.kit.training import Pass, training

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

ZERO, ONE = np.float32(0.0), np.float32(1.0)
COPY_ITEMS = 4
"""Elements each thread of the copy moves (grid-stride, so consecutive threads take consecutive elements)."""


@functools.cache
def _counted(threads: int) -> Any:
    """counted(targets, smem) -> the number of targets not ignored (float32), in every thread of the block."""
    block_sum = _reductions()[0]

    def counted(targets, smem):  # type: ignore[no-untyped-def]
        c = ZERO
        t = cuda.threadIdx.x
        while t < targets.size:
            if targets[t] != IGNORE_INDEX:
                c += ONE
            t += threads
        return block_sum(c, smem)

    return cuda.jit(device=True)(counted)


@functools.cache
def source(name: str, threads: int) -> Callable[..., None]:
    """A kernel as a Python function (what `cuda.jit` and `cuda.compile_ptx` take): rows_grad, logp_backward or
    copy, for blocks of `threads`."""
    stats, counted = forward._row_stats(threads), _counted(threads)

    def rows_grad(x, targets, dy, losses, grad):  # type: ignore[no-untyped-def]
        smem = cuda.shared.array(threads, np.float32)
        row, vocab = cuda.blockIdx.x, x.shape[1]
        target = targets[row]  # the same in every thread: the block takes one branch, barriers included
        j = cuda.threadIdx.x
        if target == IGNORE_INDEX:
            if j == 0:
                losses[row] = ZERO
            while j < vocab:
                grad[row, j] = ZERO
                j += threads
        else:
            scale = np.float32(dy[0]) / counted(targets, smem)
            m, total = stats(x, row, smem)
            if j == 0:
                losses[row] = m + math.log(total) - np.float32(x[row, target])
            inv = ONE / total
            while j < vocab:
                p = math.exp(np.float32(x[row, j]) - m) * inv
                if j == target:
                    p -= ONE
                grad[row, j] = p * scale
                j += threads

    def logp_backward(logp, targets, dy, grad):  # type: ignore[no-untyped-def]
        smem = cuda.shared.array(threads, np.float32)
        row, vocab = cuda.blockIdx.x, logp.shape[1]
        target = targets[row]
        j = cuda.threadIdx.x
        if target == IGNORE_INDEX:
            while j < vocab:
                grad[row, j] = ZERO
                j += threads
        else:
            scale = np.float32(dy[0]) / counted(targets, smem)
            while j < vocab:
                p = math.exp(np.float32(logp[row, j]))
                if j == target:
                    p -= ONE
                grad[row, j] = p * scale
                j += threads

    def copy(src, dst):  # type: ignore[no-untyped-def]
        vocab = src.shape[1]
        n = src.shape[0] * vocab
        i = cuda.blockIdx.x * threads + cuda.threadIdx.x
        stride = cuda.gridDim.x * threads
        while i < n:
            r = i // vocab
            c = i - r * vocab
            dst[r, c] = src[r, c]
            i += stride

    return {"rows_grad": rows_grad, "logp_backward": logp_backward, "copy": copy}[name]


def kernel_sources(dtype: str, threads: int = 256) -> dict[str, tuple[Callable[..., None], str]]:
    """The backward module's kernels as name -> (Python function, signature), for compiling without a GPU."""
    mat, vec = f"{dtype}[:, ::1]", f"{dtype}[::1]"
    sigs = {
        "rows_grad": f"void({mat}, int64[::1], {vec}, float32[::1], {mat})",
        "logp_backward": f"void({mat}, int64[::1], {vec}, {mat})",
        "copy": f"void({mat}, {mat})",
    }
    return {name: (source(name, threads), sig) for name, sig in sigs.items()}


@functools.cache
def _dispatcher(name: str, threads: int) -> Any:
    """The `cuda.jit` dispatcher of a kernel (importable: the resource report rebuilds it)."""
    return cuda.jit(source(name, threads))


def prepared(name: str, grid: int, threads: int, stream: Any, args: tuple) -> Launcher:
    dispatcher = _dispatcher(name, threads)
    compiled = None
    if not simulating():
        compiled = dispatcher.compile(tuple(numba.typeof(a) for a in args))
    record_numba(
        (__name__, "_dispatcher", (name, threads)), args, threads, name=f"cross-entropy {name}", compiled=compiled
    )

    def launch() -> None:
        dispatcher[grid, threads, stream](*args)  # configured at each launch: the simulator keeps the last

    return launch


def _checked(inputs: dict[str, Any], y: Any) -> tuple[Any, Any, Any]:
    x, targets, dy = inputs["logits"], inputs["targets"], inputs["dy"]
    if str(y.dtype) not in ("float32", "float16") or x.dtype != y.dtype or dy.dtype != y.dtype:
        raise ValueError(f"numba/cuda cross_entropy training: logits {x.dtype}, dy {dy.dtype} -> out {y.dtype}")
    if str(targets.dtype) != "int64":
        raise ValueError(f"numba/cuda cross_entropy training: targets {targets.dtype}, needs int64")
    return x, targets, dy


def _pass(steps: list[Launcher], grid: int, threads: int, opts: dict, saved: dict | None = None) -> Pass:
    def run() -> None:
        for step in steps:
            step()

    by = block_chosen_by(BACKEND.option(opts, "block"))
    notes = launch_notes({"threads": threads}, (grid,), by, kernels=len(steps))
    return Pass(run, saved or {}, notes)


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict, grads: Any = None) -> Pass:
    """Loss and gradient in one block per row, then the mean; saves the gradient only. In a training step
    (`grads` handed) the gradient goes straight into its output buffer."""
    x, targets, dy = _checked(inputs, y)
    tokens, threads, stream = x.shape[0], forward.threads_of(opts), stream_arg(opts.get("stream"))
    losses = cuda.device_array(tokens, dtype=np.float32)
    dlogits = grads["dlogits"] if grads is not None else cuda.device_array(x.shape, dtype=x.dtype)
    steps = [
        prepared("rows_grad", tokens, threads, stream, (x, targets, dy, losses, dlogits)),
        forward.prepared("mean", 1, threads, stream, (losses, targets, y)),
    ]
    return _pass(steps, tokens, threads, opts, {"dlogits": dlogits})


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """Nothing left to compute. In a training step the forward wrote the gradient into its output buffer and this
    launches nothing; in the backward phase, one copy kernel from the saved gradient into the output."""
    src, dst = saved["dlogits"], grads["dlogits"]
    if src is dst:
        return Pass(lambda: None, notes={"dlogits": "written by the forward's row pass"})
    threads, stream = forward.threads_of(opts), stream_arg(opts.get("stream"))
    grid = max(1, -(-src.size // (threads * COPY_ITEMS)))
    copied = _pass([prepared("copy", grid, threads, stream, (src, dst))], grid, threads, opts)
    return Pass(copied.run, notes={**copied.notes, "dlogits": "copied from the forward's saved gradient"})


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """log-softmax into logp (kept), gather −logp[target], mean: the forward module's unfused kernels."""
    x, targets, _ = _checked(inputs, y)
    tokens, threads, stream = x.shape[0], forward.threads_of(opts), stream_arg(opts.get("stream"))
    logp = cuda.device_array(x.shape, dtype=x.dtype)
    losses = cuda.device_array(tokens, dtype=np.float32)
    steps = [
        forward.prepared("log_softmax", tokens, threads, stream, (x, logp)),
        forward.prepared("gather", -(-tokens // threads), threads, stream, (logp, targets, losses)),
        forward.prepared("mean", 1, threads, stream, (losses, targets, y)),
    ]
    return _pass(steps, tokens, threads, opts, {"logp": logp, "targets": targets})


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """One block per row reading logp (and the targets, dy), writing dlogits."""
    logp, targets, dy, out = saved["logp"], saved["targets"], inputs["dy"], grads["dlogits"]
    tokens, threads, stream = logp.shape[0], forward.threads_of(opts), stream_arg(opts.get("stream"))
    return _pass([prepared("logp_backward", tokens, threads, stream, (logp, targets, dy, out))], tokens, threads, opts)


training(
    "cross_entropy",
    backend="numba",
    device="cuda",
    like=lambda a: cuda.device_array_like(a),
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
