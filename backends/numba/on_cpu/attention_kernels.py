"""The Numba CPU attention kernels: a flash-style fused kernel, and scores, softmax and P·V kernels.

Kernel factories apart from the entries that prepare and launch them (`backends.numba.on_cpu.attention`, whose
docstring describes the design) and the tile code they share (`attention_tiles`), each built once per storage dtype
(float16 as uint16 bits). K and V hold batch·kv_heads heads: task bh (batch b, query head h) reads K/V head bh // g
= b·kv_heads + h // g, g = heads/kv_heads, in place. Score tiles are key-major, st[j, i] for key j and query i, and
so are the unfused S and P (stored as Sᵀ, Pᵀ): the softmax's max and sum then run across queries, element by
element, instead of along a row, where a float reduction cannot be vectorised without reassociating it.

`_exp` is a vectorisable float32 exp (Cody–Waite reduction and the Cephes polynomial, error under 2 ulp):
libm's expf is a call per element and would dominate both variants. It is not backends.numba.ops.exp_float32,
which keeps a NaN a NaN: here a NaN argument can only be −inf − (−inf), a running max and a tile max both
still fully masked, whose weight must be 0.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.on_cpu.attention_tiles import ROWS, loaders, padded, tile_code
from backends.numba.ops import VECTOR_CODECS, _float_from_bits

F32 = np.float32
ZERO, ONE, NEG_INF = F32(0.0), F32(1.0), F32(-np.inf)
FASTMATH = {"contract"}
"""Fused multiply-add only: sums are never reassociated, so results do not depend on vector width."""

LOG2E, LN2_HI, LN2_LO = F32(1.4426950408889634), F32(0.693359375), F32(-2.12194440e-4)
ROUND = F32(12582912.0)
"""1.5·2²³: adding and subtracting it rounds a float32 of magnitude < 2²² to the nearest integer."""
EXP_MIN = F32(-87.0)
"""Below this exp(x) is under the smallest normal float32 and is returned as 0 (masked scores are -inf)."""
EXP_POLY = tuple(
    F32(c)
    for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
)
P0, P1, P2, P3, P4, P5 = EXP_POLY


@register_jitable
def _exp(x: float) -> float:
    """exp(x) for float32 x ≤ 0 (softmax arguments), branch-free so that loops over it vectorise."""
    xc = max(x, EXP_MIN)
    n = (xc * LOG2E + ROUND) - ROUND
    r = (xc - n * LN2_HI) - n * LN2_LO
    p = ((((P0 * r + P1) * r + P2) * r + P3) * r + P4) * r + P5
    y = (p * r * r + r + ONE) * _float_from_bits(np.int32((np.int32(n) + 127) << 23))
    return y if x >= EXP_MIN else ZERO


@register_jitable
def _max(a: float, b: float) -> float:
    """max as a select, which vectorises (Numba's builtin max branches on NaN)."""
    return b if b > a else a


@register_jitable
def _first_row(key: int, q0: int, causal: bool) -> int:
    """The first row of the query tile starting at q0 that sees `key`: 0, or key - q0 under the causal mask."""
    return max(0, key - q0) if causal else 0


@register_jitable
def _tile_of(task: int, tiles: int) -> int:
    """The query tile of task `task` (tasks run head by head): the tiles of a head taken first, last, second,
    second to last..., so that under the causal mask any run of consecutive tasks, one thread's share of the
    parallel loop, holds about as many long key extents as short ones."""
    t = task % tiles
    return t // 2 if t % 2 == 0 else tiles - 1 - t // 2


@functools.cache
def kernels(dtype: str, lanes: int) -> SimpleNamespace:
    """The four kernels (flash, scores, softmax, pv) for arrays stored as `dtype`, their tile products on
    vectors of `lanes` float32, built once per dtype and width."""
    t = tile_code(lanes)
    return SimpleNamespace(
        flash=_flash(dtype, t), scores=_scores(dtype, t), softmax=_softmax(dtype), pv=_pv(dtype, t), lanes=lanes
    )


def _flash(dtype: str, t: SimpleNamespace) -> Any:
    """The fused kernel: per query tile, K and V streamed through in tiles, online softmax, nothing L×L stored."""
    store = VECTOR_CODECS[dtype][1]
    ld = loaders(dtype)
    load_qt, load_rows = ld.load_qt, ld.load_rows
    qk_tile, pv_tile, tile_max, COLS = t.qk_tile, t.pv_tile, t.tile_max, t.cols

    @njit(parallel=True, fastmath=FASTMATH)
    def flash(q, k, v, out, causal, block_m, block_n, scale):  # type: ignore[no-untyped-def]
        heads, seq_len, head_dim = q.shape
        group = heads // k.shape[0]  # query heads per K/V head
        tiles, bm, bn, dp = (
            (seq_len + block_m - 1) // block_m,
            padded(block_m, COLS),
            padded(block_n, ROWS),
            padded(head_dim, COLS),
        )
        for task in prange(heads * tiles):
            bh, q0 = task // tiles, _tile_of(task, tiles) * block_m
            rows = min(block_m, seq_len - q0)
            qt, st = np.zeros((head_dim, bm), F32), np.empty((bn, bm), F32)
            kt, vt, acc = np.zeros((bn, head_dim), F32), np.zeros((bn, dp), F32), np.zeros((bm, dp), F32)
            m, den = np.full(bm, NEG_INF, F32), np.zeros(block_m, F32)  # running max and sum per query
            top, alpha, total = np.empty(bm, F32), np.empty(block_m, F32), np.empty(block_m, F32)
            load_qt(q, bh, q0, rows, head_dim, scale, qt)
            end = min(seq_len, q0 + rows) if causal else seq_len
            for n0 in range(0, end, block_n):
                cols = min(block_n, end - n0)
                load_rows(k, bh // group, n0, cols, head_dim, kt)
                load_rows(v, bh // group, n0, cols, head_dim, vt)
                qk_tile(kt, qt, st, cols, rows, head_dim)
                if causal and n0 + cols > q0 + 1:  # a tile on the diagonal: hide the scores of later keys
                    for j in range(cols):
                        st[j, : min(_first_row(n0 + j, q0, causal), rows)] = NEG_INF
                tile_max(st, m, top, cols, rows)
                for i in range(rows):  # every query sees key 0 in the first tile, so top is finite
                    alpha[i], total[i] = _exp(m[i] - top[i]), ZERO
                for j in range(cols):
                    for i in range(rows):
                        st[j, i] = _exp(st[j, i] - top[i])
                        total[i] += st[j, i]
                for i in range(rows):  # online softmax: rescale what was summed under the old maximum
                    m[i], den[i] = top[i], den[i] * alpha[i] + total[i]
                    for d in range(head_dim):
                        acc[i, d] *= alpha[i]
                pv_tile(st, vt, acc, rows, cols, head_dim)
            for i in range(rows):
                inv = ONE / den[i]
                for d in range(head_dim):
                    out[bh, q0 + i, d] = store(acc[i, d] * inv)

    return flash


def _scores(dtype: str, t: SimpleNamespace) -> Any:
    """Unfused Sᵀ = (Q·Kᵀ·scale)ᵀ; masked scores are not stored: the softmax and P·V never read them."""
    store = VECTOR_CODECS[dtype][1]
    ld = loaders(dtype)
    load_qt, load_rows = ld.load_qt, ld.load_rows
    qk_tile, COLS = t.qk_tile, t.cols

    @njit(parallel=True, fastmath=FASTMATH)
    def scores(q, k, s_t, causal, block_m, block_n, scale):  # type: ignore[no-untyped-def]
        heads, seq_len, head_dim = q.shape
        group = heads // k.shape[0]  # query heads per K/V head
        tiles, bm, bn = (seq_len + block_m - 1) // block_m, padded(block_m, COLS), padded(block_n, ROWS)
        for task in prange(heads * tiles):
            bh, q0 = task // tiles, _tile_of(task, tiles) * block_m
            rows = min(block_m, seq_len - q0)
            qt, st, kt = np.zeros((head_dim, bm), F32), np.empty((bn, bm), F32), np.zeros((bn, head_dim), F32)
            load_qt(q, bh, q0, rows, head_dim, scale, qt)
            end = min(seq_len, q0 + rows) if causal else seq_len
            for n0 in range(0, end, block_n):
                cols = min(block_n, end - n0)
                load_rows(k, bh // group, n0, cols, head_dim, kt)
                qk_tile(kt, qt, st, cols, rows, head_dim)
                for j in range(cols):  # masked scores are not stored: the softmax and P·V never read them
                    lo = min(_first_row(n0 + j, q0, causal), rows)
                    dst, src = s_t[bh, n0 + j, q0 + lo : q0 + rows], st[j, lo:rows]
                    for i in range(dst.size):
                        dst[i] = store(src[i])

    return scores


def _softmax(dtype: str) -> Any:
    """Unfused Pᵀ from Sᵀ, a query tile at a time: its scores read once, then max, exponentials and sum."""
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def softmax(s_t, p_t, causal, block_m):  # type: ignore[no-untyped-def]
        heads, seq_len, _ = s_t.shape
        tiles = (seq_len + block_m - 1) // block_m
        for task in prange(heads * tiles):
            bh, q0 = task // tiles, _tile_of(task, tiles) * block_m
            rows = min(block_m, seq_len - q0)
            end = min(seq_len, q0 + rows) if causal else seq_len
            e = np.empty((end, block_m), F32)  # the tile's scores, then exponentials: read from S once
            top, total = np.full(block_m, NEG_INF, F32), np.zeros(block_m, F32)
            for j in range(end):
                lo = min(_first_row(j, q0, causal), rows)
                src, ej, tj = s_t[bh, j, q0 + lo : q0 + rows], e[j, lo:rows], top[lo:rows]
                for i in range(ej.size):
                    ej[i] = load(src[i])
                    tj[i] = _max(tj[i], ej[i])
            for j in range(end):
                lo = min(_first_row(j, q0, causal), rows)
                ej, tj, sj = e[j, lo:rows], top[lo:rows], total[lo:rows]
                for i in range(ej.size):
                    ej[i] = _exp(ej[i] - tj[i])
                    sj[i] += ej[i]
            for i in range(rows):
                total[i] = ONE / total[i]
            for j in range(end):
                lo = min(_first_row(j, q0, causal), rows)
                dst, ej, sj = p_t[bh, j, q0 + lo : q0 + rows], e[j, lo:rows], total[lo:rows]
                for i in range(dst.size):
                    dst[i] = store(ej[i] * sj[i])

    return softmax


def _pv(dtype: str, t: SimpleNamespace) -> Any:
    """Unfused O = P·V from Pᵀ, a query tile at a time, V streamed through in tiles."""
    load, store = VECTOR_CODECS[dtype]
    load_rows = loaders(dtype).load_rows
    pv_tile, COLS = t.pv_tile, t.cols

    @njit(parallel=True, fastmath=FASTMATH)
    def pv(p_t, v, out, causal, block_m, block_n):  # type: ignore[no-untyped-def]
        heads, seq_len, head_dim = out.shape
        group = heads // v.shape[0]  # query heads per K/V head
        tiles, bm, bn, dp = (
            (seq_len + block_m - 1) // block_m,
            padded(block_m, COLS),
            padded(block_n, ROWS),
            padded(head_dim, COLS),
        )
        for task in prange(heads * tiles):
            bh, q0 = task // tiles, _tile_of(task, tiles) * block_m
            rows = min(block_m, seq_len - q0)
            pt, vt, acc = np.zeros((bn, bm), F32), np.zeros((bn, dp), F32), np.zeros((bm, dp), F32)
            end = min(seq_len, q0 + rows) if causal else seq_len
            for n0 in range(0, end, block_n):
                cols = min(block_n, end - n0)
                load_rows(v, bh // group, n0, cols, head_dim, vt)
                for j in range(cols):  # masked probabilities are zero, never read
                    lo = min(_first_row(n0 + j, q0, causal), rows)
                    pt[j, :lo] = ZERO
                    src, dst = p_t[bh, n0 + j, q0 + lo : q0 + rows], pt[j, lo:rows]
                    for i in range(dst.size):
                        dst[i] = load(src[i])
                pv_tile(pt, vt, acc, rows, cols, head_dim)
            for i in range(rows):
                o, a = out[bh, q0 + i], acc[i]
                for d in range(head_dim):
                    o[d] = store(a[d])

    return pv
