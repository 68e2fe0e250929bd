"""swiglu: the ledger against hand counts (peak memory included), the tolerance, and the Numba CPU kernels across
its parallel chunks on awkward shapes."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.swiglu import SwiGLU, emulate
from suite.core import numerics, registry, targets
from suite.core.registry import KernelKey

R, C = 3, 5
N = R * C
SCN = SwiGLU()


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_ledger_matches_hand_count(dtype: str, s: int) -> None:
    lg = SCN.ledger({"rows": R, "cols": C}, dtype)
    hand = [("silu", N * s, N * s, 4 * N), ("product", 2 * N * s, N * s, N)]
    for variant in ("unfused", "eager"):
        assert [(k.name, k.bytes_read, k.bytes_written, k.flops) for k in lg[variant].kernels] == hand
        assert lg[variant].peak_bytes == 4 * N * s  # a, b, y and the temporary, alive together at the product
    for variant in ("fused", "compiled", "library"):
        (k,) = lg[variant].kernels
        assert (k.bytes_read, k.bytes_written, k.flops) == (2 * N * s, N * s, 5 * N)
        assert lg[variant].peak_bytes == 3 * N * s
        assert [(i.name, i.elements, i.itemsize) for i in lg[variant].removed] == [("s", N, s)]
        assert lg[variant].saved_bytes == 2 * N * s  # ΔQ: exactly the difference in bytes moved
    moved = {v: lg[v].bytes_read + lg[v].bytes_written for v in ("unfused", "fused")}
    assert moved["unfused"] - moved["fused"] == lg["fused"].saved_bytes and moved["unfused"] * 3 == moved["fused"] * 5


def test_tolerance_follows_dtype_not_shape() -> None:
    tols = {}
    for dtype in ("float32", "float16"):
        for cols in (64, 8192):
            params = {"rows": 4, "cols": cols}
            inputs = SCN.make_inputs(params, dtype, np.random.default_rng(5))
            assert np.count_nonzero(inputs["a"]) == inputs["a"].size  # never tested on zeros
            ref = SCN.reference(inputs, params)
            tols[dtype, cols] = SCN.tolerance(inputs, params, dtype, ref)
            assert tols[dtype, cols] >= 4 * numerics.rel_err(emulate(inputs, dtype), ref)
    assert tols["float16", 64] > 50 * tols["float32", 64]
    assert tols["float16", 8192] < 4 * tols["float16", 64]  # no reduction: the error does not grow with cols


def test_a_wrong_silu_fails_the_check() -> None:
    """silu(a)·b with sigmoid's sign flipped, or without the gate, is far outside the tolerance."""
    params = {"rows": 3, "cols": 100}
    inputs = SCN.make_inputs(params, "float16", np.random.default_rng(1))
    ref = SCN.reference(inputs, params)
    tol = SCN.tolerance(inputs, params, "float16", ref)
    a, b = inputs["a"].astype(np.float64), inputs["b"].astype(np.float64)
    for wrong in (a / (1 + np.exp(a)) * b, a * b):
        assert numerics.judge(wrong.astype(np.float16), ref, tol)[1]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize(("rows", "cols"), [(5, 4099), (1, 16385), (17, 31)])
def test_numba_cpu_awkward_shapes(variant: str, dtype: str, rows: int, cols: int) -> None:
    """Across parallel chunks of 16384 elements with a ragged last one, one element past a chunk, and tiny."""
    registry.discover()
    params = {"rows": rows, "cols": cols}
    inputs = SCN.make_inputs(params, dtype, np.random.default_rng(rows * cols))
    ref = SCN.reference(inputs, params)
    target = targets.TARGETS[("numba", "cpu")]
    out = target.empty(SCN.output_shape(params), dtype)
    target.poison(out)
    registry.REGISTRY.get(KernelKey("swiglu", "numba", variant, "cpu"))(inputs, out, params, {})()
    _err, problem = numerics.judge(out, ref, SCN.tolerance(inputs, params, dtype, ref))
    assert problem == "", problem
