"""add_rmsnorm's training step in Triton, fused and unfused (`scenarios.add_rmsnorm.backward` has the math and
the ledger these kernels follow).

Fused: the forward is the forward's fused kernel that also stores each row's rstd (the one tensor the backward
needs that the forward would not otherwise write); it keeps h (out[0]), rstd and γ. The backward is two launches:
one program per row block of `partial_rows(rows)` blocks walks its rows — a row of one TILE is loaded once, its
Σ g·γ·h and its gradients formed from registers; a wider row is walked twice (the sum, then the gradients, h
and dy[1] read again, as the ledger counts) — writing dx = dresidual and adding the row's dy[1]·h·rstd into
the block's float32 partial row of dweight; then `_reduce_partials` sums the partial rows in order into dweight.
No atomics: a program owns its partial row (zeroed by it at each launch, so a block past the last row adds
nothing), and the sum over blocks is in block order, so dweight does not depend on scheduling. A partial row of
one TILE stays in registers across the block's rows; a wider one is added to in memory, chunk by chunk (the
block's own row, cols·4 bytes, which stays in cache).

Unfused: the forward is the forward's unfused walk (the residual add, then rmsnorm's steps), keeping h, the row
mean square ms and ĥ, which it writes anyway. The backward is five launches: dĥ = dy[1]·γ (the normalization
family's `_affine` scale step), dweight's partials of dy[1]·ĥ on a (row blocks, column chunks) grid, their
reduction, dms per row, and h's gradient into dx and dresidual. dĥ, dms and the partials are allocated while
the pass is prepared, so a launch allocates nothing.

Every kernel is compiled and recorded for the resource report by `normalization._launcher` (its TILE and
num_warps are the normalization family's for the same row). Arithmetic in float32, stored in the case's dtype.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from backends.triton.add_rmsnorm import _residual_add
from backends.triton.normalization import CODES, EPS_, _affine, _launcher, step_launch
from scenarios.add_rmsnorm import ROW_STATS, STEPS
from scenarios.add_rmsnorm.backward import partial_rows
from suite.core.decomposition import walk
from suite.kit.launch import cdiv, chunk_columns
from suite.kit.training import Pass, training


@triton.jit
def _add_rmsnorm_fused_saving(
    x_ptr, r_ptr, w_ptr, h_ptr, y_ptr, rstd_ptr, cols, TILE: tl.constexpr, ONE_TILE: tl.constexpr
):
    """The forward's fused kernel (`add_rmsnorm._add_rmsnorm_fused`), also storing the row's rstd."""
    row_id = tl.program_id(0)
    row = row_id.to(tl.int64) * cols
    offs = tl.arange(0, TILE)
    if ONE_TILE:
        mask = offs < cols
        v = tl.load(x_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        v += tl.load(r_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(h_ptr + row + offs, v.to(h_ptr.dtype.element_ty), mask=mask)
        rstd = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / cols + EPS_)
        tl.store(rstd_ptr + row_id, rstd)
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
        tl.store(rstd_ptr + row_id, rstd)
        for start in range(0, cols, TILE):  # the re-read of x and residual
            mask = start + offs < cols
            v = tl.load(x_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            v += tl.load(r_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + row + start + offs, (v * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _fused_backward(
    h_ptr, rstd_ptr, w_ptr, dy0_ptr, dy1_ptr, dx_ptr, dr_ptr, part_ptr, rows, cols, per,
    TILE: tl.constexpr, ONE_TILE: tl.constexpr,
):  # fmt: skip
    """Rows [b·per, (b+1)·per) of block b: dh = dy0 + rs·g·γ − k·h with k = rs³·Σ(g·γ·h)/cols, into dx and
    dresidual; partials[b] = Σ over the block's rows of g·h·rs (g = dy[1])."""
    b = tl.program_id(0).to(tl.int64)
    r0 = b * per  # 64-bit, so is each row index r and its offset r · cols
    r1 = tl.minimum(rows, r0 + per)
    part = part_ptr + b * cols
    offs = tl.arange(0, TILE)
    if ONE_TILE:
        mask = offs < cols
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        acc = tl.zeros([TILE], tl.float32)
        for r in range(r0, r1):
            row = r * cols
            hv = tl.load(h_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
            g = tl.load(dy1_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
            rs = tl.load(rstd_ptr + r)
            k = rs * rs * rs * tl.sum(g * w * hv, axis=0) / cols
            v = tl.load(dy0_ptr + row + offs, mask=mask, other=0.0).to(tl.float32) + rs * g * w - k * hv
            tl.store(dx_ptr + row + offs, v.to(dx_ptr.dtype.element_ty), mask=mask)
            tl.store(dr_ptr + row + offs, v.to(dr_ptr.dtype.element_ty), mask=mask)
            acc += g * hv * rs
        tl.store(part + offs, acc, mask=mask)
    else:
        for start in range(0, cols, TILE):  # the block's partial row, zeroed: it may have no rows
            tl.store(part + start + offs, tl.zeros([TILE], tl.float32), mask=start + offs < cols)
        for r in range(r0, r1):
            row = r * cols
            rs = tl.load(rstd_ptr + r)
            total = tl.zeros([TILE], tl.float32)
            for start in range(0, cols, TILE):
                mask = start + offs < cols
                hv = tl.load(h_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
                g = tl.load(dy1_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
                total += g * w * hv
            k = rs * rs * rs * tl.sum(total, axis=0) / cols
            for start in range(0, cols, TILE):  # the second walk: h and dy[1] read again
                mask = start + offs < cols
                hv = tl.load(h_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
                g = tl.load(dy1_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
                a = tl.load(dy0_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
                v = a + rs * g * w - k * hv
                tl.store(dx_ptr + row + start + offs, v.to(dx_ptr.dtype.element_ty), mask=mask)
                tl.store(dr_ptr + row + start + offs, v.to(dr_ptr.dtype.element_ty), mask=mask)
                p = tl.load(part + start + offs, mask=mask, other=0.0)
                tl.store(part + start + offs, p + g * hv * rs, mask=mask)


@triton.jit
def _reduce_partials(part_ptr, dw_ptr, blocks, cols, TILE: tl.constexpr):
    """dweight[chunk] = Σ over the partial rows, in order, of their chunk; one chunk of TILE columns a program."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    acc = tl.zeros([TILE], tl.float32)
    part = part_ptr + offs
    for _ in range(0, blocks):
        acc += tl.load(part, mask=mask, other=0.0)
        part += cols  # a pointer: 64-bit steps
    tl.store(dw_ptr + offs, acc.to(dw_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _weight_partials(dy1_ptr, hhat_ptr, part_ptr, rows, cols, per, TILE: tl.constexpr):
    """partials[b, chunk] = Σ over block b's rows of dy[1]·ĥ, on a (row blocks, column chunks) grid."""
    b = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    acc = tl.zeros([TILE], tl.float32)
    for r in range(b * per, tl.minimum(rows, b * per + per)):
        row = r * cols
        g = tl.load(dy1_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        acc += g * tl.load(hhat_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(part_ptr + b * cols + offs, acc, mask=mask)


@triton.jit
def _statistic_grad(dhhat_ptr, h_ptr, ms_ptr, dms_ptr, cols, TILE: tl.constexpr):
    """dms[row] = −½·(ms + eps)^(−3/2)·Σ dĥ·h: the normalise step's backward to its statistic."""
    r = tl.program_id(0)
    row = r.to(tl.int64) * cols
    offs = tl.arange(0, TILE)
    acc = tl.zeros([TILE], tl.float32)
    for start in range(0, cols, TILE):
        mask = start + offs < cols
        g = tl.load(dhhat_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += g * tl.load(h_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
    rs = 1.0 / tl.sqrt(tl.load(ms_ptr + r) + EPS_)
    tl.store(dms_ptr + r, -0.5 * rs * rs * rs * tl.sum(acc, axis=0))


@triton.jit
def _h_grad(dy0_ptr, dhhat_ptr, h_ptr, ms_ptr, dms_ptr, dx_ptr, dr_ptr, cols, TILE: tl.constexpr):
    """dx = dresidual = dy[0] + dĥ·r + dms·2h/cols, one chunk of TILE columns a program."""
    r = tl.program_id(0)
    row = r.to(tl.int64) * cols
    offs = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    rs = 1.0 / tl.sqrt(tl.load(ms_ptr + r) + EPS_)
    d = tl.load(dms_ptr + r) * (2.0 / cols)
    v = tl.load(dy0_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    v += tl.load(dhhat_ptr + row + offs, mask=mask, other=0.0).to(tl.float32) * rs
    v += d * tl.load(h_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(dx_ptr + row + offs, v.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dr_ptr + row + offs, v.to(dr_ptr.dtype.element_ty), mask=mask)


def _shape(h: torch.Tensor, params: dict) -> tuple[int, int, int]:
    """(rows, cols, TILE) of a case: TILE the forward's chunk of columns for the row."""
    rows, cols = h.shape
    return rows, cols, chunk_columns(cols, int(params["tile"]))


def _pass(launches: list, tile: int, opts: dict, saved: dict[str, Any] | None = None) -> Pass:
    launch = _launcher(launches, tile, opts)
    return Pass(launch.run, saved=saved or {}, notes=launch.notes)


def _partials(rows: int, cols: int, like: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(dweight's float32 partial rows, rows per block)."""
    blocks = partial_rows(rows)
    return torch.empty((blocks, cols), dtype=torch.float32, device=like.device), cdiv(rows, blocks)


def fused_forward(inputs: dict[str, Any], y: torch.Tensor, params: dict, opts: dict) -> Pass:
    """h and y as the forward's fused kernel, and each row's rstd, which the backward reads."""
    rows, cols, tile = _shape(y[0], params)
    rstd = torch.empty(rows, dtype=torch.float32, device=y.device)
    args = (inputs["x"], inputs["residual"], inputs["weight"], y[0], y[1], rstd, cols)
    launches = [(_add_rmsnorm_fused_saving, (rows,), args, {"ONE_TILE": cols <= tile})]
    return _pass(launches, tile, opts, {"h": y[0], "rstd": rstd, "weight": inputs["weight"]})


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One pass over h and dy writing dx, dresidual and the partials; then the partials' reduction."""
    h, dy = saved["h"], inputs["dy"]
    rows, cols, tile = _shape(h, params)
    partials, per = _partials(rows, cols, h)
    main = (h, saved["rstd"], saved["weight"], dy[0], dy[1], grads["dx"], grads["dresidual"], partials)
    launches = [
        (_fused_backward, (partials.shape[0],), (*main, rows, cols, per), {"ONE_TILE": cols <= tile}),
        (_reduce_partials, (cdiv(cols, tile),), (partials, grads["dweight"], partials.shape[0], cols), {}),
    ]
    return _pass(launches, tile, opts)


def unfused_forward(inputs: dict[str, Any], y: torch.Tensor, params: dict, opts: dict) -> Pass:
    """The forward's unfused walk; h, ms and ĥ (written by it anyway) and γ kept."""
    rows, cols, tile = _shape(y[0], params)
    env = dict(inputs) | {"h": y[0], "y": y[1]}
    steps = list(
        walk(
            STEPS,
            env,
            stats=ROW_STATS,
            matrix=lambda: y.new_empty((rows, cols)),
            stat=lambda: torch.empty(rows, dtype=torch.float32, device=y.device),
        )
    )
    add = (_residual_add, (rows, cdiv(cols, tile)), (env["x"], env["residual"], env["h"], cols), {})
    norm = [step_launch(st.op, env, st.reads, st.writes, rows, cols, tile) for st in steps[1:]]
    saved = {"h": y[0], "ms": env["ms"], "hhat": env["hhat"], "weight": inputs["weight"]}
    return _pass([add, *norm], tile, opts, saved)


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """dĥ = dy[1]·γ; dweight's partials of dy[1]·ĥ and their reduction; dms per row; dx = dresidual = dy[0] +
    dĥ·r + dms·2h/cols."""
    h, hhat, ms, weight, dy = saved["h"], saved["hhat"], saved["ms"], saved["weight"], inputs["dy"]
    rows, cols, tile = _shape(h, params)
    dhhat, dms = torch.empty_like(h), torch.empty(rows, dtype=torch.float32, device=h.device)
    partials, per = _partials(rows, cols, h)
    chunks = (rows, cdiv(cols, tile))
    launches = [
        (_affine, chunks, (dy[1], weight, weight, dhhat, cols), {"OP": CODES["scale"]}),
        (_weight_partials, (partials.shape[0], cdiv(cols, tile)), (dy[1], hhat, partials, rows, cols, per), {}),
        (_reduce_partials, (cdiv(cols, tile),), (partials, grads["dweight"], partials.shape[0], cols), {}),
        (_statistic_grad, (rows,), (dhhat, h, ms, dms, cols), {}),
        (_h_grad, chunks, (dy[0], dhhat, h, ms, dms, grads["dx"], grads["dresidual"], cols), {}),
    ]
    return _pass(launches, tile, opts)


training(
    "add_rmsnorm",
    backend="triton",
    device="cuda",
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
