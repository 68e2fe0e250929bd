"""add_rmsnorm in Triton: one program per row fused; unfused, the residual add then rmsnorm's step kernels.

Fused: while cols ≤ tile a program loads its row of x and residual as one block of TILE columns (the smallest
power of two ≥ cols), adds them in float32, stores h, and normalises from the same registers: x and residual
read once, h and y written once. A wider row is walked in blocks of TILE twice — h stored and its squares summed
first, then x and residual read again and h recomputed for y (no program reads what it wrote) — as the ledger
counts. Unfused: `_residual_add` on a (rows, cdiv(cols, TILE)) grid writes h, then the normalization family's
rmsnorm steps (`normalization.step_launch`), launched and recorded by that module's launcher, so the settings
(TILE, num_warps) are the normalization family's for the same row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from backends.triton.normalization import EPS_, _launcher, step_launch
from scenarios.add_rmsnorm import ROW_STATS, STEPS
from suite.core.decomposition import walk
from suite.core.registry import Launcher, kernel
from suite.kit.launch import cdiv, chunk_columns


@triton.jit
def _add_rmsnorm_fused(x_ptr, r_ptr, w_ptr, h_ptr, y_ptr, cols, TILE: tl.constexpr, ONE_TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * cols
    offs = tl.arange(0, TILE)
    if ONE_TILE:
        mask = offs < cols
        v = tl.load(x_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        v += tl.load(r_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(h_ptr + row + offs, v.to(h_ptr.dtype.element_ty), mask=mask)
        rstd = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / cols + EPS_)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + offs, (v * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([TILE], tl.float32)
        for start in range(0, cols, TILE):
            mask = start + offs < cols
            v = tl.load(x_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            v += tl.load(r_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(h_ptr + row + start + offs, v.to(h_ptr.dtype.element_ty), mask=mask)
            acc += v * v
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + EPS_)
        for start in range(0, cols, TILE):  # the re-read of x and residual
            mask = start + offs < cols
            v = tl.load(x_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            v += tl.load(r_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + row + start + offs, (v * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _residual_add(x_ptr, r_ptr, h_ptr, cols, TILE: tl.constexpr):
    """h = x + residual in float32, one block of TILE columns per program."""
    row = tl.program_id(0).to(tl.int64) * cols
    offs = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    v = tl.load(x_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    v += tl.load(r_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(h_ptr + row + offs, v.to(h_ptr.dtype.element_ty), mask=mask)


@kernel(scenario="add_rmsnorm", backend="triton", variant="fused", device="cuda")
def fused(inputs: dict, out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    rows, cols = out.shape[1], out.shape[2]
    tile = chunk_columns(cols, int(params["tile"]))
    args = (inputs["x"], inputs["residual"], inputs["weight"], out[0], out[1], cols)
    return _launcher([(_add_rmsnorm_fused, (rows,), args, {"ONE_TILE": cols <= tile})], tile, opts)


@kernel(scenario="add_rmsnorm", backend="triton", variant="unfused", device="cuda")
def unfused(inputs: dict, out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    rows, cols = out.shape[1], out.shape[2]
    tile = chunk_columns(cols, int(params["tile"]))
    env = dict(inputs) | {"h": out[0], "y": out[1]}
    steps = list(
        walk(
            STEPS,
            env,
            stats=ROW_STATS,
            matrix=lambda: out.new_empty((rows, cols)),
            stat=lambda: torch.empty(rows, dtype=torch.float32, device=out.device),
        )
    )
    add = (_residual_add, (rows, cdiv(cols, tile)), (env["x"], env["residual"], env["h"], cols), {})
    norm = [step_launch(st.op, env, st.reads, st.writes, rows, cols, tile) for st in steps[1:]]
    return _launcher([add, *norm], tile, opts)
