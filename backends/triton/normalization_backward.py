"""Row normalization's backward and train phases in Triton (layernorm, rmsnorm, softmax): fused against unfused.

fused: layernorm and rmsnorm run a forward that writes y and each row's float32 statistics (mean and rstd, or
rstd) and keep x and weight; their backward is one pass over blocks of rows (`partials(rows)` programs: rows/8,
at most 128) recomputing x̂ and writing dx, with dweight (dbias) left as one float32 partial row per program
and summed by a second small kernel — the partials' bytes, written then read, are in the ledger. softmax runs
the forward's own fused kernel (it keeps y) and a one-pass backward, one program per row.
unfused: the forward decomposition's kernels (the forward module's step templates), keeping x̂ and the row's
variance (mean square), or y; the backward walks `BACKWARD_DECOMPOSITIONS`, one kernel per step.

Tiles and warps as the forward (TILE = min(tile, next power of two ≥ cols), `row_warps`). Every kernel is
compiled and recorded (`record_triton`) while the entry prepares, so that a launch only launches.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from backends.triton import BACKEND
from backends.triton import normalization_backward_kernels as bk
from backends.triton.normalization import CODES as FORWARD_CODES
from backends.triton.normalization import _affine as affine
from backends.triton.normalization import _launcher, fused_entry, num_warps, step_launch
from backends.triton.record import record_triton
from scenarios.normalization import DECOMPOSITIONS, ROW_STATS
from scenarios.normalization.backward_decomposition import BACKWARD_DECOMPOSITIONS, STATS, UNFUSED_SAVES, partials
from suite.core.decomposition import walk
from suite.kit.launch import cdiv, chunk_columns
from suite.kit.launch_shape import chosen_by, launch_notes
from suite.kit.training import Pass, training

Kernel = tuple[Any, tuple[int, ...], tuple[Any, ...], dict[str, Any]]
"""(kernel, grid, arguments, constexprs) of one launch."""


def _forward_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in inputs.items() if k != "dy"}


def _stat(rows: int, like: torch.Tensor) -> torch.Tensor:
    return torch.empty(rows, dtype=torch.float32, device=like.device)


def _prepared(launches: list[Kernel], tile: int, opts: dict) -> Pass:
    """Compile and record every launch now (a no-op compile in the interpreter); the pass only launches."""
    warps = num_warps(tile, opts)
    context = BACKEND.launch_stream(opts.get("stream"))
    for fn, grid, args, const in launches:
        compiled = fn.warmup(*args, TILE=tile, num_warps=warps, grid=grid, **const)
        record_triton(fn, args, {"TILE": tile, **const}, warps, compiled=compiled)

    def run() -> None:
        with context():
            for fn, grid, args, const in launches:
                fn[grid](*args, TILE=tile, num_warps=warps, **const)

    by = chosen_by(opts, ("num_warps",))
    return Pass(run, notes=launch_notes({"tile": tile, "num_warps": warps}, launches[0][1], by, kernels=len(launches)))


def fused_forward(op: str, inputs: dict[str, Any], y: torch.Tensor, params: dict, opts: dict) -> Pass:
    """y, and what the fused backward reads: x and weight (inputs, kept), the row statistics (written)."""
    forward = _forward_inputs(inputs)
    if op == "softmax":
        return Pass(fused_entry(op, forward, y, params, opts).run, {"y": y})
    rows, cols = y.shape
    tile = chunk_columns(cols, int(params["tile"]))
    x, w = inputs["x"], inputs["weight"]
    mean, rstd = _stat(rows if op == "layernorm" else 1, y), _stat(rows, y)
    bias = inputs.get("bias", w)  # rmsnorm: an unread placeholder
    const = {"CENTRED": op == "layernorm", "ONE_TILE": cols <= tile}
    forward_pass = _prepared([(bk._norm_forward_saving, (rows,), (x, w, bias, y, mean, rstd, cols), const)], tile, opts)
    saved = {"x": x, "weight": w, "rstd": rstd}
    if op == "layernorm":
        saved["mean"] = mean
    return Pass(forward_pass.run, saved, forward_pass.notes)


def fused_backward(op: str, inputs: dict, saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One row pass (dx, float32 partial rows of dweight and dbias), then the partials' sum; softmax one pass."""
    dy, dx = inputs["dy"], grads["dx"]
    rows, cols = dx.shape
    tile = chunk_columns(cols, int(params["tile"]))
    one_tile = cols <= tile
    if op == "softmax":
        return _prepared([(bk._softmax_backward, (rows,), (saved["y"], dy, dx, cols), {"ONE_TILE": one_tile})],
                         tile, opts)  # fmt: skip
    centred, blocks = op == "layernorm", partials(rows)
    pw = torch.empty((blocks, cols), dtype=torch.float32, device=dx.device)
    pb = torch.empty((blocks, cols), dtype=torch.float32, device=dx.device) if centred else pw  # rmsnorm: unread
    mean = saved["mean"] if centred else saved["rstd"]  # rmsnorm: an unread placeholder
    row_args = (saved["x"], dy, saved["weight"], mean, saved["rstd"], dx, pw, pb, rows, cols, cdiv(rows, blocks))
    sum_args = (pw, pb, grads["dweight"], grads["dbias"] if centred else grads["dweight"], blocks, cols)
    launches = [
        (bk._norm_backward_rows, (blocks,), row_args, {"CENTRED": centred, "ONE_TILE": one_tile}),
        (bk._sum_partials, (cdiv(cols, tile),), sum_args, {"CENTRED": centred}),
    ]
    done = _prepared(launches, tile, opts)
    return Pass(done.run, notes={**done.notes, "partials": blocks})


def unfused_forward(op: str, inputs: dict[str, Any], y: torch.Tensor, params: dict, opts: dict) -> Pass:
    """The forward decomposition, one kernel per step; x̂ and the row's variance (mean square), or y, kept."""
    forward = _forward_inputs(inputs)
    rows, cols = y.shape
    tile = chunk_columns(cols, int(params["tile"]))
    env = dict(forward) | {"y": y}
    writes = walk(DECOMPOSITIONS[op], env, stats=ROW_STATS,
                  stat=lambda: _stat(rows, y), matrix=lambda: y.new_empty(y.shape))  # fmt: skip
    launch = _launcher([step_launch(st.op, env, st.reads, st.writes, rows, cols, tile) for st in writes], tile, opts)
    return Pass(launch.run, {t: env[t] for t in UNFUSED_SAVES[op]}, launch.notes)


def _backward_step(st: Any, env: dict[str, Any], rows: int, cols: int, tile: int) -> Kernel:
    """(kernel, grid, arguments, constexprs) of one step of BACKWARD_DECOMPOSITIONS."""
    reads = [env[t] for t in st.reads]
    out, pair = env[st.writes], len(reads) > 1
    chunks = (rows, cdiv(cols, tile))
    if st.op == "colsum":
        return bk._column_sum, (cdiv(cols, tile),), (reads[0], reads[-1], out, rows, cols), {"PAIR": pair}
    if st.op == "scale":
        return affine, chunks, (reads[0], reads[1], reads[1], out, cols), {"OP": FORWARD_CODES["scale"]}
    if st.op in ("row_mean", "row_sum"):
        return bk._row_reduce, (rows,), (reads[0], reads[-1], out, cols), {"PAIR": pair, "MEAN": st.op == "row_mean"}
    if st.op == "product":
        return bk._product, chunks, (reads[0], reads[1], out, cols), {}
    if st.op == "softmax_dx":
        return bk._softmax_dx, chunks, (*reads, out, cols), {}
    centred = st.op == "layernorm_dx"
    dxhat, xhat, stat = reads[:3]
    m1, m2 = (reads[3], reads[4]) if centred else (reads[3], reads[3])
    return bk._norm_dx, chunks, (dxhat, xhat, stat, m1, m2, out, cols), {"CENTRED": centred}


def unfused_backward(op: str, inputs: dict, saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel per step; dx̂ and the row means (sum) allocated here, reused every launch."""
    dy = inputs["dy"]
    rows, cols = dy.shape
    tile = chunk_columns(cols, int(params["tile"]))
    env = {**inputs, **saved, **grads}
    writes = walk(BACKWARD_DECOMPOSITIONS[op], env, stats=STATS,
                  stat=lambda: _stat(rows, dy), matrix=lambda: dy.new_empty(dy.shape))  # fmt: skip
    return _prepared([_backward_step(st, env, rows, cols, tile) for st in writes], tile, opts)


for _op in DECOMPOSITIONS:
    training(
        _op,
        backend="triton",
        device="cuda",
        fused=(functools.partial(fused_forward, _op), functools.partial(fused_backward, _op)),
        unfused=(functools.partial(unfused_forward, _op), functools.partial(unfused_backward, _op)),
    )
