"""Row normalization (layernorm, rmsnorm, softmax) in Triton: one program per row fused, one kernel per step unfused.

Fused: when cols ≤ tile a program loads its row as one block of TILE columns (the smallest power of two
≥ cols) and keeps it in registers: x read once. A wider row is walked in blocks of TILE = tile twice —
statistics first (Chan's merge of block means and M2 for layernorm, an online max with a rescaled sum for
softmax), then the output — so x is read twice, as the ledger counts. ONE_TILE is a constexpr: each path
is its own specialisation.

Unfused walks the scenario's decomposition with four templates: a row reduction (one program per row,
looping over the row), an elementwise step with a row statistic, exp, and scale (and shift); the elementwise
ones run on a (rows, cdiv(cols, TILE)) grid. Matrices are stored in the case's dtype, statistics in float32.
Offsets are 64-bit (row · cols passes 2³¹). num_warps grows with TILE, 8 values a thread within 1..16 warps
(`backends.triton.launch.row_warps`), unless opts["num_warps"] says otherwise; the launcher's notes record
TILE, num_warps and the grid. Written for Triton 3.6 and later.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.launch import row_warps
from backends.triton.record import record_triton
from scenarios.normalization import DECOMPOSITIONS, EPS, ROW_STATS, kind
from suite.core import scenario
from suite.core.decomposition import walk
from suite.core.registry import Launch, Launcher, kernels
from suite.kit.launch import cdiv, chunk_columns
from suite.kit.launch_shape import chosen_by, launch_notes

CODES = {"mean": 0, "mean_square": 1, "max": 2, "sum": 3, "center": 4, "normalize": 5, "shift": 6, "divide": 7,
         "exp": 8, "scale": 9, "scale_shift": 10}  # fmt: skip
MEAN: tl.constexpr = tl.constexpr(CODES["mean"])
MEAN_SQUARE: tl.constexpr = tl.constexpr(CODES["mean_square"])
MAX: tl.constexpr = tl.constexpr(CODES["max"])
SUM: tl.constexpr = tl.constexpr(CODES["sum"])
CENTER: tl.constexpr = tl.constexpr(CODES["center"])
NORMALIZE: tl.constexpr = tl.constexpr(CODES["normalize"])
SHIFT: tl.constexpr = tl.constexpr(CODES["shift"])
DIVIDE: tl.constexpr = tl.constexpr(CODES["divide"])
SCALE_SHIFT: tl.constexpr = tl.constexpr(CODES["scale_shift"])
EPS_: tl.constexpr = tl.constexpr(EPS)


@triton.jit
def _scalar(value: tl.constexpr, TILE: tl.constexpr):
    """A float32 scalar tensor holding `value`: a loop-carried variable must not start as a Python float."""
    return tl.max(tl.full([TILE], value, tl.float32), axis=0)


# Fused ------------------------------------------------------------------------------------------------------------


@triton.jit
def _layernorm_fused(x_ptr, w_ptr, b_ptr, y_ptr, cols, TILE: tl.constexpr, ONE_TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * cols
    offs = tl.arange(0, TILE)
    if ONE_TILE:
        mask = offs < cols
        v = tl.load(x_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(v, axis=0) / cols
        d = tl.where(mask, v - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / cols + EPS_)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + offs, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        mean, m2, count = _scalar(0.0, TILE), _scalar(0.0, TILE), _scalar(0.0, TILE)
        for start in range(0, cols, TILE):  # Chan et al.: merge each block's mean and M2
            mask = start + offs < cols
            v = tl.load(x_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            n = tl.minimum(cols - start, TILE).to(tl.float32)
            mean_c = tl.sum(v, axis=0) / n
            d = tl.where(mask, v - mean_c, 0.0)
            total = count + n
            delta = mean_c - mean
            mean = mean + delta * (n / total)
            m2 = m2 + tl.sum(d * d, axis=0) + delta * delta * (count * n / total)
            count = total
        rstd = 1.0 / tl.sqrt(m2 / cols + EPS_)
        for start in range(0, cols, TILE):  # the re-read
            mask = start + offs < cols
            v = tl.load(x_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + row + start + offs, ((v - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_fused(x_ptr, w_ptr, y_ptr, cols, TILE: tl.constexpr, ONE_TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * cols
    offs = tl.arange(0, TILE)
    if ONE_TILE:
        mask = offs < cols
        v = tl.load(x_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / cols + EPS_)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + offs, (v * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([TILE], tl.float32)
        for start in range(0, cols, TILE):
            v = tl.load(x_ptr + row + start + offs, mask=start + offs < cols, other=0.0).to(tl.float32)
            acc += v * v
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + EPS_)
        for start in range(0, cols, TILE):  # the re-read
            mask = start + offs < cols
            v = tl.load(x_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + row + start + offs, (v * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_fused(x_ptr, y_ptr, cols, TILE: tl.constexpr, ONE_TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * cols
    offs = tl.arange(0, TILE)
    if ONE_TILE:
        mask = offs < cols
        v = tl.load(x_ptr + row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(y_ptr + row + offs, (e * (1.0 / tl.sum(e, axis=0))).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        m, total = _scalar(-float("inf"), TILE), _scalar(0.0, TILE)
        for start in range(0, cols, TILE):  # online softmax: rescale the running sum whenever the max grows
            mask = start + offs < cols
            v = tl.load(x_ptr + row + start + offs, mask=mask, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(v, axis=0))
            total = total * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new), axis=0)
            m = m_new
        inv = 1.0 / total
        for start in range(0, cols, TILE):  # the re-read
            mask = start + offs < cols
            v = tl.load(x_ptr + row + start + offs, mask=mask, other=-float("inf")).to(tl.float32)
            tl.store(y_ptr + row + start + offs, (tl.exp(v - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)


# Unfused: the decomposition's step templates ---------------------------------------------------------------------


@triton.jit
def _reduce_rows(src_ptr, stat_ptr, cols, OP: tl.constexpr, TILE: tl.constexpr):
    """stat[row] = mean(v), mean(v²), max(v) or sum(v) over the row, accumulated per lane in float32."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, TILE)
    other = -float("inf") if OP == MAX else 0.0
    acc = tl.full([TILE], other, tl.float32)
    for start in range(0, cols, TILE):
        v = tl.load(src_ptr + row * cols + start + offs, mask=start + offs < cols, other=other).to(tl.float32)
        if OP == MAX:
            acc = tl.maximum(acc, v)
        elif OP == MEAN_SQUARE:
            acc += v * v
        else:
            acc += v
    if OP == MAX:  # noqa: SIM108 - constexpr branches, resolved at compile time
        result = tl.max(acc, axis=0)
    else:
        result = tl.sum(acc, axis=0)
    if OP == MEAN or OP == MEAN_SQUARE:  # noqa: SIM109 - `in` on constexpr tuples is not Triton
        result = result / cols
    tl.store(stat_ptr + row, result)


@triton.jit
def _rowwise(src_ptr, stat_ptr, dst_ptr, cols, OP: tl.constexpr, TILE: tl.constexpr):
    """dst = v − s, v · 1/sqrt(s + eps), v − s or v · 1/s with s the row's statistic; one block per program."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    v = tl.load(src_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(stat_ptr + row)
    if OP == CENTER or OP == SHIFT:  # noqa: SIM109
        v = v - s
    elif OP == NORMALIZE:
        v = v * (1.0 / tl.sqrt(s + EPS_))
    else:
        v = v * (1.0 / s)
    tl.store(dst_ptr + row * cols + offs, v.to(dst_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _exp_map(src_ptr, dst_ptr, cols, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    v = tl.load(src_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(dst_ptr + row * cols + offs, tl.exp(v).to(dst_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _affine(src_ptr, w_ptr, b_ptr, dst_ptr, cols, OP: tl.constexpr, TILE: tl.constexpr):
    """dst = v · weight (+ bias for scale_shift)."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    v = tl.load(src_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float32)
    v = v * tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if OP == SCALE_SHIFT:
        v = v + tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(dst_ptr + row * cols + offs, v.to(dst_ptr.dtype.element_ty), mask=mask)


# Launchers and entries -------------------------------------------------------------------------------------------

FUSED = {"layernorm": _layernorm_fused, "rmsnorm": _rmsnorm_fused, "softmax": _softmax_fused}
"""Each op's fused kernel; it takes the scenario's inputs in their order, then y and cols."""


def num_warps(tile: int, opts: dict) -> int:
    """Warps of every kernel of a case with chunks of `tile` columns (`row_warps`)."""
    return row_warps(tile, opts)


Step = tuple[Any, tuple[int, ...], tuple[Any, ...], dict[str, Any]]


def step_launch(
    op: str, env: dict[str, Any], reads: tuple[str, ...], writes: str, rows: int, cols: int, tile: int
) -> Step:
    """(kernel, grid, args, constexprs) of one step of the decomposition."""
    chunks = (rows, cdiv(cols, tile))
    src, dst = env[reads[0]], env[writes]
    template = kind(op)
    if template == "reduce":
        return _reduce_rows, (rows,), (src, dst, cols), {"OP": CODES[op]}
    if template == "rowwise":
        return _rowwise, chunks, (src, env[reads[1]], dst, cols), {"OP": CODES[op]}
    if template == "map":
        return _exp_map, chunks, (src, dst, cols), {}
    bias = env["bias"] if op == "scale_shift" else env["weight"]  # scale: an unread placeholder
    return _affine, chunks, (src, env["weight"], bias, dst, cols), {"OP": CODES[op]}


def _launcher(launches: list[Step], tile: int, opts: dict) -> Launcher:
    """Compile every launch now (a no-op in the interpreter) and return a closure that only launches."""
    warps = num_warps(tile, opts)
    context: Callable[[], contextlib.AbstractContextManager] = BACKEND.launch_stream(opts.get("stream"))
    for fn, grid, args, const in launches:
        compiled = fn.warmup(*args, TILE=tile, num_warps=warps, grid=grid, **const)
        record_triton(fn, args, {"TILE": tile, **const}, warps, compiled=compiled)

    def launch() -> None:
        with context():
            for fn, grid, args, const in launches:
                fn[grid](*args, TILE=tile, num_warps=warps, **const)

    by = chosen_by(opts, ("num_warps",))
    settings = {"tile": tile, "num_warps": warps}
    return Launch(launch, notes=launch_notes(settings, launches[0][1], by, kernels=len(launches)))


def fused_entry(op: str, inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    rows, cols = out.shape[0], out.shape[1]
    tile = chunk_columns(cols, int(params["tile"]))  # TILE of the launch
    args = (*(inputs[n] for n in scenario.get(op).inputs), out, cols)
    return _launcher([(FUSED[op], (rows,), args, {"ONE_TILE": cols <= tile})], tile, opts)


def unfused_entry(op: str, inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    rows, cols = out.shape[0], out.shape[1]
    tile = chunk_columns(cols, int(params["tile"]))  # TILE of the launch
    env = dict(inputs) | {"y": out}
    steps = walk(
        DECOMPOSITIONS[op],
        env,
        stats=ROW_STATS,
        matrix=lambda: out.new_empty(out.shape),
        stat=lambda: torch.empty(rows, dtype=torch.float32, device=out.device),
    )
    return _launcher([step_launch(st.op, env, st.reads, st.writes, rows, cols, tile) for st in steps], tile, opts)


kernels(DECOMPOSITIONS, backend="triton", fused=fused_entry, unfused=unfused_entry)
