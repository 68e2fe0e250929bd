"""The attention entries record every kernel they launch, and each compiles for sm_90 with registers to report.

Built in this session's emulation (Triton interpreter, Numba simulator, CuPy through NVRTC); Triton and Numba
kernels compile in the `suite.gpu.aot` helper. Each test uses its own disk cache, so it measures a compile.
"""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.attention import Attention
from suite.gpu import resources
from tests.support import missing

pytestmark = pytest.mark.usefixtures("fresh_resource_cache")

SCN = Attention()
PARAMS = Attention.checks[0]  # causal, seq_len 19: no tile divides it
KERNELS = {"fused": 1, "unfused": 3}
NEEDS = {"triton": ("triton", "torch"), "cupy": ("cupy",), "numba": ("numba_cuda",)}


@pytest.mark.compile
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", ["triton", "cupy", "numba"])
def test_attention_entries_record_every_kernel(backend: str, variant: str) -> None:
    if missing(*NEEDS[backend]):
        pytest.skip(missing(*NEEDS[backend]))
    from suite.core import targets
    from suite.core.registry import REGISTRY, KernelKey, discover

    discover()
    target = targets.TARGETS[(backend, "cuda")]
    entry = REGISTRY.get(KernelKey("attention", backend, variant, "cuda"))
    data = SCN.make_inputs(PARAMS, "float32", np.random.default_rng(0))
    inputs = {name: target.asarray(array) for name, array in data.items()}
    out = target.empty(SCN.shape(PARAMS), "float32")
    with resources.recording() as specs:
        entry(inputs, out, PARAMS, {"stream": None})
    assert len(specs) == KERNELS[variant], specs
    summary = resources.for_row(specs)
    assert "errors" not in summary, summary["errors"]
    assert len(summary["kernels"]) == KERNELS[variant]
    for k in summary["kernels"]:
        assert k["launches"] == 1 and k["backend"] == backend, k
        assert 0 < k["regs"] <= 255 and 0 < k["occupancy"] <= 1.0, k
    assert summary["regs"] == max(k["regs"] for k in summary["kernels"])
    # every attention kernel stages tiles in shared memory; Numba declares it at PTX module scope
    if backend != "triton" or variant == "fused":
        assert summary["smem_bytes"] > 0, summary
