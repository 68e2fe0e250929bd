"""Triton kernels of the normalization training step: the forward that also writes the row statistics, the
fused backward row pass with its float32 partial rows, their sum, and the unfused backward's step templates.

Same conventions as the forward (`backends.triton.normalization`): float32 arithmetic, loads converted from the
case's dtype and stores converted back, 64-bit row offsets, ONE_TILE a constexpr so that a row held in one
block of TILE columns and a wider row walked twice are separate specialisations.

The fused backward runs one program per block of rows (`scenarios.normalization.backward_decomposition.
partials`): a GPU has no atomics-free way to sum dweight over every row in one kernel, so each program keeps the
sum over its own rows as one float32 partial row (and one for dbias) and `_sum_partials`, a second small
kernel over blocks of columns, adds the partial rows up — the partials' bytes are in the ledger. A row that fits
the tile keeps its partial in registers and stores it once; a wider row adds into the program's own partial
row in memory chunk by chunk (no other program touches it, so no atomics).
"""

from __future__ import annotations

import triton
import triton.language as tl

from scenarios.normalization import EPS

EPS_: tl.constexpr = tl.constexpr(EPS)


@triton.jit
def _scalar(value: tl.constexpr, TILE: tl.constexpr):
    """A float32 scalar tensor holding `value`: a loop-carried variable must not start as a Python float."""
    return tl.max(tl.full([TILE], value, tl.float32), axis=0)


# Fused ------------------------------------------------------------------------------------------------------------


@triton.jit
def _norm_forward_saving(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, cols,
                         CENTRED: tl.constexpr, TILE: tl.constexpr, ONE_TILE: tl.constexpr):  # fmt: skip
    """layernorm (CENTRED) or rmsnorm forward, as the forward's fused kernel, that also stores the row's float32
    rstd (and mean) for the backward. Chan's merge of block means and M2 for a wide layernorm row."""
    r = tl.program_id(0)
    row = tl.cast(r, tl.int64) * cols
    offs = tl.arange(0, TILE)
    if ONE_TILE:
        mask = offs < cols
        v = tl.load(x_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        if CENTRED:
            mean = tl.sum(v, axis=0) / cols
            v = tl.where(mask, v - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / cols + EPS_)
        out = v * rstd * tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if CENTRED:
            out += tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(mean_ptr + r, mean)
        tl.store(rstd_ptr + r, rstd)
        tl.store(y_ptr + row + offs, out.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        mean, m2, count = _scalar(0.0, TILE), _scalar(0.0, TILE), _scalar(0.0, TILE)
        for start in range(0, cols, TILE):
            mask = start + offs < cols
            v = tl.load(x_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            if CENTRED:  # Chan et al.: merge each block's mean and M2
                n = tl.minimum(cols - start, TILE).to(tl.float32)
                mean_c = tl.sum(v, axis=0) / n
                d = tl.where(mask, v - mean_c, 0.0)
                total = count + n
                delta = mean_c - mean
                mean = mean + delta * (n / total)
                m2 = m2 + tl.sum(d * d, axis=0) + delta * delta * (count * n / total)
                count = total
            else:
                m2 = m2 + tl.sum(v * v, axis=0)
        rstd = 1.0 / tl.sqrt(m2 / cols + EPS_)
        tl.store(rstd_ptr + r, rstd)
        if CENTRED:
            tl.store(mean_ptr + r, mean)
        for start in range(0, cols, TILE):  # the re-read
            mask = start + offs < cols
            v = tl.load(x_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            out = (v - mean) * rstd * tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            if CENTRED:
                out += tl.load(b_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + row + start + offs, out.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _norm_backward_rows(x_ptr, dy_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, pw_ptr, pb_ptr, rows, cols, per,
                        CENTRED: tl.constexpr, TILE: tl.constexpr, ONE_TILE: tl.constexpr):  # fmt: skip
    """One block of `per` rows: x̂ recomputed from x and the saved statistics, g = dy·w, the row's sums of g
    and g·x̂, dx = rstd·(g − Σg/n − x̂·Σg·x̂/n); dy·x̂ (and dy) added into the block's float32 partial row.
    A row of one tile is held in registers between the sums and dx; a wider one is read again for dx."""
    b = tl.program_id(0)
    first = b * per
    last = tl.minimum(rows, first + per)
    part = tl.cast(b, tl.int64) * cols
    offs = tl.arange(0, TILE)
    if ONE_TILE:
        mask = offs < cols
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        accw = tl.zeros([TILE], tl.float32)
        accb = tl.zeros([TILE], tl.float32)
        for r in range(first, last):
            row = tl.cast(r, tl.int64) * cols
            rs = tl.load(rstd_ptr + r)
            v = tl.load(x_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
            d = tl.load(dy_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
            if CENTRED:
                v = tl.where(mask, v - tl.load(mean_ptr + r), 0.0)
            h = v * rs
            g = d * w
            inner = g - h * (tl.sum(g * h, axis=0) / cols)
            if CENTRED:
                inner -= tl.sum(g, axis=0) / cols
                accb += d
            tl.store(dx_ptr + row + offs, (rs * inner).to(dx_ptr.dtype.element_ty), mask=mask)
            accw += d * h
        tl.store(pw_ptr + part + offs, accw, mask=mask)
        if CENTRED:
            tl.store(pb_ptr + part + offs, accb, mask=mask)
    else:
        for start in range(0, cols, TILE):
            mask = start + offs < cols
            tl.store(pw_ptr + part + start + offs, tl.zeros([TILE], tl.float32), mask=mask)
            if CENTRED:
                tl.store(pb_ptr + part + start + offs, tl.zeros([TILE], tl.float32), mask=mask)
        for r in range(first, last):
            row = tl.cast(r, tl.int64) * cols
            rs = tl.load(rstd_ptr + r)
            mu = 0.0
            if CENTRED:
                mu = tl.load(mean_ptr + r)
            s1 = tl.zeros([TILE], tl.float32)
            s2 = tl.zeros([TILE], tl.float32)
            for start in range(0, cols, TILE):
                mask = start + offs < cols
                v = tl.load(x_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
                d = tl.load(dy_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
                h = tl.where(mask, (v - mu) * rs, 0.0)
                g = d * w
                s1 += g
                s2 += g * h
                pw = tl.load(pw_ptr + part + start + offs, mask=mask, other=0.0)
                tl.store(pw_ptr + part + start + offs, pw + d * h, mask=mask)
                if CENTRED:
                    pb = tl.load(pb_ptr + part + start + offs, mask=mask, other=0.0)
                    tl.store(pb_ptr + part + start + offs, pb + d, mask=mask)
            a = tl.sum(s1, axis=0) / cols
            c = tl.sum(s2, axis=0) / cols
            for start in range(0, cols, TILE):  # the re-read
                mask = start + offs < cols
                v = tl.load(x_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
                d = tl.load(dy_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
                inner = d * w - (v - mu) * rs * c
                if CENTRED:
                    inner -= a
                tl.store(dx_ptr + row + start + offs, (rs * inner).to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _sum_partials(pw_ptr, pb_ptr, dw_ptr, db_ptr, blocks, cols, CENTRED: tl.constexpr, TILE: tl.constexpr):
    """dweight[j] = Σ_b pw[b, j] (and dbias from pb), in float32, for one block of TILE columns."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    accw = tl.zeros([TILE], tl.float32)
    accb = tl.zeros([TILE], tl.float32)
    for b in range(0, blocks):
        part = tl.cast(b, tl.int64) * cols
        accw += tl.load(pw_ptr + part + offs, mask=mask, other=0.0)
        if CENTRED:
            accb += tl.load(pb_ptr + part + offs, mask=mask, other=0.0)
    tl.store(dw_ptr + offs, accw.to(dw_ptr.dtype.element_ty), mask=mask)
    if CENTRED:
        tl.store(db_ptr + offs, accb.to(db_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_backward(y_ptr, dy_ptr, dx_ptr, cols, TILE: tl.constexpr, ONE_TILE: tl.constexpr):
    """dx = y·(dy − Σ dy·y) for one row: held in registers when it fits the tile, else y and dy read again."""
    row = tl.program_id(0).to(tl.int64) * cols
    offs = tl.arange(0, TILE)
    if ONE_TILE:
        mask = offs < cols
        y = tl.load(y_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.load(dy_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        s = tl.sum(y * d, axis=0)
        tl.store(dx_ptr + row + offs, (y * (d - s)).to(dx_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([TILE], tl.float32)
        for start in range(0, cols, TILE):
            mask = start + offs < cols
            y = tl.load(y_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            d = tl.load(dy_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            acc += y * d
        s = tl.sum(acc, axis=0)
        for start in range(0, cols, TILE):  # the re-read
            mask = start + offs < cols
            y = tl.load(y_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            d = tl.load(dy_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(dx_ptr + row + start + offs, (y * (d - s)).to(dx_ptr.dtype.element_ty), mask=mask)


# Unfused: one kernel per step of BACKWARD_DECOMPOSITIONS ---------------------------------------------------------


@triton.jit
def _column_sum(a_ptr, b_ptr, out_ptr, rows, cols, PAIR: tl.constexpr, TILE: tl.constexpr):
    """out[j] = Σ_rows a (or Σ_rows a·b with PAIR) for one block of TILE columns, down every row in float32."""
    offs = tl.program_id(0) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    acc = tl.zeros([TILE], tl.float32)
    for r in range(0, rows):
        row = tl.cast(r, tl.int64) * cols
        v = tl.load(a_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        if PAIR:
            v = v * tl.load(b_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
        acc += v
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _row_reduce(a_ptr, b_ptr, stat_ptr, cols, PAIR: tl.constexpr, MEAN: tl.constexpr, TILE: tl.constexpr):
    """stat[row] = sum (or mean with MEAN) of a (or of a·b with PAIR) over the row, in float32 lanes."""
    r = tl.program_id(0)
    row = tl.cast(r, tl.int64) * cols
    offs = tl.arange(0, TILE)
    acc = tl.zeros([TILE], tl.float32)
    for start in range(0, cols, TILE):
        mask = start + offs < cols
        v = tl.load(a_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
        if PAIR:
            v = v * tl.load(b_ptr + row + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += v
    result = tl.sum(acc, axis=0)
    if MEAN:
        result = result / cols
    tl.store(stat_ptr + r, result)


@triton.jit
def _product(a_ptr, b_ptr, out_ptr, cols, TILE: tl.constexpr):
    """out = a·b, one block of TILE columns of a row per program."""
    row = tl.program_id(0).to(tl.int64) * cols
    offs = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    v = tl.load(a_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    v = v * tl.load(b_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row + offs, v.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _norm_dx(g_ptr, h_ptr, stat_ptr, m1_ptr, m2_ptr, dx_ptr, cols, CENTRED: tl.constexpr, TILE: tl.constexpr):
    """dx = rstd·(dx̂ − m1 − x̂·m2) (CENTRED, layernorm) or rstd·(dx̂ − x̂·m2), rstd from the row's variance
    (mean square) as the forward's normalise computes it."""
    r = tl.program_id(0)
    row = tl.cast(r, tl.int64) * cols
    offs = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    rs = 1.0 / tl.sqrt(tl.load(stat_ptr + r) + EPS_)
    g = tl.load(g_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    h = tl.load(h_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    inner = g - h * tl.load(m2_ptr + r)
    if CENTRED:
        inner -= tl.load(m1_ptr + r)
    tl.store(dx_ptr + row + offs, (rs * inner).to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_dx(y_ptr, dy_ptr, s_ptr, dx_ptr, cols, TILE: tl.constexpr):
    """dx = y·(dy − s), s the row's sum of dy·y."""
    r = tl.program_id(0)
    row = tl.cast(r, tl.int64) * cols
    offs = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = offs < cols
    y = tl.load(y_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    d = tl.load(dy_ptr + row + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(dx_ptr + row + offs, (y * (d - tl.load(s_ptr + r))).to(dx_ptr.dtype.element_ty), mask=mask)
