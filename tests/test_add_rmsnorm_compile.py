"""add_rmsnorm's GPU kernels compile for sm_90 (H100/H200) without a GPU, in registers.

Triton's compiler and Numba's PTX compiler cannot run where TRITON_INTERPRET / NUMBA_ENABLE_CUDASIM are set, so
they run in one subprocess without them, as tests/test_normalization_compile.py does: the Triton kernels at the
launcher's num_warps, in float32, float16 and bfloat16, their PTX assembled by ptxas; Numba's to PTX. CuPy's
sources go through NVRTC here (Numba and CuPy have no bfloat16 path). None may spill: the fused kernel holds a
row of h (8192 columns, the M preset's widest) or walks a wider one in chunks.
"""

from __future__ import annotations

import json

import pytest

from suite.gpu.ptxas import parse_ptxas
from tests.support import json_lines, missing, nvrtc_reason, nvrtc_resources, run_without_emulation

SCRIPT = """
import json
from backends.triton import add_rmsnorm as ta
from backends.triton.normalization import num_warps
from tests.sm90 import aligned, compile_sm90

def build(fn, dtype, const):
    pointers = [a for a in fn.arg_names if a.endswith("_ptr")]
    signature = {a: f"*{dtype}" for a in pointers} | {"cols": "i32"} | {c: "constexpr" for c in const}
    return compile_sm90(fn, signature, const, {"num_warps": num_warps(const["TILE"], {})},
                        aligned(range(len(pointers))))

for dtype in ("fp32", "fp16", "bf16"):
    for tile, one in ((8192, True), (4096, False)):
        k, log = build(ta._add_rmsnorm_fused, dtype, {"TILE": tile, "ONE_TILE": one})
        print(json.dumps({"kernel": f"fused {dtype} tile={tile}", "ptx": k.asm["ptx"], "ptxas": log}))
for dtype in ("fp16", "bf16"):
    k, log = build(ta._residual_add, dtype, {"TILE": 4096})
    print(json.dumps({"kernel": f"residual add {dtype}", "ptx": k.asm["ptx"], "ptxas": log}))

from backends.numba.compile import compile_kernels
from backends.numba.on_cuda import add_rmsnorm as na
for dtype in ("float32", "float16"):
    for variant, params in (("fused", {"cols": 8192, "tile": 4096}), ("unfused", {"cols": 781, "tile": 4096})):
        for name, ptx in compile_kernels(na.kernel_sources(variant, params, dtype)).items():
            print(json.dumps({"numba": f"{variant} {name} {dtype}", "ptx": ptx}))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch", "numba_cuda")), reason=missing("triton", "torch", "numba_cuda"))
def test_triton_and_numba_kernels_compile_for_sm90() -> None:
    proc = run_without_emulation(SCRIPT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json_lines(proc.stdout)
    triton_rows = [r for r in rows if "kernel" in r]
    numba_rows = [r for r in rows if "numba" in r]
    assert len(triton_rows) == 3 * 2 + 2 and len(numba_rows) == 2 * (1 + 4), [r.get("numba") for r in numba_rows]
    for row in triton_rows:
        assert ".target sm_90" in row["ptx"], row["kernel"]
        (resources,) = parse_ptxas(row["ptxas"]).values()
        assert resources.registers > 0 and resources.spill_bytes == 0, f"{row['kernel']}: {resources}"
    for row in numba_rows:
        assert ".target sm_90" in row["ptx"] and ".visible .entry" in row["ptx"], row["numba"]
        if row["numba"].startswith("fused") and row["numba"].endswith("float16"):
            assert "cvt.f32.f16" in row["ptx"] and "cvt.rn.f16.f32" in row["ptx"], row["numba"]
    assert "shfl" not in json.dumps([r["ptx"] for r in numba_rows])  # shared-memory reductions: simulator-safe


@pytest.mark.compile
@pytest.mark.skipif(bool(nvrtc_reason()), reason=nvrtc_reason())
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cupy_kernels_compile_for_sm90_without_spills(dtype: str) -> None:
    from backends.cupy.add_rmsnorm_kernels import add_source, fused_source
    from backends.cupy.build import compile_sm90
    from backends.cupy.normalization import geometry

    sources = [add_source(dtype, 4096, 512)]
    for cols, tile in ((193, 64), (4096, 4096), (8192, 8192), (65536, 16384)):
        sources.append(fused_source(dtype, *geometry(cols, {"tile": tile}, {})))
    sources.append(fused_source(dtype, 16384, 1024))  # the widest chunk at the most threads a block has
    for source in sources:
        kernel = compile_sm90(*source)
        r = nvrtc_resources(kernel)
        assert kernel.cubin and r.registers > 0, kernel.log
        assert r.spill_bytes == 0 and r.stack_bytes == 0, f"{kernel.name}: {kernel.log}"
