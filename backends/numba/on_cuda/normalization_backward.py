"""Row normalization's backward and train phases on CUDA with Numba (layernorm, rmsnorm, softmax): fused against
unfused; the same kernels run in the simulator.

fused: layernorm and rmsnorm run a forward that writes y and each row's float32 statistics (mean and rstd, or
rstd) and keep x and weight; their backward is one pass over blocks of rows (`partials(rows)` blocks: rows/8,
at most 128) recomputing x̂ and writing dx, with dweight (dbias) left as one float32 partial row per block and
summed by a second small kernel — the partials' bytes, written then read, are in the ledger. softmax runs the
forward's own fused kernel (it keeps y) and a one-pass backward, one block per row.
unfused: the forward decomposition's kernels (the forward module's steps), keeping x̂ and the row's variance
(mean square), or y; the backward walks `BACKWARD_DECOMPOSITIONS`, one kernel per step.

Chunks and threads as the forward (`geometry`). Every kernel is compiled and recorded (`record_numba`) while the
entry prepares; the kernels are `normalization_backward_kernels`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cuda import normalization_backward_kernels as bk
from backends.numba.on_cuda.normalization import _step, fused_entry, geometry
from backends.numba.record import record_numba
from scenarios.normalization import DECOMPOSITIONS, ROW_STATS
from scenarios.normalization.backward_decomposition import BACKWARD_DECOMPOSITIONS, STATS, UNFUSED_SAVES, partials
from suite.core.decomposition import walk
from suite.kit.launch import cdiv
from suite.kit.launch_shape import block_chosen_by, launch_notes
from suite.kit.training import Pass, training

try:
    from numba import cuda
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

FACTORIES: dict[str, Callable[..., Callable[..., None]]] = {
    "forward_saving": bk.forward_saving,
    "backward_rows": bk.backward_rows,
    "sum_partials": bk.sum_partials,
    "softmax_backward": bk.softmax_backward,
    "column_sum": bk.column_sum,
    "row_reduce": bk.row_reduce,
    "product": bk.product,
    "norm_dx": bk.norm_dx,
    "softmax_dx": bk.softmax_dx,
}


@functools.cache
def _dispatcher(factory: str, *key: Any) -> Any:
    """The `cuda.jit` dispatcher of one kernel (importable: the resource report rebuilds it from its key)."""
    return cuda.jit(FACTORIES[factory](*key))


def _prepared(key: tuple, grid: tuple[int, ...], threads: int, stream: Any, args: tuple, name: str) -> Callable:
    """Compile (on a GPU) and record the kernel for these arguments; return what launches it."""
    dispatcher = _dispatcher(*key)
    compiled = None
    if not simulating():
        compiled = dispatcher.compile(tuple(numba.typeof(a) for a in args))
    record_numba((__name__, "_dispatcher", key), args, threads, name=name, compiled=compiled)

    def launch() -> None:
        dispatcher[grid, threads, stream](*args)  # configured at each launch, as the forward's

    return launch


def _pass(
    launches: list[Callable],
    grid: tuple[int, ...],
    block: int,
    threads: int,
    opts: dict,
    saved: dict | None = None,
    **extra: Any,
) -> Pass:
    """The launches in order; the notes as the forward's launcher writes them (`grid`: the first kernel's)."""

    def run() -> None:
        for launch in launches:
            launch()

    settings = {"tile": block, "threads": threads, "items": cdiv(block, threads)}
    by = block_chosen_by(BACKEND.option(opts, "block"))
    return Pass(run, saved or {}, {**launch_notes(settings, grid, by, kernels=len(launches)), **extra})


def _forward_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in inputs.items() if k != "dy"}


def fused_forward(op: str, inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """y, and what the fused backward reads: x and weight (inputs, kept), the row statistics (written)."""
    forward = _forward_inputs(inputs)
    if op == "softmax":
        return Pass(fused_entry(op, forward, y, params, opts).run, {"y": y})
    rows, cols = y.shape
    block, threads = geometry(cols, params, opts)
    x, w = inputs["x"], inputs["weight"]
    mean = cuda.device_array(rows if op == "layernorm" else 1, dtype=np.float32)
    rstd = cuda.device_array(rows, dtype=np.float32)
    args = (x, w, inputs.get("bias", w), y, mean, rstd)  # rmsnorm: weight as the unread bias
    stream = stream_arg(opts.get("stream"))
    launch = _prepared(("forward_saving", op, block, threads), (rows,), threads, stream, args, f"{op} forward")
    saved = {"x": x, "weight": w, "rstd": rstd}
    if op == "layernorm":
        saved["mean"] = mean
    return _pass([launch], (rows,), block, threads, opts, saved)


def fused_backward(op: str, inputs: dict, saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One row pass (dx, float32 partial rows of dweight and dbias), then the partials' sum; softmax one pass."""
    dy, dx = inputs["dy"], grads["dx"]
    rows, cols = dx.shape
    block, threads = geometry(cols, params, opts)
    stream = stream_arg(opts.get("stream"))
    if op == "softmax":
        key = ("softmax_backward", block, threads)
        launch = _prepared(key, (rows,), threads, stream, (saved["y"], dy, dx), "softmax backward")
        return _pass([launch], (rows,), block, threads, opts)
    centred, blocks = op == "layernorm", partials(rows)
    pw = cuda.device_array((blocks, cols), dtype=np.float32)
    pb = cuda.device_array((blocks, cols), dtype=np.float32) if centred else pw  # rmsnorm: unread
    mean = saved["mean"] if centred else saved["rstd"]  # rmsnorm: an unread placeholder
    row_args = (saved["x"], dy, saved["weight"], mean, saved["rstd"], dx, pw, pb)
    dw = grads["dweight"]
    sum_args = (pw, pb, dw, grads["dbias"] if centred else dw)
    launches = [
        _prepared(("backward_rows", op, block, threads), (blocks,), threads, stream, row_args, f"{op} backward"),
        _prepared(("sum_partials", op, threads), (cdiv(cols, threads),), threads, stream, sum_args, "sum partials"),
    ]
    return _pass(launches, (blocks,), block, threads, opts, partials=blocks)


def unfused_forward(op: str, inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """The forward decomposition, one kernel per step (the forward module's); x̂ and the row's variance (mean
    square), or y, kept."""
    rows, cols = y.shape
    block, threads = geometry(cols, params, opts)
    stream = stream_arg(opts.get("stream"))
    env = _forward_inputs(inputs) | {"y": y}
    placeholder = cuda.device_array(1, dtype=np.float32)
    writes = walk(DECOMPOSITIONS[op], env, stats=ROW_STATS, stat=lambda: cuda.device_array(rows, dtype=np.float32),
                  matrix=lambda: cuda.device_array((rows, cols), dtype=y.dtype))  # fmt: skip
    steps = [_step(st, env, block, threads, stream, placeholder) for st in writes]
    return _pass(steps, (rows,), block, threads, opts, {t: env[t] for t in UNFUSED_SAVES[op]})


def _backward_step(
    st: Any, env: dict[str, Any], block: int, threads: int, stream: Any
) -> tuple[Callable, tuple[int, ...]]:
    """(what launches, grid) of one step of BACKWARD_DECOMPOSITIONS; `scale` is the forward's step kernel."""
    rows, cols = env["dy"].shape
    reads = [env[t] for t in st.reads]
    out, pair = env[st.writes], len(reads) > 1
    chunks = (rows, cdiv(cols, block))
    if st.op == "scale":
        placeholder = cuda.device_array(1, dtype=np.float32)
        return _step(st, env | {"y": env["dy"]}, block, threads, stream, placeholder), chunks
    if st.op == "colsum":
        key, grid, args = ("column_sum", pair, threads), (cdiv(cols, threads),), (reads[0], reads[-1], out)
    elif st.op in ("row_mean", "row_sum"):
        key, grid, args = ("row_reduce", pair, st.op == "row_mean", threads), (rows,), (reads[0], reads[-1], out)
    elif st.op == "product":
        key, grid, args = ("product", block, threads), chunks, (reads[0], reads[1], out)
    elif st.op == "softmax_dx":
        key, grid, args = ("softmax_dx", block, threads), chunks, (*reads, out)
    else:
        centred = st.op == "layernorm_dx"
        dxhat, xhat, stat = reads[:3]
        m1, m2 = (reads[3], reads[4]) if centred else (reads[3], reads[3])
        key, grid, args = ("norm_dx", centred, block, threads), chunks, (dxhat, xhat, stat, m1, m2, out)
    return _prepared(key, grid, threads, stream, args, st.op), grid


def unfused_backward(op: str, inputs: dict, saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel per step; dx̂ and the row means (sum) allocated here, reused every launch."""
    dy = inputs["dy"]
    rows, cols = dy.shape
    block, threads = geometry(cols, params, opts)
    stream = stream_arg(opts.get("stream"))
    env = {**inputs, **saved, **grads}
    writes = walk(BACKWARD_DECOMPOSITIONS[op], env, stats=STATS, stat=lambda: cuda.device_array(rows, np.float32),
                  matrix=lambda: cuda.device_array((rows, cols), dtype=dy.dtype))  # fmt: skip
    steps = [_backward_step(st, env, block, threads, stream) for st in writes]
    return _pass([launch for launch, _ in steps], steps[0][1], block, threads, opts)


for _op in DECOMPOSITIONS:
    training(
        _op,
        backend="numba",
        device="cuda",
        like=lambda a: cuda.device_array_like(a),
        fused=(functools.partial(fused_forward, _op), functools.partial(fused_backward, _op)),
        unfused=(functools.partial(unfused_forward, _op), functools.partial(unfused_backward, _op)),
    )
