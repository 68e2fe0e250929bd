"""The error metric and the tolerances: catch wrong, unwritten and NaN outputs; pass correct ones."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.elementwise_chain import ALL8, ElementwiseChain
from suite.core.numerics import judge, rel_err

RNG_SEED = 1234


def test_identical_is_zero_and_scaled_error_is_seen():
    ref = np.random.default_rng(RNG_SEED).uniform(1, 2, 100)
    assert rel_err(ref.astype(np.float32), ref) < 1e-7
    assert rel_err(ref * (1 + 1e-3), ref) == pytest.approx(1e-3, rel=1e-6)


def test_nan_and_unwritten_are_infinite_error():
    ref = np.random.default_rng(RNG_SEED).uniform(1, 2, 100)
    out = ref.copy()
    out[37] = np.nan
    err, reason = judge(out, ref, 1e-3)
    assert err == np.inf and "1 of 100 elements unwritten" in reason


def test_floor_keeps_cancellation_from_dominating():
    ref = np.array([1.0, 1e-9])
    assert rel_err(np.array([1.0, 2e-9]), ref) < 1e-5  # judged against the result's scale
    assert rel_err(np.array([1.0, 0.5]), ref) > 0.1


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("ops", [["scale", "gelu"], ALL8, ["square"] * 3])
def test_tolerance_passes_the_storage_precision_chain_and_catches_a_wrong_op(dtype, ops):
    chain = ElementwiseChain()
    params = {"n": 4099, "ops": ops}
    inputs = chain.make_inputs(params, dtype, np.random.default_rng(RNG_SEED))
    assert np.count_nonzero(inputs["x"] == 0) == 0
    ref = chain.reference(inputs, params)
    tol = chain.tolerance(inputs, params, dtype, ref)
    fused_like = chain.reference(inputs, params).astype(dtype)  # one rounding at the end: what fusion does
    assert judge(fused_like, ref, tol)[1] == ""
    wrong = chain.reference(inputs, {**params, "ops": [*ops[:-1], "relu" if ops[-1] != "relu" else "tanh"]})
    assert judge(wrong.astype(dtype), ref, tol)[1] != ""


def test_one_tolerance_helper_holds_every_family_within_its_limits():
    """bfloat16's limits default to float16's in its units (8×); a derived error is clipped, NaN stays NaN; every
    registered family's limits cover every dtype with floor <= ceiling (Tolerance refuses anything else)."""
    from suite.core import scenario
    from suite.core.tolerances import FLOOR, Tolerance, per_dtype

    assert FLOOR == {"float32": 1e-5, "float16": 2e-3, "bfloat16": 0.016}
    limits = Tolerance(per_dtype(1e-5, 1e-3, bfloat16=0.016), per_dtype(1e-3, 2e-2))
    assert limits.ceiling["bfloat16"] == 0.16 and limits.clip("bfloat16", 0.0) == 0.016
    assert limits.clip("float16", 5e-3) == 5e-3 and limits.clip("float32", np.inf) == 1e-3
    assert np.isnan(limits.clip("float32", np.nan)) and Tolerance(ceiling=4.0).ceiling["float16"] == 4.0
    with pytest.raises(ValueError, match="exceeds its ceiling"):
        Tolerance(ceiling=1e-6)
    with pytest.raises(ValueError, match="a limit for each of"):
        Tolerance({"float32": 1e-5})
    for scn in scenario.discover().values():
        assert isinstance(scn.limits, Tolerance)
