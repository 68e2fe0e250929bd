"""Every registered kernel against the float64 reference on awkward shapes, into NaN-poisoned outputs.

Parametrized from the registry, so a new kernel is tested the moment it is registered. Without a GPU, CUDA
kernels run in the Triton interpreter and the Numba CUDA simulator; CuPy kernels are compiled for sm_90 only.
"""

from __future__ import annotations

import numpy as np
import pytest

from suite.core import numerics, registry, targets
from suite.core import scenario as scenarios
from suite.core.registry import KernelKey

registry.discover()
scenarios.discover()

SEED = 20261129


def _params(key: KernelKey) -> list:
    out = []
    target = targets.TARGETS.get((key.backend, key.device))
    avail = target.probe() if target else targets.Availability(targets.UNAVAILABLE, "no target")
    for params in scenarios.SCENARIOS[key.scenario].checks:
        for dtype in scenarios.SCENARIOS[key.scenario].dtypes:
            refused = target.dtype_refusal(dtype) if target else ""
            marks = [pytest.mark.skipif(avail.mode == targets.UNAVAILABLE, reason=avail.reason),
                     pytest.mark.skipif(bool(refused), reason=refused)]  # fmt: skip
            ident = f"{key.scenario}-{key.backend}-{key.device}-{key.variant}-{dtype}-{params}"
            out.append(pytest.param(key, params, dtype, marks=marks, id=ident))
    return out


CASES = [
    p for key in registry.REGISTRY.keys(phase="forward") if key.scenario in scenarios.SCENARIOS for p in _params(key)
]
"""Forward passes; a family's backward and train entries are tested by tests/test_<family>_backward.py."""


@pytest.mark.parametrize(("key", "params", "dtype"), CASES)
def test_kernel_matches_reference(key: KernelKey, params: dict, dtype: str) -> None:
    scn = scenarios.SCENARIOS[key.scenario]
    target = targets.TARGETS[(key.backend, key.device)]
    inputs = scn.make_inputs(params, dtype, np.random.default_rng(SEED))
    ref = scn.reference(inputs, params)
    tol = scn.tolerance(inputs, params, dtype, ref)
    out = target.empty(scn.output_shape(params), dtype)
    target.poison(out)
    opts = {"stream": None, "block": 128}
    try:
        launch = registry.REGISTRY.get(key)({k: target.asarray(v) for k, v in inputs.items()}, out, params, opts)
    except registry.Unsupported as exc:
        pytest.skip(f"unsupported: {exc}")
    if target.probe().mode == targets.COMPILE:
        with pytest.raises(targets.NotRunnable, match="sm_90"):
            launch()
        return
    launch()
    target.synchronize()
    host = np.asarray(target.to_host(out))
    assert host.dtype == np.dtype(dtype) and host.shape == ref.shape
    _err, problem = numerics.judge(host, ref, tol)
    assert problem == "", f"{key} {dtype} {params}: {problem}"
    launch()  # a second launch into the same buffers gives the same answer (no state left behind)
    target.synchronize()
    assert numerics.rel_err(np.asarray(target.to_host(out)), host) == 0.0


CPU_FIRST = {"decoder_layer": "composed on Numba CPU first: its CUDA backends come with their GPU checks"}
"""Families not yet on every backend, and why: each is held to the Numba CPU target alone until it leaves this."""


def test_every_scenario_has_fused_and_unfused_in_every_backend() -> None:
    for name, scn in scenarios.SCENARIOS.items():
        if not type(scn).__module__.startswith("scenarios."):
            continue  # a test fake
        for backend, device in [("numba", "cpu"), ("numba", "cuda"), ("triton", "cuda"), ("cupy", "cuda")]:
            if name in CPU_FIRST and device != "cpu":
                continue
            for variant in ("fused", "unfused"):
                key = KernelKey(name, backend, variant, device)
                assert registry.REGISTRY.get(key) is not None or backend in registry.REGISTRY.load_errors, key
