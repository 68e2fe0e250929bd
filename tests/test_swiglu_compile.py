"""swiglu's GPU kernels compile for sm_90 (H100/H200) without a GPU: Triton's every mode through ptxas (float32,
float16 and bfloat16), Numba's to PTX (one subprocess without the emulation switches, as
tests/test_normalization_compile.py), CuPy's through NVRTC (neither has a bfloat16 path). None may spill; an
elementwise kernel holding a few values a thread has no excuse to."""

from __future__ import annotations

import pytest

from suite.gpu.ptxas import parse_ptxas
from tests.support import json_lines, missing, nvrtc_reason, nvrtc_resources, run_without_emulation

SCRIPT = """
import json
from backends.triton import swiglu as ts
from tests.sm90 import aligned, compile_sm90

for dtype in ("fp32", "fp16", "bf16"):
    for mode in (ts.FUSED, ts.SILU, ts.MUL):
        signature = {"p_ptr": f"*{dtype}", "q_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "n": "i32",
                     "MODE": "constexpr", "BLOCK": "constexpr"}
        k, log = compile_sm90(ts._swiglu, signature, {"MODE": mode, "BLOCK": 1024}, {"num_warps": 4}, aligned(range(3)))
        print(json.dumps({"kernel": f"mode {mode} {dtype}", "ptx": k.asm["ptx"], "ptxas": log}))

from backends.numba.compile import compile_kernels
from backends.numba.on_cuda import swiglu as ns
for dtype in ("float32", "float16"):
    for variant in ("fused", "unfused"):
        for name, ptx in compile_kernels(ns.kernel_sources(variant, {}, dtype)).items():
            print(json.dumps({"numba": f"{name} {dtype}", "ptx": ptx}))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch", "numba_cuda")), reason=missing("triton", "torch", "numba_cuda"))
def test_triton_and_numba_kernels_compile_for_sm90() -> None:
    proc = run_without_emulation(SCRIPT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json_lines(proc.stdout)
    triton_rows, numba_rows = [r for r in rows if "kernel" in r], [r for r in rows if "numba" in r]
    assert len(triton_rows) == 3 * 3 and len(numba_rows) == 6
    for row in triton_rows:
        assert ".target sm_90" in row["ptx"], row["kernel"]
        (resources,) = parse_ptxas(row["ptxas"]).values()
        assert resources.registers > 0 and resources.spill_bytes == 0, f"{row['kernel']}: {resources}"
    for row in numba_rows:
        assert ".target sm_90" in row["ptx"] and ".visible .entry" in row["ptx"], row["numba"]
        if row["numba"].endswith("float16"):
            assert "cvt.f32.f16" in row["ptx"] and "cvt.rn.f16.f32" in row["ptx"], row["numba"]


@pytest.mark.compile
@pytest.mark.skipif(bool(nvrtc_reason()), reason=nvrtc_reason())
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cupy_kernels_compile_for_sm90_without_spills(dtype: str) -> None:
    from backends.cupy.build import compile_sm90
    from backends.cupy.swiglu import EXPRS, source

    for mode in EXPRS:
        kernel = compile_sm90(*source(mode, dtype))
        r = nvrtc_resources(kernel)
        assert kernel.cubin and r.registers > 0, kernel.log
        assert r.spill_bytes == 0 and r.stack_bytes == 0, f"{kernel.name}: {kernel.log}"
