"""The Numba CPU attention micro-kernels against float64 products, on tiles whose used extent is ragged.

The kernels of test_attention and test_kernels exercise them end to end, at the host's vector width; these
tests pin each tile product and the tile max on its own at every width, so that a wrong register block (a lane
or a row off) shows up as itself, and check that the padding beyond the used extent is not written where it
must not be.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest
from numba import njit

from backends.numba.on_cpu.attention_simd import simd
from backends.numba.on_cpu.attention_tiles import tile_code
from backends.numba.on_cpu.vector_width import HOST_LANES, WIDTHS

SEED = 20260517
F32_TOL = 1e-5
"""float32 products of 64 terms summed in order: a relative error of a few 1e-7 per term at worst."""


@functools.cache
def _entries(lanes: int) -> SimpleNamespace:
    """The tile code of one vector width behind @njit entries (register_jitable code is not callable alone)."""
    t = tile_code(lanes)
    qk_tile, pv_tile, tile_max = t.qk_tile, t.pv_tile, t.tile_max

    @njit
    def qk(kt, qt, st, cols, rows, head_dim):  # type: ignore[no-untyped-def]
        qk_tile(kt, qt, st, cols, rows, head_dim)

    @njit
    def pv(pt, vt, acc, rows, cols, head_dim):  # type: ignore[no-untyped-def]
        pv_tile(pt, vt, acc, rows, cols, head_dim)

    @njit
    def top(st, m, top, cols, rows):  # type: ignore[no-untyped-def]
        tile_max(st, m, top, cols, rows)

    return SimpleNamespace(qk=qk, pv=pv, max=top, cols=t.cols)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("lanes", WIDTHS)
@pytest.mark.parametrize(("cols", "rows", "head_dim"), [(64, 64, 64), (13, 37, 24), (1, 1, 1)])
def test_qk_tile_is_the_product(cols: int, rows: int, head_dim: int, lanes: int) -> None:
    rng = np.random.default_rng(SEED)
    kt = rng.standard_normal((64, head_dim)).astype(np.float32)
    qt = np.zeros((head_dim, 64), np.float32)
    qt[:, :rows] = rng.standard_normal((head_dim, rows))
    st = np.full((64, 64), np.nan, np.float32)
    _entries(lanes).qk(kt, qt, st, cols, rows, head_dim)
    ref = kt[:cols].astype(np.float64) @ qt[:, :rows].astype(np.float64)
    assert _rel(st[:cols, :rows], ref) < F32_TOL
    assert np.isnan(st[-(-cols // 4) * 4 :]).all()  # rows past the register block of the used keys: untouched


@pytest.mark.parametrize("lanes", WIDTHS)
@pytest.mark.parametrize(("rows", "cols", "head_dim"), [(64, 64, 64), (37, 13, 24), (1, 1, 1)])
def test_pv_tile_accumulates_the_product(rows: int, cols: int, head_dim: int, lanes: int) -> None:
    rng = np.random.default_rng(SEED + 1)
    dp = -(-head_dim // (2 * lanes)) * 2 * lanes
    pt = np.zeros((64, 64), np.float32)
    pt[:cols, :rows] = rng.random((cols, rows))
    vt = np.zeros((64, dp), np.float32)
    vt[:cols, :head_dim] = rng.standard_normal((cols, head_dim))
    acc = np.zeros((64, dp), np.float32)
    acc[:rows, :head_dim] = rng.standard_normal((rows, head_dim))
    ref = acc[:rows, :head_dim].astype(np.float64) + pt[:cols, :rows].T.astype(np.float64) @ vt[:cols, :head_dim]
    acc[-(-rows // 4) * 4 :] = np.nan
    _entries(lanes).pv(pt, vt, acc, rows, cols, head_dim)
    assert _rel(acc[:rows, :head_dim], ref) < F32_TOL
    assert np.isnan(acc[-(-rows // 4) * 4 :]).all()


@pytest.mark.parametrize("lanes", WIDTHS)
def test_tile_max_takes_the_running_max_per_query(lanes: int) -> None:
    rng = np.random.default_rng(SEED + 2)
    st = rng.standard_normal((64, 64)).astype(np.float32)
    st[3:, 5] = -np.inf  # a masked column keeps its earlier maximum
    m = rng.standard_normal(64).astype(np.float32) + 1.0
    top = np.full(64, np.nan, np.float32)
    _entries(lanes).max(st, m, top, 20, 37)
    np.testing.assert_array_equal(top[:37], np.maximum(m, st[:20].max(axis=0))[:37])
    used = -(-37 // lanes) * lanes
    assert not np.isnan(top[:used]).any() and np.isnan(top[used:]).all()  # whole vectors written, no more


def test_widths_give_the_same_bits() -> None:
    """The width decides only how many outputs are summed side by side, never the order of a sum."""
    rng = np.random.default_rng(SEED + 3)
    kt, qt = rng.standard_normal((64, 40)).astype(np.float32), np.zeros((40, 64), np.float32)
    qt[:, :45] = rng.standard_normal((40, 45))
    found = []
    for lanes in WIDTHS:
        st = np.full((64, 64), np.nan, np.float32)
        _entries(lanes).qk(kt, qt, st, 61, 45, 40)
        found.append(st[:61, :45])
    for other in found[1:]:
        np.testing.assert_array_equal(other, found[0])


def test_host_width_and_unknown_widths() -> None:
    assert HOST_LANES in WIDTHS
    with pytest.raises(ValueError, match="attention vectors have 8 or 16 lanes, not 4"):
        simd(4)


@pytest.mark.parametrize("causal", [False, True])
def test_kernels_at_every_width_agree_bit_for_bit(causal: bool) -> None:
    """The fused and unfused kernels end to end, ragged tiles: each width writes every output, the same bits."""
    from backends.numba.on_cpu.attention_kernels import F32, kernels

    rng = np.random.default_rng(SEED + 4)
    q, k, v = (rng.standard_normal((2, 37, 24)).astype(np.float32) for _ in range(3))
    scale, found = F32(24**-0.5), {}
    for lanes in WIDTHS:
        ks = kernels("float32", lanes)
        fused, unfused = np.full_like(q, np.nan), np.full_like(q, np.nan)
        ks.flash(q, k, v, fused, causal, 16, 32, scale)
        s_t, p_t = np.full((2, 37, 37), np.nan, np.float32), np.full((2, 37, 37), np.nan, np.float32)
        ks.scores(q, k, s_t, causal, 16, 32, scale)
        ks.softmax(s_t, p_t, causal, 16)
        ks.pv(p_t, v, unfused, causal, 16, 32)
        assert not np.isnan(fused).any() and not np.isnan(unfused).any()
        found[lanes] = fused, unfused
    for lanes in WIDTHS[1:]:
        for a, b in zip(found[lanes], found[WIDTHS[0]], strict=True):
            np.testing.assert_array_equal(a, b)
