"""Row normalization's backward and train phases on the host CPU with Numba: fused against unfused.

fused: layernorm and rmsnorm run a forward that writes y and each row's float32 statistics (mean and rstd, or
rstd) and keep x; their backward is one parallel pass over blocks of rows recomputing x̂ and writing dx, with
dweight (dbias) as float32 partial rows, one per block (`partials(rows)`: rows/8, at most 128), summed by a
second small kernel — partials·cols·4 bytes per gradient written, then read, which the ledger counts. softmax
runs the forward's own fused kernel (it keeps y) and a one-pass backward.
unfused: the forward decomposition's kernels (`normalization.unfused`'s steps), keeping x̂ and the row's
variance (mean square), or y; the backward walks `BACKWARD_DECOMPOSITIONS`, one kernel per step.

As in the forward module, every buffer and scratch array is allocated and every kernel compiled for its exact
arguments while the entry prepares, so that a launch only launches (`suite.kit.training`).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from backends.numba.on_cpu import normalization_backward_kernels as bk
from backends.numba.on_cpu.arrays import per_thread, storage
from backends.numba.on_cpu.normalization import _compiled, _dtype, _step, fused_entry
from backends.numba.on_cpu.normalization_kernels import CODES, step_kernel
from scenarios.normalization import DECOMPOSITIONS, ROW_STATS
from scenarios.normalization.backward_decomposition import (
    BACKWARD_DECOMPOSITIONS,
    STATS,
    UNFUSED_SAVES,
    partials,
)
from suite.core.decomposition import walk
from suite.kit.training import Pass, training

F32 = np.float32


def _forward_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in inputs.items() if k != "dy"}


def fused_forward(op: str, inputs: dict[str, Any], y: np.ndarray, params: dict, opts: dict) -> Pass:
    """y, and what the fused backward reads: x and weight (inputs, kept), the row statistics (written)."""
    forward = _forward_inputs(inputs)
    if op == "softmax":
        return Pass(fused_entry(op, forward, y, params, opts), {"y": y})
    dtype = _dtype(op, forward, y)
    x, w = storage(inputs["x"]), storage(inputs["weight"])
    bias = storage(inputs["bias"]) if "bias" in inputs else np.empty(0, x.dtype)
    rows, tile = x.shape[0], int(params["tile"])
    mean = np.empty(rows if op == "layernorm" else 0, F32)
    rstd = np.empty(rows, F32)
    buf = per_thread(min(x.shape[1], tile), F32)
    args = (x, w, bias, storage(y), mean, rstd, tile, buf, np.empty(w.size, F32), np.empty(bias.size, F32))
    kernel = _compiled(bk.fused_forward(op, dtype), *args)
    saved = {"x": inputs["x"], "weight": inputs["weight"], "rstd": rstd}
    if op == "layernorm":
        saved["mean"] = mean
    return Pass(lambda: kernel(*args), saved)


def fused_backward(op: str, inputs: dict, saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One row pass (dx, partial rows of dweight and dbias), then the partials' sum."""
    dy, dx = storage(inputs["dy"]), storage(grads["dx"])
    dtype = _dtype(op, {"dy": inputs["dy"]}, grads["dx"])
    if op == "softmax":
        args = (storage(saved["y"]), dy, dx)
        kernel = _compiled(bk.softmax_backward(dtype), *args)
        return Pass(lambda: kernel(*args))
    rows, cols = dx.shape
    tile, blocks = int(params["tile"]), partials(rows)
    mean = saved["mean"] if op == "layernorm" else np.empty(0, F32)
    pw = np.empty((blocks, cols), F32)
    pb = np.empty((blocks, cols if op == "layernorm" else 0), F32)
    x, w = storage(saved["x"]), storage(saved["weight"])
    row_args = (x, dy, w, mean, saved["rstd"], dx, pw, pb, tile, np.empty(cols, F32))
    rows_kernel = _compiled(bk.fused_backward(op, dtype), *row_args)
    db = storage(grads["dbias"]) if "dbias" in grads else np.empty(0, dy.dtype)
    sum_args = (pw, pb, storage(grads["dweight"]), db)
    sum_kernel = _compiled(bk.sum_partials(dtype), *sum_args)

    def run() -> None:
        rows_kernel(*row_args)
        sum_kernel(*sum_args)

    return Pass(run, notes={"partials": blocks})


def unfused_forward(op: str, inputs: dict[str, Any], y: np.ndarray, params: dict, opts: dict) -> Pass:
    """The forward decomposition, one kernel per step; x̂ and the row's variance (mean square), or y, kept."""
    forward = _forward_inputs(inputs)
    dtype = _dtype(op, forward, y)
    env = {name: storage(a) for name, a in forward.items()} | {"y": storage(y)}
    writes = walk(DECOMPOSITIONS[op], env, stats=ROW_STATS,
                  stat=lambda: np.empty(y.shape[0], F32), matrix=lambda: np.empty_like(env["x"]))  # fmt: skip
    steps = [_step(st, env, dtype) for st in writes]
    held = {**forward, "y": y}

    def run() -> None:
        for kernel, args in steps:
            kernel(*args)

    return Pass(run, {t: held.get(t, env[t]) for t in UNFUSED_SAVES[op]})


def _backward_step(st: Any, env: dict[str, Any], dtype: str) -> tuple[Any, tuple]:
    """(compiled kernel, arguments) of one step of BACKWARD_DECOMPOSITIONS."""
    reads = [env[t] for t in st.reads]
    if st.op == "colsum":
        pair = reads[1] if len(reads) > 1 else reads[0]
        args = (reads[0], pair, env[st.writes], per_thread(bk.COL_BLOCK, F32), len(reads) - 1)
        return _compiled(bk.column_sum(dtype), *args), args
    if st.op == "scale":
        scratch = (np.empty(reads[1].size, F32), np.empty(0, F32))
        args = (reads[0], reads[1], np.empty(0, reads[1].dtype), env[st.writes], *scratch, CODES["scale"])
        return _compiled(step_kernel("affine", dtype), *args), args
    if st.op in ("row_mean", "row_sum"):
        pair = reads[1] if len(reads) > 1 else reads[0]
        code = 2 if st.op == "row_sum" else len(reads) - 1
        args = (reads[0], pair, env[st.writes], code)
        return _compiled(bk.row_reduce(dtype), *args), args
    if st.op == "product":
        args = (reads[0], reads[1], env[st.writes])
        return _compiled(bk.product(dtype), *args), args
    if st.op == "softmax_dx":
        args = (*reads, env[st.writes])
        return _compiled(bk.softmax_dx(dtype), *args), args
    dxhat, xhat, stat = reads[:3]
    m1, m2 = (reads[3], reads[4]) if st.op == "layernorm_dx" else (reads[3], reads[3])
    args = (dxhat, xhat, stat, m1, m2, env[st.writes], int(st.op == "layernorm_dx"))
    return _compiled(bk.norm_dx(dtype), *args), args


def unfused_backward(op: str, inputs: dict, saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel per step; dx̂ and the row means (sum) allocated here, reused every launch."""
    dtype = _dtype(op, {"dy": inputs["dy"]}, grads["dx"])
    env = {name: storage(a) for name, a in {**inputs, **saved, **grads}.items()}
    dy = env["dy"]
    writes = walk(BACKWARD_DECOMPOSITIONS[op], env, stats=STATS,
                  stat=lambda: np.empty(dy.shape[0], F32), matrix=lambda: np.empty_like(dy))  # fmt: skip
    steps = [_backward_step(st, env, dtype) for st in writes]

    def run() -> None:
        for kernel, args in steps:
            kernel(*args)

    return Pass(run)


for _op in DECOMPOSITIONS:
    training(
        _op,
        backend="numba",
        device="cpu",
        fused=(functools.partial(fused_forward, _op), functools.partial(fused_backward, _op)),
        unfused=(functools.partial(unfused_forward, _op), functools.partial(unfused_backward, _op)),
    )
