"""Triton and CuPy elementwise-chain kernels compile for sm_90 without a GPU, and their CUDA math is right.

Triton's compiler cannot run where TRITON_INTERPRET=1 has turned `triton.jit` into the interpreter, so its
kernels are compiled in a subprocess without it. CuPy's sources go through NVRTC and must use registers and
never spill. The CUDA op code cannot run here, so it is also compiled for the host by a C++ compiler and
held to the scenario's tolerance: the constants and formulas are then checked, not just the syntax.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from scenarios.elementwise_chain import ALL8
from suite.core.numerics import judge
from suite.core.scenario import get
from suite.gpu.ptxas import parse_ptxas
from tests.support import json_lines, missing, nvrtc_reason, nvrtc_resources, run_without_emulation

CHAINS = [[op] for op in ALL8] + [ALL8, ALL8 + ALL8]
CHAIN_IDS = [*ALL8, "all8", "all8x2"]

TRITON_SCRIPT = """
import json
from backends.triton.elementwise_chain import _chain_kernel
from backends.triton.ops import codes
from scenarios.elementwise_chain import ALL8
from tests.sm90 import aligned, compile_sm90

for dtype in ("fp32", "fp16", "bf16"):
    for name, ops in [("fused", ALL8)] + [("unfused", [op]) for op in ALL8]:
        signature = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "n": "i32", "CHAIN": "constexpr",
                     "BLOCK": "constexpr"}
        # what Triton's launcher specialises on for torch buffers and for n = 2**k: both allow 128-bit accesses
        k, log = compile_sm90(_chain_kernel, signature, {"CHAIN": codes(ops), "BLOCK": 1024}, attrs=aligned(range(3)))
        print(json.dumps({"dtype": dtype, "variant": name, "ops": ops, "cubin": len(k.asm.get("cubin", b"")),
                          "ptx": k.asm["ptx"], "ptxas": log}))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch")), reason=missing("triton", "torch"))
def test_triton_kernels_compile_for_sm90() -> None:
    proc = run_without_emulation(TRITON_SCRIPT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json_lines(proc.stdout)
    assert len(rows) == 3 * (1 + len(ALL8))  # float32, float16, bfloat16
    for row in rows:
        where = f"{row['variant']} {row['ops']} {row['dtype']}"
        assert row["cubin"] > 0, f"no cubin for {where}"
        assert ".target sm_90" in row["ptx"] and ".entry _chain_kernel" in row["ptx"], where
        assert "ld.global.v4" in row["ptx"], f"loads not vectorised in {where}"
        r = parse_ptxas(row["ptxas"])["_chain_kernel"]
        assert r.registers > 0 and r.spill_bytes == 0 and r.stack_bytes == 0, f"{where}: {r}"


@pytest.mark.compile
@pytest.mark.skipif(bool(nvrtc_reason()), reason=nvrtc_reason())
@pytest.mark.parametrize("ops", CHAINS, ids=CHAIN_IDS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cupy_kernels_compile_for_sm90_without_spills(ops: list[str], dtype: str) -> None:
    from backends.cupy.build import compile_sm90
    from backends.cupy.elementwise_chain import source

    kernel = compile_sm90(*source(tuple(ops), dtype))
    r = nvrtc_resources(kernel)
    assert kernel.cubin and r.registers > 0, kernel.log
    assert r.spill_bytes == 0 and r.stack_bytes == 0, kernel.log


HOST_TEMPLATE = """
#include <math.h>
#define __device__
#define __forceinline__ inline
{ops}
extern "C" void run(const float* x, float* y, long long n) {{
    for (long long i = 0; i < n; ++i) {{
        float v = x[i];
{body}
        y[i] = v;
    }}
}}
"""


@pytest.mark.skipif(bool(missing("cupy")) or not shutil.which("c++"), reason="needs cupy and a C++ compiler")
@pytest.mark.parametrize("ops", CHAINS, ids=CHAIN_IDS)
def test_cupy_op_code_matches_reference_on_host(ops: list[str], tmp_path: Path) -> None:
    from backends.cupy.device import OPS_SOURCE
    from backends.cupy.elementwise_chain import chain_body

    (tmp_path / "ops.cpp").write_text(HOST_TEMPLATE.format(ops=OPS_SOURCE, body=chain_body(tuple(ops))))
    lib = tmp_path / "ops.so"
    subprocess.run(["c++", "-O2", "-shared", "-fPIC", "-o", lib, tmp_path / "ops.cpp"], check=True)
    run = ctypes.CDLL(str(lib)).run
    scenario, params = get("elementwise_chain"), {"n": 4099, "ops": ops}
    inputs = scenario.make_inputs(params, "float32", np.random.default_rng(7))
    x, y = inputs["x"], np.full(4099, np.nan, dtype=np.float32)
    run(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), ctypes.c_longlong(x.size))
    ref = scenario.reference(inputs, params)
    _, reason = judge(y, ref, scenario.tolerance(inputs, params, "float32", ref))
    assert not reason, reason


PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k2' for 'sm_90'
ptxas info    : Function properties for k2
ptxas         .     256 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 512 bytes smem
ptxas info    : Function properties for _Z3bigPfi
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'old' for 'sm_80'
ptxas info    : Function properties for old
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, 16 bytes smem, 368 bytes cmem[0]
"""


def test_parse_ptxas_reads_entries_and_out_of_line_functions() -> None:
    found = parse_ptxas(PTXAS_LOG)
    assert list(found) == ["k2", "_Z3bigPfi", "old"]
    k2 = found["k2"]
    assert (k2.registers, k2.stack_bytes, k2.spill_store_bytes, k2.spill_load_bytes) == (32, 256, 8, 4)
    assert (k2.smem_bytes, k2.spill_bytes) == (512, 12)
    assert found["_Z3bigPfi"].registers == 0
    assert (found["old"].registers, found["old"].smem_bytes) == (10, 16)


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("cupy")), reason=missing("cupy"))
@pytest.mark.usefixtures("fresh_resource_cache")
@pytest.mark.parametrize("variant", ["fused", "unfused"])
def test_cupy_entries_build_and_refuse_to_run_without_gpu(variant: str) -> None:
    from backends.cupy import TARGET
    from suite.core.registry import REGISTRY, KernelKey, discover
    from suite.core.targets import COMPILE, NotRunnable
    from suite.gpu import resources

    if TARGET.probe().mode != COMPILE:
        pytest.skip(f"cupy is in {TARGET.probe().mode} mode: {TARGET.probe().reason}")
    discover()
    entry = REGISTRY.get(KernelKey("elementwise_chain", "cupy", variant, "cuda"))
    assert entry is not None
    x = TARGET.asarray(np.zeros(1000, dtype="float16"))
    out = TARGET.empty((1000,), "float16")
    with resources.recording() as specs:
        launch = entry({"x": x}, out, {"n": 1000, "ops": ALL8}, {"block": 128, "stream": None})
    with pytest.raises(NotRunnable, match=r"compiled for sm_90 through NVRTC; no GPU to run it"):
        launch()
    summary = resources.for_row(specs)  # what the row's columns say about the kernels that cannot run
    assert summary["regs"] > 0 and summary["spill_bytes"] == 0 and "errors" not in summary, summary
