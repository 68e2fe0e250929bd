"""The tile code both Numba CPU attention variants share: loads into float32 scratch, and two micro-kernels.

Scratch tiles are float32 and padded to whole vectors, so that the micro-kernels never take a ragged edge:
the query tile transposed and pre-scaled (qt[d, i], its padding columns zero), a K tile as stored (kt[j, d]),
a V tile (vt[j, d], padded with zero columns to a multiple of 16) and key-major scores st[j, i]. Loads convert
with `VECTOR_CODECS`, so that with F16C a half tile is converted eight elements at a time.

Both tile products are register-blocked: 4 rows × 16 columns of the output (eight ymm accumulators, enough
independent FMAs to cover their latency) stay in registers while the reduction runs, each step one splat of
an element of one operand and two vector loads of the other. Every output element is still summed in the
reduction's order, one fused multiply-add per term, as the scalar loops before them did: no reassociation.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

from numba.extending import register_jitable

from backends.numba.on_cpu.attention_simd import LANES, vfma, vload, vmax, vsplat_at, vstore, vzero
from backends.numba.ops import VECTOR_CODECS

ROWS, COLS = 4, 16
"""The micro-kernels' register block: output rows × output columns (two vectors of eight)."""


@register_jitable
def padded(n: int, to: int) -> int:
    """n rounded up to a multiple of `to`: the extent of a scratch axis the micro-kernels sweep whole."""
    return (n + to - 1) // to * to


@register_jitable
def qk_tile(kt: Any, qt: Any, st: Any, cols: int, rows: int, head_dim: int) -> None:
    """st[j, i] = Σ_d kt[j, d]·qt[d, i] for j < cols, i < rows, each rounded up to the register block."""
    for j in range(0, padded(cols, ROWS), ROWS):
        for i in range(0, padded(rows, COLS), COLS):
            c00, c01, c10, c11 = vzero(), vzero(), vzero(), vzero()
            c20, c21, c30, c31 = vzero(), vzero(), vzero(), vzero()
            for d in range(head_dim):
                b0, b1 = vload(qt, d, i), vload(qt, d, i + 8)
                a = vsplat_at(kt, j, d)
                c00, c01 = vfma(a, b0, c00), vfma(a, b1, c01)
                a = vsplat_at(kt, j + 1, d)
                c10, c11 = vfma(a, b0, c10), vfma(a, b1, c11)
                a = vsplat_at(kt, j + 2, d)
                c20, c21 = vfma(a, b0, c20), vfma(a, b1, c21)
                a = vsplat_at(kt, j + 3, d)
                c30, c31 = vfma(a, b0, c30), vfma(a, b1, c31)
            vstore(st, j, i, c00), vstore(st, j, i + 8, c01), vstore(st, j + 1, i, c10), vstore(st, j + 1, i + 8, c11)
            vstore(st, j + 2, i, c20), vstore(st, j + 2, i + 8, c21), vstore(st, j + 3, i, c30)
            vstore(st, j + 3, i + 8, c31)


@register_jitable
def pv_tile(pt: Any, vt: Any, acc: Any, rows: int, cols: int, head_dim: int) -> None:
    """acc[i, :] += Σ_j pt[j, i]·vt[j, :] for i < rows (rounded up to 4), keys j < cols summed in order."""
    for i in range(0, padded(rows, ROWS), ROWS):
        for d in range(0, padded(head_dim, COLS), COLS):
            c00, c01, c10, c11 = vload(acc, i, d), vload(acc, i, d + 8), vload(acc, i + 1, d), vload(acc, i + 1, d + 8)
            c20, c21, c30, c31 = (
                vload(acc, i + 2, d),
                vload(acc, i + 2, d + 8),
                vload(acc, i + 3, d),
                vload(acc, i + 3, d + 8),
            )
            for j in range(cols):
                b0, b1 = vload(vt, j, d), vload(vt, j, d + 8)
                a = vsplat_at(pt, j, i)
                c00, c01 = vfma(a, b0, c00), vfma(a, b1, c01)
                a = vsplat_at(pt, j, i + 1)
                c10, c11 = vfma(a, b0, c10), vfma(a, b1, c11)
                a = vsplat_at(pt, j, i + 2)
                c20, c21 = vfma(a, b0, c20), vfma(a, b1, c21)
                a = vsplat_at(pt, j, i + 3)
                c30, c31 = vfma(a, b0, c30), vfma(a, b1, c31)
            (
                vstore(acc, i, d, c00),
                vstore(acc, i, d + 8, c01),
                vstore(acc, i + 1, d, c10),
                vstore(acc, i + 1, d + 8, c11),
            )
            vstore(acc, i + 2, d, c20), vstore(acc, i + 2, d + 8, c21), vstore(acc, i + 3, d, c30)
            vstore(acc, i + 3, d + 8, c31)


@register_jitable
def tile_max(st: Any, m: Any, top: Any, cols: int, rows: int) -> None:
    """top[i] = max(m[i], max_j st[j, i]) for i < rows rounded up to a vector, eight queries per register
    (the loop vectoriser keeps top in memory here, or not vectorised at all); m and top hold whole vectors."""
    m2, top2 = m.reshape(1, m.size), top.reshape(1, top.size)
    for i in range(0, padded(rows, LANES), LANES):
        t = vload(m2, 0, i)
        for j in range(cols):
            t = vmax(t, vload(st, j, i))
        vstore(top2, 0, i, t)


@functools.cache
def loaders(dtype: str) -> SimpleNamespace:
    """Tile loads from arrays stored as `dtype` into float32 scratch: Q transposed and pre-scaled, K and V."""
    load = VECTOR_CODECS[dtype][0]

    @register_jitable
    def load_qt(q, bh, q0, rows, head_dim, scale, qt):  # type: ignore[no-untyped-def]
        for i in range(rows):
            for d in range(head_dim):
                qt[d, i] = load(q[bh, q0 + i, d]) * scale

    @register_jitable
    def load_rows(x, bh, n0, cols, head_dim, xt):  # type: ignore[no-untyped-def]
        """xt[j, :head_dim] = x[bh, n0 + j, :] for j < cols: a K or V tile."""
        for j in range(cols):
            for d in range(head_dim):
                xt[j, d] = load(x[bh, n0 + j, d])

    return SimpleNamespace(load_qt=load_qt, load_rows=load_rows)
