"""Numba elementwise-chain kernels, CPU and CUDA targets, against the scenario's float64 reference.

Each run writes into a NaN-poisoned output, so an element a kernel skips fails the check. The CUDA target runs
in the simulator where there is no GPU (tests/conftest.py sets NUMBA_ENABLE_CUDASIM=1 before any import).
"""

from __future__ import annotations

import numpy as np
import pytest

from backends.numba.on_cpu import elementwise_chain as _cpu  # noqa: F401 - importing registers targets and kernels
from backends.numba.on_cuda import elementwise_chain as _cuda  # noqa: F401
from backends.numba.ops import OPS
from scenarios.elementwise_chain import ALL8, ElementwiseChain
from scenarios.elementwise_chain import OPS as SCENARIO_OPS
from suite.core.numerics import judge
from suite.core.registry import REGISTRY, KernelKey
from suite.core.targets import TARGETS

SCENARIO = ElementwiseChain()


def _target_param(device: str) -> object:
    availability = TARGETS[("numba", device)].probe()
    return pytest.param(device, marks=pytest.mark.skipif(not availability.runs, reason=availability.reason))


def _run(device: str, variant: str, params: dict, dtype: str, opts: dict | None = None) -> tuple[np.ndarray, dict]:
    target = TARGETS[("numba", device)]
    inputs = SCENARIO.make_inputs(params, dtype, np.random.default_rng(params["n"]))
    out = target.empty(SCENARIO.output_shape(params), dtype)
    target.poison(out)
    entry = REGISTRY.get(KernelKey("elementwise_chain", "numba", variant, device))
    launch = entry({k: target.asarray(v) for k, v in inputs.items()}, out, params, opts or {})
    launch()
    target.synchronize()
    return target.to_host(out), inputs


@pytest.mark.parametrize("device", [_target_param("cpu"), _target_param("cuda")])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("n", [1, 1000, 4099])
@pytest.mark.parametrize("ops", [["scale", "gelu"], ALL8, ["relu"]], ids=["scale-gelu", "all8", "relu"])
def test_matches_reference(device: str, variant: str, dtype: str, n: int, ops: list[str]) -> None:
    params = {"n": n, "ops": ops}
    out, inputs = _run(device, variant, params, dtype, {"block": 128})
    ref = SCENARIO.reference(inputs, params)
    _, reason = judge(out, ref, SCENARIO.tolerance(inputs, params, dtype, ref))
    assert not reason, reason
    assert out.dtype == np.dtype(dtype)


@pytest.mark.parametrize("device", [_target_param("cpu"), _target_param("cuda")])
def test_launchers_of_one_chain_stay_independent(device: str) -> None:
    """Entries share a kernel per chain; building a small case must not change how a big one launches."""
    target, params = TARGETS[("numba", device)], {"n": 4099, "ops": ["scale", "gelu"]}
    entry = REGISTRY.get(KernelKey("elementwise_chain", "numba", "fused", device))
    inputs = SCENARIO.make_inputs(params, "float32", np.random.default_rng(0))
    big = target.empty((4099,), "float32")
    target.poison(big)
    launch_big = entry({"x": target.asarray(inputs["x"])}, big, params, {"block": 128})
    small = target.empty((1,), "float32")
    entry({"x": target.asarray(inputs["x"][:1])}, small, {**params, "n": 1}, {"block": 128})()
    launch_big()
    target.synchronize()
    assert not np.isnan(target.to_host(big)).any()


def test_cpu_fused_equals_unfused_in_float32() -> None:
    """In float32 storing an intermediate loses nothing, so the variants, differing only in fusion, agree bitwise."""
    params = {"n": 4099, "ops": ALL8 + ALL8}
    fused, _ = _run("cpu", "fused", params, "float32")
    unfused, _ = _run("cpu", "unfused", params, "float32")
    np.testing.assert_array_equal(fused.view(np.uint32), unfused.view(np.uint32))


def test_ops_match_the_scenario() -> None:
    assert list(OPS) == list(SCENARIO_OPS)
    assert {k.variant for k in REGISTRY.keys(scenario="elementwise_chain", backend="numba")} == {"fused", "unfused"}
    assert {k.device for k in REGISTRY.keys(scenario="elementwise_chain", backend="numba")} == {"cpu", "cuda"}
