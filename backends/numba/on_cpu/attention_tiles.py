"""The tile code both Numba CPU attention variants share: loads into float32 scratch, and two micro-kernels.

Scratch tiles are float32 and padded to whole vectors, so that the micro-kernels never take a ragged edge:
the query tile transposed and pre-scaled (qt[d, i], its padding columns zero), a K tile as stored (kt[j, d]),
a V tile (vt[j, d], padded with zero columns to two vectors) and key-major scores st[j, i]. Loads convert
with `VECTOR_CODECS`, so that with F16C a half tile is converted eight elements at a time.

Both tile products are register-blocked: 4 rows × 2 vectors of columns of the output (eight accumulators,
enough independent FMAs to cover their latency) stay in registers while the reduction runs, each step one
splat of an element of one operand and two vector loads of the other. They are built per vector width
(`tile_code`): 16 columns on AVX2, 32 on AVX-512. Every output element is still summed in the
reduction's order, one fused multiply-add per term, as the scalar loops before them did: no reassociation.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

from numba.extending import register_jitable

from backends.numba.on_cpu.attention_simd import simd
from backends.numba.ops import VECTOR_CODECS

ROWS = 4
"""The micro-kernels' register block has this many output rows, by two vectors of output columns."""


@register_jitable
def padded(n: int, to: int) -> int:
    """n rounded up to a multiple of `to`: the extent of a scratch axis the micro-kernels sweep whole."""
    return (n + to - 1) // to * to


@functools.cache
def tile_code(lanes: int) -> SimpleNamespace:
    """The two tile products and the tile max on vectors of `lanes` float32, and `cols` (two vectors), the
    multiple of which the scratch tiles' column axes (queries of qt and st, head_dim of vt and acc) are padded to."""
    v = simd(lanes)
    vload, vstore, vsplat_at, vfma, vzero, vmax = v.vload, v.vstore, v.vsplat_at, v.vfma, v.vzero, v.vmax
    cols_ = 2 * lanes

    @register_jitable
    def qk_tile(kt, qt, st, cols, rows, head_dim):  # type: ignore[no-untyped-def]
        """st[j, i] = Σ_d kt[j, d]·qt[d, i] for j < cols, i < rows, each rounded up to the register block."""
        for j in range(0, padded(cols, ROWS), ROWS):
            for i in range(0, padded(rows, cols_), cols_):
                c00, c01, c10, c11 = vzero(), vzero(), vzero(), vzero()
                c20, c21, c30, c31 = vzero(), vzero(), vzero(), vzero()
                for d in range(head_dim):
                    b0, b1 = vload(qt, d, i), vload(qt, d, i + lanes)
                    a = vsplat_at(kt, j, d)
                    c00, c01 = vfma(a, b0, c00), vfma(a, b1, c01)
                    a = vsplat_at(kt, j + 1, d)
                    c10, c11 = vfma(a, b0, c10), vfma(a, b1, c11)
                    a = vsplat_at(kt, j + 2, d)
                    c20, c21 = vfma(a, b0, c20), vfma(a, b1, c21)
                    a = vsplat_at(kt, j + 3, d)
                    c30, c31 = vfma(a, b0, c30), vfma(a, b1, c31)
                vstore(st, j, i, c00), vstore(st, j, i + lanes, c01)
                vstore(st, j + 1, i, c10), vstore(st, j + 1, i + lanes, c11)
                vstore(st, j + 2, i, c20), vstore(st, j + 2, i + lanes, c21)
                vstore(st, j + 3, i, c30), vstore(st, j + 3, i + lanes, c31)

    @register_jitable
    def pv_tile(pt, vt, acc, rows, cols, head_dim):  # type: ignore[no-untyped-def]
        """acc[i, :] += Σ_j pt[j, i]·vt[j, :] for i < rows (rounded up to ROWS), keys j < cols summed in order."""
        for i in range(0, padded(rows, ROWS), ROWS):
            for d in range(0, padded(head_dim, cols_), cols_):
                c00, c01 = vload(acc, i, d), vload(acc, i, d + lanes)
                c10, c11 = vload(acc, i + 1, d), vload(acc, i + 1, d + lanes)
                c20, c21 = vload(acc, i + 2, d), vload(acc, i + 2, d + lanes)
                c30, c31 = vload(acc, i + 3, d), vload(acc, i + 3, d + lanes)
                for j in range(cols):
                    b0, b1 = vload(vt, j, d), vload(vt, j, d + lanes)
                    a = vsplat_at(pt, j, i)
                    c00, c01 = vfma(a, b0, c00), vfma(a, b1, c01)
                    a = vsplat_at(pt, j, i + 1)
                    c10, c11 = vfma(a, b0, c10), vfma(a, b1, c11)
                    a = vsplat_at(pt, j, i + 2)
                    c20, c21 = vfma(a, b0, c20), vfma(a, b1, c21)
                    a = vsplat_at(pt, j, i + 3)
                    c30, c31 = vfma(a, b0, c30), vfma(a, b1, c31)
                vstore(acc, i, d, c00), vstore(acc, i, d + lanes, c01)
                vstore(acc, i + 1, d, c10), vstore(acc, i + 1, d + lanes, c11)
                vstore(acc, i + 2, d, c20), vstore(acc, i + 2, d + lanes, c21)
                vstore(acc, i + 3, d, c30), vstore(acc, i + 3, d + lanes, c31)

    @register_jitable
    def tile_max(st, m, top, cols, rows):  # type: ignore[no-untyped-def]
        """top[i] = max(m[i], max_j st[j, i]) for i < rows rounded up to a vector, `lanes` queries per register
        (the loop vectoriser keeps top in memory here, or not vectorised at all); m and top hold whole vectors."""
        m2, top2 = m.reshape(1, m.size), top.reshape(1, top.size)
        for i in range(0, padded(rows, lanes), lanes):
            t = vload(m2, 0, i)
            for j in range(cols):
                t = vmax(t, vload(st, j, i))
            vstore(top2, 0, i, t)

    return SimpleNamespace(lanes=lanes, cols=cols_, qk_tile=qk_tile, pv_tile=pv_tile, tile_max=tile_max)


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
