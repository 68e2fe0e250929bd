"""Row normalization's backward and train phases in CuPy (layernorm, rmsnorm, softmax): fused against unfused.

fused: layernorm and rmsnorm run a forward that writes y and each row's float32 statistics (mean and rstd, or
rstd) and keep x and weight; their backward is one pass over blocks of rows (`partials(rows)` blocks: rows/8,
at most 128) recomputing x̂ and writing dx, with dweight (dbias) left as one float32 partial row per block and
summed by a second small kernel — the partials' bytes, written then read, are in the ledger. softmax runs the
forward's own fused kernel (it keeps y) and a one-pass backward, one block per row.
unfused: the forward decomposition's kernels (the forward module's steps), keeping x̂ and the row's variance
(mean square), or y; the backward walks `BACKWARD_DECOMPOSITIONS`, one kernel per step.

Chunks and threads as the forward (`geometry`). Every kernel is compiled and recorded (`build(...,
threads=...)`) while the entry prepares; where CuPy only compiles, the backward's kernels are all built before
the forward's launch refuses (`suite.kit.training`). The kernels' text is `normalization_backward_kernels`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET
from backends.cupy import normalization_backward_kernels as bk
from backends.cupy.build import build
from backends.cupy.normalization import _step, fused_entry, geometry
from backends.cupy.normalization_kernels import step_source as forward_step_source
from scenarios.normalization import DECOMPOSITIONS, ROW_STATS
from scenarios.normalization.backward_decomposition import BACKWARD_DECOMPOSITIONS, STATS, UNFUSED_SAVES, partials
from suite.core.decomposition import walk
from suite.kit.launch import cdiv
from suite.kit.launch_shape import block_chosen_by, launch_notes
from suite.kit.training import Pass, training

Step = tuple[Any, tuple[int, ...], tuple[Any, ...]]
"""(compiled kernel, grid, arguments) of one kernel."""


def _pass(launches: list[Step], block: int, threads: int, opts: dict, saved: dict | None = None, **extra: Any) -> Pass:
    """The launches in order, in the option's stream; the notes as the forward's launcher writes them (the first
    kernel's grid)."""
    context = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with context():
            for k, grid, args in launches:
                k(grid, (threads,), args)

    settings = {"tile": block, "threads": threads, "items": cdiv(block, threads)}
    by = block_chosen_by(BACKEND.option(opts, "block"))
    return Pass(run, saved or {}, {**launch_notes(settings, launches[0][1], by, kernels=len(launches)), **extra})


def _forward_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in inputs.items() if k != "dy"}


def _dtype(a: Any) -> str:
    return np.dtype(a.dtype).name


def fused_forward(op: str, inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """y, and what the fused backward reads: x and weight (inputs, kept), the row statistics (written)."""
    forward = _forward_inputs(inputs)
    if op == "softmax":
        return Pass(fused_entry(op, forward, y, params, opts).run, {"y": y})
    rows, cols = y.shape
    block, threads = geometry(cols, params, opts)
    x, w = inputs["x"], inputs["weight"]
    mean = TARGET.empty((rows if op == "layernorm" else 1,), "float32")
    rstd = TARGET.empty((rows,), "float32")
    k = build(*bk.fused_source("forward_saving", op, _dtype(y), block, threads), threads=threads)
    args = (x, w, inputs.get("bias", w), y, mean, rstd, np.int64(cols))  # rmsnorm: weight as the unread bias
    saved = {"x": x, "weight": w, "rstd": rstd}
    if op == "layernorm":
        saved["mean"] = mean
    return _pass([(k, (rows,), args)], block, threads, opts, saved)


def fused_backward(op: str, inputs: dict, saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One row pass (dx, float32 partial rows of dweight and dbias), then the partials' sum; softmax one pass."""
    dy, dx = inputs["dy"], grads["dx"]
    rows, cols = dx.shape
    (block, threads), dtype = geometry(cols, params, opts), _dtype(dx)
    if op == "softmax":
        k = build(*bk.fused_source("softmax_backward", op, dtype, block, threads), threads=threads)
        return _pass([(k, (rows,), (saved["y"], dy, dx, np.int64(cols)))], block, threads, opts)
    centred, blocks = op == "layernorm", partials(rows)
    pw = TARGET.empty((blocks, cols), "float32")
    pb = TARGET.empty((blocks, cols), "float32") if centred else pw  # rmsnorm: unread
    mean = saved["mean"] if centred else saved["rstd"]  # rmsnorm: an unread placeholder
    dw = grads["dweight"]
    rows_kernel = build(*bk.fused_source("backward_rows", op, dtype, block, threads), threads=threads)
    sum_kernel = build(*bk.fused_source("sum_partials", op, dtype, block, threads), threads=threads)
    row_args = (saved["x"], dy, saved["weight"], mean, saved["rstd"], dx, pw, pb, np.int64(rows), np.int64(cols))
    sum_args = (pw, pb, dw, grads["dbias"] if centred else dw, np.int64(blocks), np.int64(cols))
    launches = [(rows_kernel, (blocks,), row_args), (sum_kernel, (cdiv(cols, threads),), sum_args)]
    return _pass(launches, block, threads, opts, partials=blocks)


def unfused_forward(op: str, inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """The forward decomposition, one kernel per step (the forward module's); x̂ and the row's variance (mean
    square), or y, kept."""
    rows, cols = y.shape
    (block, threads), dtype = geometry(cols, params, opts), _dtype(y)
    env = _forward_inputs(inputs) | {"y": y}
    placeholder = TARGET.empty((1,), "float32")
    writes = walk(DECOMPOSITIONS[op], env, stats=ROW_STATS, stat=lambda: TARGET.empty((rows,), "float32"),
                  matrix=lambda: TARGET.empty((rows, cols), dtype))  # fmt: skip
    steps = [_step(st, env, dtype, block, threads, placeholder) for st in writes]
    return _pass(steps, block, threads, opts, {t: env[t] for t in UNFUSED_SAVES[op]})


def _backward_step(st: Any, env: dict[str, Any], dtype: str, block: int, threads: int) -> Step:
    """(compiled kernel, grid, arguments) of one step of BACKWARD_DECOMPOSITIONS; `scale` is the forward's."""
    rows, cols = env["dy"].shape
    reads = [env[t] for t in st.reads]
    out, pair, n = env[st.writes], len(reads) > 1, np.int64(cols)
    if st.op == "scale":
        k = build(*forward_step_source("scale", dtype, block, threads), threads=threads)
        placeholder = TARGET.empty((1,), "float32")
        return k, (rows, cdiv(cols, block)), (reads[0], placeholder, reads[1], reads[1], out, n)
    k = build(*bk.step_source(st.op, dtype, block, threads, pair), threads=threads)
    if st.op == "colsum":
        return k, (cdiv(cols, threads),), (reads[0], reads[-1], out, np.int64(rows), n)
    if st.op in ("row_mean", "row_sum"):
        return k, (rows,), (reads[0], reads[-1], out, n)
    return k, (rows, cdiv(cols, block)), (*reads, out, n)


def unfused_backward(op: str, inputs: dict, saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel per step; dx̂ and the row means (sum) allocated here, reused every launch."""
    dy = inputs["dy"]
    rows, cols = dy.shape
    (block, threads), dtype = geometry(cols, params, opts), _dtype(dy)
    env = {**inputs, **saved, **grads}
    writes = walk(BACKWARD_DECOMPOSITIONS[op], env, stats=STATS, stat=lambda: TARGET.empty((rows,), "float32"),
                  matrix=lambda: TARGET.empty((rows, cols), dtype))  # fmt: skip
    return _pass([_backward_step(st, env, dtype, block, threads) for st in writes], block, threads, opts)


for _op in DECOMPOSITIONS:
    training(
        _op,
        backend="cupy",
        device="cuda",
        like=lambda a: TARGET.empty(a.shape, str(a.dtype)),
        fused=(functools.partial(fused_forward, _op), functools.partial(fused_backward, _op)),
        unfused=(functools.partial(unfused_forward, _op), functools.partial(unfused_backward, _op)),
    )
