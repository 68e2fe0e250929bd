"""Cross-entropy on CUDA with Numba (the same kernels run in the simulator): a block per token.

Fused: each thread strides over the row keeping its own online max and rescaled sum, then the block merges
them (the block's max, each thread's sum rescaled to it, the block's sum) and thread 0 writes the token's loss
from the target's logit. Unfused: the log-softmax row kernel (the same statistics, then logp written in the
case's dtype), gather, and the mean both variants end with (one block, float32 sums). Block reductions are the
normalization family's shared-memory ones: the simulator has no warp shuffles.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cuda.normalization_kernels import _reductions
from backends.numba.record import record_numba
from scenarios.cross_entropy import IGNORE_INDEX
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch_shape import block_chosen_by, launch_notes

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

ZERO, NEG_INF = np.float32(0.0), np.float32(-np.inf)


@functools.cache
def _row_stats(threads: int) -> Any:
    """stats(x, row, smem) -> (max, Σ exp(x − max)) of the row, in every thread of the block."""
    block_sum, block_max = _reductions()

    def stats(x, row, smem):  # type: ignore[no-untyped-def]
        vocab = x.shape[1]
        m, s = NEG_INF, ZERO
        j = cuda.threadIdx.x
        while j < vocab:
            v = np.float32(x[row, j])
            if v > m:
                s = s * math.exp(m - v) + np.float32(1.0)
                m = v
            else:
                s += math.exp(v - m)
            j += threads
        big = block_max(m, smem)
        mine = s * math.exp(m - big) if m > NEG_INF else ZERO
        return big, block_sum(mine, smem)

    return cuda.jit(device=True)(stats)


@functools.cache
def source(name: str, threads: int) -> Callable[..., None]:
    """A kernel as a Python function (what `cuda.jit` and `cuda.compile_ptx` take): rows, log_softmax, gather or
    mean, for blocks of `threads`."""
    stats, block_sum = _row_stats(threads), _reductions()[0]

    def rows(x, targets, losses):  # type: ignore[no-untyped-def]
        smem = cuda.shared.array(threads, np.float32)
        row = cuda.blockIdx.x
        m, total = stats(x, row, smem)
        if cuda.threadIdx.x == 0:
            target = targets[row]
            ok = target != IGNORE_INDEX
            losses[row] = m + math.log(total) - np.float32(x[row, target]) if ok else ZERO

    def log_softmax(x, logp):  # type: ignore[no-untyped-def]
        smem = cuda.shared.array(threads, np.float32)
        row = cuda.blockIdx.x
        m, total = stats(x, row, smem)
        shift = m + math.log(total)
        j = cuda.threadIdx.x
        while j < x.shape[1]:
            logp[row, j] = np.float32(x[row, j]) - shift
            j += threads

    def gather(logp, targets, losses):  # type: ignore[no-untyped-def]
        t = cuda.blockIdx.x * threads + cuda.threadIdx.x
        if t < targets.size:
            target = targets[t]
            losses[t] = -np.float32(logp[t, target]) if target != IGNORE_INDEX else ZERO

    def mean(losses, targets, out):  # type: ignore[no-untyped-def]
        smem = cuda.shared.array(threads, np.float32)
        total, count = ZERO, ZERO
        t = cuda.threadIdx.x
        while t < targets.size:
            if targets[t] != IGNORE_INDEX:
                total += losses[t]
                count += np.float32(1.0)
            t += threads
        total = block_sum(total, smem)
        count = block_sum(count, smem)
        if cuda.threadIdx.x == 0:
            out[0] = total / count

    return {"rows": rows, "log_softmax": log_softmax, "gather": gather, "mean": mean}[name]


def kernel_sources(variant: str, dtype: str, threads: int = 256) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    mat, vec = f"{dtype}[:, ::1]", f"{dtype}[::1]"
    sigs = {
        "rows": f"void({mat}, int64[::1], float32[::1])",
        "log_softmax": f"void({mat}, {mat})",
        "gather": f"void({mat}, int64[::1], float32[::1])",
        "mean": f"void(float32[::1], int64[::1], {vec})",
    }
    names = ("rows", "mean") if variant == "fused" else ("log_softmax", "gather", "mean")
    return {name: (source(name, threads), sigs[name]) for name in names}


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


def threads_of(opts: dict) -> int:
    return int(BACKEND.option(opts, "block") or 256)


@kernel(scenario="cross_entropy", backend="numba", variant=("fused", "unfused"))
def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """The variant's kernels, each prepared with its grid and the shared stream (see the module's docstring)."""
    names = {"fused": ("rows", "mean"), "unfused": ("log_softmax", "gather", "mean")}[variant]
    x, targets = inputs["logits"], inputs["targets"]
    if str(out.dtype) not in ("float32", "float16") or x.dtype != out.dtype or str(targets.dtype) != "int64":
        raise ValueError(f"numba/cuda cross_entropy: logits {x.dtype}, targets {targets.dtype} -> out {out.dtype}")
    tokens, threads, stream = x.shape[0], threads_of(opts), stream_arg(opts.get("stream"))
    losses = cuda.device_array(tokens, dtype=np.float32)
    logp = cuda.device_array(x.shape, dtype=x.dtype) if "log_softmax" in names else None
    plan = {
        "rows": (tokens, (x, targets, losses)),
        "log_softmax": (tokens, (x, logp)),
        "gather": (-(-tokens // threads), (logp, targets, losses)),
        "mean": (1, (losses, targets, out)),
    }
    steps = [prepared(name, plan[name][0], threads, stream, plan[name][1]) for name in names]

    def launch() -> None:
        for step in steps:
            step()

    by = block_chosen_by(BACKEND.option(opts, "block"))
    return Launch(launch, notes=launch_notes({"threads": threads}, (tokens,), by, kernels=len(steps)))
