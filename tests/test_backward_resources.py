"""Every CUDA backward kernel is on record and compiles for sm_90, with registers and spills for its row.

Parametrized from the registry (each family's backward entry on Triton, CuPy and Numba CUDA), so a backward
kernel is held to it the moment it is registered. The entry is built as the runner builds it, inside a resource
recording, on the family's smallest check in float32: Triton in the interpreter, Numba CUDA in the simulator,
CuPy through NVRTC (its forward then refuses to run: the backward kernels are built and recorded first). What is
recorded must be the backward's own kernels, each compiled for sm_90 (Triton and Numba in the `suite.gpu.aot`
helper) with a register count and spill bytes; a kernel that spills is not a failure here, the report names it.
The tests share one disk cache, fresh for the module, so what they measure is a compile and each kernel pays once.
"""

from __future__ import annotations

import numpy as np
import pytest

from suite.core import phases, registry, targets
from suite.core import scenario as scenarios
from suite.core.registry import KernelKey
from suite.gpu import resources

registry.discover()
scenarios.discover()

KEYS = [
    key
    for key in registry.REGISTRY.keys(phase=phases.BACKWARD)
    if key.device == "cuda" and key.scenario in scenarios.SCENARIOS and key.backend in ("triton", "cupy", "numba")
]


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FUSEBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("backward-resources")))
        resources.clear_memory_cache()
        yield
    resources.clear_memory_cache()


def _ids(key: KernelKey) -> str:
    return f"{key.scenario}-{key.backend}-{key.variant}"


@pytest.mark.compile
@pytest.mark.parametrize("key", KEYS, ids=_ids)
def test_backward_kernels_compile_for_sm90(key: KernelKey, module_cache: None) -> None:
    target = targets.TARGETS[(key.backend, key.device)]
    avail = target.probe()
    if avail.mode == targets.UNAVAILABLE:
        pytest.skip(avail.reason)
    scn = phases.phased(scenarios.SCENARIOS[key.scenario], phases.BACKWARD)
    params = scn.checks[0]
    data = scn.make_inputs(params, "float32", np.random.default_rng(0))
    inputs = {name: target.asarray(np.array(a)) for name, a in data.items()}
    out = {name: target.empty(shape, "float32") for name, shape in scn.output_shape(params).items()}
    with resources.recording() as specs:
        try:
            registry.REGISTRY.get(key)(inputs, out, params, {"stream": None})
        except targets.NotRunnable:
            assert avail.mode == targets.COMPILE, f"{key}: refused to run in {avail.mode} mode"
    assert specs, f"{key}: no kernel on record"
    summary = resources.for_row(specs)
    assert "errors" not in summary, summary["errors"]
    for k in summary["kernels"]:
        assert k["backend"] == key.backend, k
        assert 0 < k["regs"] <= 255 and 0 < k["occupancy"] <= 1.0, k
        assert k["spill_store_bytes"] is not None and k["spill_load_bytes"] is not None, k


def test_every_family_with_a_backward_has_cuda_backward_kernels() -> None:
    """Each family with a backward pass has fused and unfused backward entries on all three CUDA backends."""
    trained = [name for name, scn in scenarios.SCENARIOS.items()
               if phases.phases_of(scn) != (phases.FORWARD,) and type(scn).__module__.startswith("scenarios.")]  # fmt: skip
    assert trained
    have = {(k.scenario, k.backend, k.variant) for k in KEYS}
    for name in trained:
        for backend in ("triton", "cupy", "numba"):
            for variant in ("fused", "unfused"):
                missing = backend in registry.REGISTRY.load_errors
                assert (name, backend, variant) in have or missing, (name, backend, variant)
