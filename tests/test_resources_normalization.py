"""The normalization entries record every kernel they launch, and each compiles for sm_90 with registers to report.

Built in this session's emulation (Triton interpreter, Numba simulator, CuPy through NVRTC); Triton and Numba
kernels compile in the `suite.gpu.aot` helper. Each test uses its own disk cache, so it measures a compile.
"""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.normalization import DECOMPOSITIONS, LayerNorm, Softmax
from suite.gpu import resources
from tests.support import missing

pytestmark = pytest.mark.usefixtures("fresh_resource_cache")

SCENARIOS = {"layernorm": LayerNorm(), "softmax": Softmax()}
PARAMS = LayerNorm.checks[0]  # one row of one column: the narrowest launch
NEEDS = {"triton": ("triton", "torch"), "cupy": ("cupy",), "numba": ("numba_cuda",)}


@pytest.mark.compile
@pytest.mark.parametrize("op", ["layernorm", "softmax"])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", ["triton", "cupy", "numba"])
def test_normalization_entries_record_every_kernel(backend: str, variant: str, op: str) -> None:
    if missing(*NEEDS[backend]):
        pytest.skip(missing(*NEEDS[backend]))
    from suite.core import targets
    from suite.core.registry import REGISTRY, KernelKey, discover

    discover()
    scn = SCENARIOS[op]
    expected = 1 if variant == "fused" else len(DECOMPOSITIONS[op])
    target = targets.TARGETS[(backend, "cuda")]
    entry = REGISTRY.get(KernelKey(op, backend, variant, "cuda"))
    data = scn.make_inputs(PARAMS, "float32", np.random.default_rng(0))
    inputs = {name: target.asarray(array) for name, array in data.items()}
    out = target.empty((PARAMS["rows"], PARAMS["cols"]), "float32")
    with resources.recording() as specs:
        entry(inputs, out, PARAMS, {"stream": None})
    assert len(specs) == expected, specs
    summary = resources.for_row(specs)
    assert "errors" not in summary, summary["errors"]
    assert sum(k["launches"] for k in summary["kernels"]) == expected, summary["kernels"]
    for k in summary["kernels"]:
        assert k["backend"] == backend, k
        assert 0 < k["regs"] <= 255 and 0 < k["occupancy"] <= 1.0, k
    assert summary["regs"] == max(k["regs"] for k in summary["kernels"])
