"""Triton elementwise-chain kernels against the scenario's float64 reference, in the interpreter.

The numerics hold the kernels to the scenario's own tolerance on NaN-poisoned outputs, with sizes that leave a
partial block (4099) and a single element; tanh, written by hand on `exp`, is also checked far outside the
scenario's input range, where a naive form overflows.
"""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.elementwise_chain import ALL8
from suite.core.numerics import judge, rel_err
from suite.core.registry import REGISTRY, KernelKey, discover
from suite.core.scenario import get

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from backends.triton import TARGET  # noqa: E402 - after the skips: the backend needs torch and triton

discover()
pytestmark = [
    pytest.mark.emulated,
    pytest.mark.skipif(not TARGET.probe().runs, reason=f"triton: {TARGET.probe().reason}"),
]

SCENARIO = get("elementwise_chain")


def run(variant: str, x: np.ndarray, ops: list[str], opts: dict | None = None) -> np.ndarray:
    entry = REGISTRY.get(KernelKey("elementwise_chain", "triton", variant, "cuda"))
    assert entry is not None, f"triton/{variant} is not registered"
    out = TARGET.empty(x.shape, x.dtype.name)
    TARGET.poison(out)
    launch = entry({"x": TARGET.asarray(x)}, out, {"n": x.size, "ops": ops}, opts or {})
    launch()
    TARGET.synchronize()
    return TARGET.to_host(out)


@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("ops", [["scale", "gelu"], ALL8], ids=["scale-gelu", "all8"])
@pytest.mark.parametrize("n", [1, 1000, 4099])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_matches_reference(variant: str, ops: list[str], n: int, dtype: str) -> None:
    params = {"n": n, "ops": ops}
    inputs = SCENARIO.make_inputs(params, dtype, np.random.default_rng(n))
    ref = SCENARIO.reference(inputs, params)
    out = run(variant, inputs["x"], ops)
    assert out.dtype == np.dtype(dtype)
    _, reason = judge(out, ref, SCENARIO.tolerance(inputs, params, dtype, ref))
    assert not reason, f"{variant} {ops} n={n} {dtype}: {reason}"


@pytest.mark.parametrize("variant", ["fused", "unfused"])
def test_options_and_each_op_alone(variant: str) -> None:
    """Small blocks (many programs), and every op once as a one-op chain."""
    x = np.random.default_rng(0).uniform(-3, 3, 777).astype("float32")
    for op in ALL8:
        params = {"n": x.size, "ops": [op]}
        ref = SCENARIO.reference({"x": x}, params)
        out = run(variant, x, [op], {"block": 128, "num_warps": 2, "unknown": 1})
        _, reason = judge(out, ref, SCENARIO.tolerance({"x": x}, params, "float32", ref))
        assert not reason, f"{op}: {reason}"


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # v² of the unselected branch
def test_tanh_accuracy_and_no_overflow() -> None:
    mag = np.concatenate([np.geomspace(1e-30, 1e3, 20000), np.linspace(0.5, 0.6, 1001), [1e30, 3e38]])
    x = np.concatenate([mag, -mag, [0.0]]).astype("float32")
    out = run("fused", x, ["tanh"])
    assert np.isfinite(out).all()
    assert rel_err(out, np.tanh(x.astype(np.float64))) < 1e-6
