"""The Numba CPU attention micro-kernels against float64 products, on tiles whose used extent is ragged.

The kernels of test_attention and test_kernels exercise them end to end; these tests pin each tile product and
the tile max on its own, so that a wrong register block (a lane or a row off) shows up as itself, and check
that the padding beyond the used extent is not written where it must not be.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from backends.numba.on_cpu.attention_tiles import pv_tile, qk_tile, tile_max

SEED = 20260517
F32_TOL = 1e-5
"""float32 products of 64 terms summed in order: a relative error of a few 1e-7 per term at worst."""


@njit
def _qk(kt, qt, st, cols, rows, head_dim):  # type: ignore[no-untyped-def]
    qk_tile(kt, qt, st, cols, rows, head_dim)


@njit
def _pv(pt, vt, acc, rows, cols, head_dim):  # type: ignore[no-untyped-def]
    pv_tile(pt, vt, acc, rows, cols, head_dim)


@njit
def _max(st, m, top, cols, rows):  # type: ignore[no-untyped-def]
    tile_max(st, m, top, cols, rows)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize(("cols", "rows", "head_dim"), [(64, 64, 64), (13, 37, 24), (1, 1, 1)])
def test_qk_tile_is_the_product(cols: int, rows: int, head_dim: int) -> None:
    rng = np.random.default_rng(SEED)
    kt = rng.standard_normal((64, head_dim)).astype(np.float32)
    qt = np.zeros((head_dim, 64), np.float32)
    qt[:, :rows] = rng.standard_normal((head_dim, rows))
    st = np.full((64, 64), np.nan, np.float32)
    _qk(kt, qt, st, cols, rows, head_dim)
    ref = kt[:cols].astype(np.float64) @ qt[:, :rows].astype(np.float64)
    assert _rel(st[:cols, :rows], ref) < F32_TOL
    assert np.isnan(st[-(-cols // 4) * 4 :]).all()  # rows past the register block of the used keys: untouched


@pytest.mark.parametrize(("rows", "cols", "head_dim"), [(64, 64, 64), (37, 13, 24), (1, 1, 1)])
def test_pv_tile_accumulates_the_product(rows: int, cols: int, head_dim: int) -> None:
    rng = np.random.default_rng(SEED + 1)
    dp = -(-head_dim // 16) * 16
    pt = np.zeros((64, 64), np.float32)
    pt[:cols, :rows] = rng.random((cols, rows))
    vt = np.zeros((64, dp), np.float32)
    vt[:cols, :head_dim] = rng.standard_normal((cols, head_dim))
    acc = np.zeros((64, dp), np.float32)
    acc[:rows, :head_dim] = rng.standard_normal((rows, head_dim))
    ref = acc[:rows, :head_dim].astype(np.float64) + pt[:cols, :rows].T.astype(np.float64) @ vt[:cols, :head_dim]
    acc[-(-rows // 4) * 4 :] = np.nan
    _pv(pt, vt, acc, rows, cols, head_dim)
    assert _rel(acc[:rows, :head_dim], ref) < F32_TOL
    assert np.isnan(acc[-(-rows // 4) * 4 :]).all()


def test_tile_max_takes_the_running_max_per_query() -> None:
    rng = np.random.default_rng(SEED + 2)
    st = rng.standard_normal((64, 64)).astype(np.float32)
    st[3:, 5] = -np.inf  # a masked column keeps its earlier maximum
    m = rng.standard_normal(64).astype(np.float32) + 1.0
    top = np.full(64, np.nan, np.float32)
    _max(st, m, top, 20, 37)
    np.testing.assert_array_equal(top[:37], np.maximum(m, st[:20].max(axis=0))[:37])
    assert np.isnan(top[40:]).all()  # past the vector holding the last used query: untouched
