"""add_rmsnorm: the ledger against hand counts (peak memory included), both outputs checked, the tolerance's
dependence on dtype and row length, and the Numba CPU kernels on rows wider than the tile."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.add_rmsnorm import AddRMSNorm, emulate_add_rmsnorm
from suite.core import numerics, registry, targets
from suite.core.registry import KernelKey

R, C = 3, 5
N = R * C
SCN = AddRMSNorm()


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_unfused_ledger_matches_hand_count(dtype: str, s: int) -> None:
    lg = SCN.ledger({"rows": R, "cols": C, "tile": 64}, dtype)
    hand = [
        ("residual add", 2 * N * s, N * s, N),
        ("row mean square", N * s, 4 * R, 2 * N),
        ("normalise", N * s + 4 * R, N * s, N + 3 * R),
        ("scale", N * s + C * s, N * s, N),
    ]
    for variant in ("unfused", "eager"):
        assert [(k.name, k.bytes_read, k.bytes_written, k.flops) for k in lg[variant].kernels] == hand
    # inputs x, residual (N·s each), weight (C·s) and outputs h, y (N·s each) throughout; at the normalise step
    # the statistic (4·R) and the normalised matrix (N·s) are alive together
    held = 4 * N * s + C * s
    assert lg["unfused"].peak_bytes == lg["eager"].peak_bytes == held + 4 * R + N * s


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_fused_ledger_reads_once_within_the_tile_and_twice_beyond(dtype: str, s: int) -> None:
    fits = SCN.ledger({"rows": R, "cols": C, "tile": 64}, dtype)
    wide = SCN.ledger({"rows": R, "cols": C, "tile": 4}, dtype)
    held = 4 * N * s + C * s
    for lg, reread in ((fits, 0), (wide, 2 * N * s)):  # beyond the tile x and residual are read again
        (k,) = lg["fused"].kernels
        assert (k.bytes_read, k.bytes_written, k.reread_bytes) == (2 * N * s + C * s + reread, 2 * N * s, reread)
        assert lg["fused"].peak_bytes == lg["compiled"].peak_bytes == held
        assert lg["fused"].flops == lg["unfused"].flops == 5 * N + 3 * R
    removed = {i.name: (i.elements, i.itemsize) for i in fits["fused"].removed}
    assert removed == {"ms": (R, 4), "hhat": (N, s)}
    assert fits["fused"].saved_bytes == 2 * N * s + 2 * R * 4
    # unfused moves 8·N·s + C·s + 8·R, fused 4·N·s + C·s: the two re-reads of h go too, beyond ΔQ
    unfused = fits["unfused"].bytes_read + fits["unfused"].bytes_written
    fused = fits["fused"].bytes_read + fits["fused"].bytes_written
    assert (unfused, fused) == (8 * N * s + C * s + 8 * R, 4 * N * s + C * s)
    # the library: torch's add, then rms_norm reading h; its rms_norm result is a fresh tensor copied into y
    assert [k.name for k in fits["library"].kernels] == ["residual add", "rms_norm (library)"]
    assert fits["library"].bytes_read == 3 * N * s + C * s and fits["library"].peak_bytes == held + N * s


def test_output_stacks_h_and_y_and_the_check_sees_both() -> None:
    params = {"rows": 5, "cols": 96, "tile": 64}
    inputs = SCN.make_inputs(params, "float32", np.random.default_rng(7))
    ref = SCN.reference(inputs, params)
    assert ref.shape == SCN.output_shape(params) == (2, 5, 96)
    np.testing.assert_allclose(ref[0], inputs["x"].astype(np.float64) + inputs["residual"])
    tol = SCN.tolerance(inputs, params, "float32", ref)
    for half in (0, 1):  # a wrong h or a wrong y alone fails the one relative error over both
        bad = ref.copy()
        bad[half, 2, 7] *= 1.01
        assert numerics.judge(bad, ref, tol)[1]
    assert not numerics.judge(ref, ref, tol)[1]
    # h and y have the same order of magnitude: the error floor (1e-3 of the largest value) is as fine for both
    assert 0.3 < np.abs(ref[1]).max() / np.abs(ref[0]).max() < 3


def test_tolerance_follows_dtype_and_row_length() -> None:
    tols = {}
    for dtype in ("float32", "float16"):
        for cols in (64, 16384):
            params = {"rows": 4, "cols": cols, "tile": 16384}
            inputs = SCN.make_inputs(params, dtype, np.random.default_rng(3))
            ref = SCN.reference(inputs, params)
            own = numerics.rel_err(emulate_add_rmsnorm(inputs, dtype), ref)
            tols[dtype, cols] = SCN.tolerance(inputs, params, dtype, ref)
            assert tols[dtype, cols] >= 4 * own or tols[dtype, cols] == 0.05
    assert tols["float16", 64] > 10 * tols["float32", 64]
    assert tols["float32", 16384] >= tols["float32", 64]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize(("rows", "cols", "tile"), [(17, 1000, 256), (2, 4097, 4096), (9, 33, 64)])
def test_numba_cpu_awkward_rows(variant: str, dtype: str, rows: int, cols: int, tile: int) -> None:
    """Rows past the tile (ragged last chunk), one column past it, and rows within one tile, all odd counts."""
    registry.discover()
    params = {"rows": rows, "cols": cols, "tile": tile}
    inputs = SCN.make_inputs(params, dtype, np.random.default_rng(rows * cols))
    ref = SCN.reference(inputs, params)
    target = targets.TARGETS[("numba", "cpu")]
    out = target.empty(SCN.output_shape(params), dtype)
    target.poison(out)
    registry.REGISTRY.get(KernelKey("add_rmsnorm", "numba", variant, "cpu"))(inputs, out, params, {})()
    _err, problem = numerics.judge(out, ref, SCN.tolerance(inputs, params, dtype, ref))
    assert problem == "", problem
