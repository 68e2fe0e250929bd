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
