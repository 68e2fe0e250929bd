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


SIMULATED_ONLY = {("decoder_layer", "numba"): {("fused", "float16")}}
"""Composed families whose every case in the Numba CUDA simulator would cost CI minutes (a case of the layer: two
launches of nine ops, each thread of each a Python thread, 13 to 17 s), and the (variant, dtype) cases run there:
one runs what the composition adds on Numba CUDA (the tiled GEMM, the swap copies, views of device arrays, in
half precision); every op's kernel in each variant and dtype is its own family's case here, and which kernels a
layer variant picks is checked on the host and in Triton's interpreter, where every variant runs."""


def _simulated_only(key: KernelKey, dtype: str, avail: targets.Availability) -> str:
    """Why this case is left to another (`SIMULATED_ONLY`), or ''."""
    kept = SIMULATED_ONLY.get((key.scenario, key.backend))
    if kept is None or avail.mode != targets.EMULATED or (key.variant, dtype) in kept:
        return ""
    shown = ", ".join(f"{v} {d}" for v, d in sorted(kept))
    return f"the simulator runs {key.scenario} {shown} only (SIMULATED_ONLY: a case costs CI some 15 s)"


def _params(key: KernelKey) -> list:
    out = []
    target = targets.TARGETS.get((key.backend, key.device))
    avail = target.probe() if target else targets.Availability(targets.UNAVAILABLE, "no target")
    for params in scenarios.SCENARIOS[key.scenario].checks:
        for dtype in scenarios.SCENARIOS[key.scenario].dtypes:
            refused = target.dtype_refusal(dtype) if target else ""
            left = _simulated_only(key, dtype, avail)
            marks = [pytest.mark.skipif(avail.mode == targets.UNAVAILABLE, reason=avail.reason),
                     pytest.mark.skipif(bool(refused), reason=refused),
                     pytest.mark.skipif(bool(left), reason=left)]  # fmt: skip
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


def test_every_scenario_has_fused_and_unfused_in_every_backend() -> None:
    for name, scn in scenarios.SCENARIOS.items():
        if not type(scn).__module__.startswith("scenarios."):
            continue  # a test fake
        for backend, device in [("numba", "cpu"), ("numba", "cuda"), ("triton", "cuda"), ("cupy", "cuda")]:
            for variant in ("fused", "unfused"):
                key = KernelKey(name, backend, variant, device)
                assert registry.REGISTRY.get(key) is not None or backend in registry.REGISTRY.load_errors, key
