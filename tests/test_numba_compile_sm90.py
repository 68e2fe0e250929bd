"""The Numba CUDA kernels compile to PTX for sm_90 (H100/H200) on a machine without a GPU.

The simulator, which the test session runs under, has no compiler, and `NUMBA_ENABLE_CUDASIM` is read once
when `numba.cuda` is first imported, so the compile runs in a subprocess whose environment has it removed.
"""

from __future__ import annotations

import json

import pytest

from tests.support import missing, run_without_emulation

SCRIPT = """
import json, sys
from backends.numba.on_cuda import elementwise_chain
from backends.numba.compile import compile_kernels
from scenarios.elementwise_chain import ALL8

variant, dtype = sys.argv[1], sys.argv[2]
kernels = elementwise_chain.kernel_sources(variant, {"n": 4099, "ops": ALL8}, dtype)
print(json.dumps(compile_kernels(kernels)))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("numba_cuda")), reason=missing("numba_cuda"))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
def test_compiles_for_sm90(variant: str, dtype: str) -> None:
    proc = run_without_emulation(SCRIPT, variant, dtype, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ptx = json.loads(proc.stdout.splitlines()[-1])

    assert len(ptx) == (1 if variant == "fused" else 8), sorted(ptx)
    for name, code in ptx.items():
        assert ".target sm_90" in code, f"{name}: no sm_90 target"
        assert ".visible .entry" in code, f"{name}: no kernel entry point"
        if dtype == "float16":  # loads widen to float32, stores round back
            assert "cvt.f32.f16" in code and "cvt.rn.f16.f32" in code, f"{name}: no float16 conversions"
