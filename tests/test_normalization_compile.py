"""The normalization kernels compile for sm_90 (H100/H200) without a GPU, in registers.

Triton's compiler and Numba's PTX compiler cannot run where TRITON_INTERPRET / NUMBA_ENABLE_CUDASIM are set
(this test session sets both), so they run in a subprocess without them. Triton kernels are compiled at the
launcher's num_warps, in float32, float16 and bfloat16 (which CuPy and Numba do not take), and their PTX
assembled by ptxas; CuPy's sources go through NVRTC. None may spill, for the default tile (4096 columns) and for
the largest (16384, the chunked path, where registers are tightest); CuPy's also not at 1024 threads a block,
where a thread has 64 registers at most.
"""

from __future__ import annotations

import json

import pytest

from scenarios.normalization import DECOMPOSITIONS, kind
from suite.gpu.ptxas import parse_ptxas
from tests.support import json_lines, missing, nvrtc_reason, nvrtc_resources, run_without_emulation

STEP_OPS = sorted({st.op for steps in DECOMPOSITIONS.values() for st in steps})
BF16_STEP_OPS = sorted({kind(op): op for op in STEP_OPS}.values())
"""One step op of each Triton template (reduce, rowwise, map, affine), compiled in bfloat16 too."""

TRITON_SCRIPT = """
import json, sys
from backends.triton import normalization as tn
from scenarios.normalization import kind
from tests.sm90 import aligned, compile_sm90

TEMPLATES = {"reduce": tn._reduce_rows, "rowwise": tn._rowwise, "map": tn._exp_map, "affine": tn._affine}

def build(fn, dtype, const):
    pointers = [a for a in fn.arg_names if a.endswith("_ptr")]
    signature = {a: ("*fp32" if a == "stat_ptr" else f"*{dtype}") for a in pointers} | {"cols": "i32"}
    signature |= {c: "constexpr" for c in const}
    return compile_sm90(fn, signature, const, {"num_warps": tn.num_warps(const["TILE"], {})},
                        aligned(range(len(pointers))))

cases = [(op, dtype, tile, one) for op in tn.FUSED for dtype in ("fp32", "fp16") for tile, one in
         ((4096, True), (4096, False))] + [(op, "fp16", 16384, False) for op in tn.FUSED]
# bfloat16 loads and stores as float16 does and computes in float32: its rows hold the two ends, one whole tile and
# the widest chunked one (where registers are tightest); its steps, one op of each template.
cases += [(op, "bf16", tile, one) for op in tn.FUSED for tile, one in ((4096, True), (16384, False))]
for op, dtype, tile, one in cases:
    k, log = build(tn.FUSED[op], dtype, {"TILE": tile, "ONE_TILE": one})
    print(json.dumps({"kernel": f"{op} fused {dtype} tile={tile} one_tile={one}", "ptx": k.asm["ptx"], "ptxas": log}))
steps = [(op, "fp16") for op in tn.CODES] + [(op, "bf16") for op in sys.argv[1:]]
for op, dtype in steps:
    fn = TEMPLATES[kind(op)]
    k, log = build(fn, dtype, {"TILE": 4096} | ({"OP": tn.CODES[op]} if "OP" in fn.arg_names else {}))
    print(json.dumps({"kernel": f"{op} step {dtype}", "ptx": k.asm["ptx"], "ptxas": log}))
"""

NUMBA_SCRIPT = """
import json, sys
from backends.numba.on_cuda import normalization
from backends.numba.compile import compile_kernels

dtype = sys.argv[1]
out = {}
for op in normalization.DECOMPOSITIONS:
    for variant, params in (("fused", {"cols": 8192, "tile": 4096}), ("unfused", {"cols": 781, "tile": 4096})):
        for name, ptx in compile_kernels(normalization.kernel_sources(op, variant, params, dtype)).items():
            out[f"{op} {variant} {name}"] = ptx
print(json.dumps(out))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch")), reason=missing("triton", "torch"))
def test_triton_kernels_compile_for_sm90_without_spills() -> None:
    proc = run_without_emulation(TRITON_SCRIPT, *BF16_STEP_OPS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json_lines(proc.stdout)
    assert len(rows) == 3 * (5 + 2) + len(STEP_OPS) + len(BF16_STEP_OPS)
    bf16_steps = {r["kernel"].split()[0] for r in rows if r["kernel"].endswith("step bf16")}
    assert {kind(op) for op in bf16_steps} == {kind(op) for op in STEP_OPS}, bf16_steps  # every template
    for row in rows:
        assert ".target sm_90" in row["ptx"], row["kernel"]
        (resources,) = parse_ptxas(row["ptxas"]).values()
        assert resources.registers > 0 and resources.spill_bytes == 0, f"{row['kernel']}: {resources}"


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("numba_cuda")), reason=missing("numba_cuda"))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_numba_cuda_kernels_compile_for_sm90(dtype: str) -> None:
    proc = run_without_emulation(NUMBA_SCRIPT, dtype)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ptx = json.loads(proc.stdout.splitlines()[-1])
    assert len(ptx) == 3 + sum(len(steps) for steps in DECOMPOSITIONS.values()), sorted(ptx)
    for name, code in ptx.items():
        assert ".target sm_90" in code and ".visible .entry" in code, name
        if dtype == "float16" and name.split()[1] == "fused":
            assert "cvt.f32.f16" in code and "cvt.rn.f16.f32" in code, f"{name}: no float16 conversions"
    assert "shfl" not in "".join(ptx.values())  # shared-memory reductions: what the simulator can run


@pytest.mark.compile
@pytest.mark.skipif(bool(nvrtc_reason()), reason=nvrtc_reason())
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cupy_kernels_compile_for_sm90_without_spills(dtype: str) -> None:
    from backends.cupy.build import compile_sm90
    from backends.cupy.normalization import geometry
    from backends.cupy.normalization_kernels import fused_source, step_source

    sources = []
    for cols, tile in ((193, 64), (1024, 1024), (4096, 4096), (65536, 16384)):
        for opts in ({"block": 256}, {}):  # the option, and the threads the shape chooses
            block, threads = geometry(cols, {"tile": tile}, opts)
            sources += [fused_source(op, dtype, block, threads) for op in DECOMPOSITIONS]
    sources += [step_source(op, dtype, 4096, 256) for op in STEP_OPS]
    for source in sources:
        kernel = compile_sm90(*source)
        r = nvrtc_resources(kernel)
        assert kernel.cubin and r.registers > 0, kernel.log
        assert r.spill_bytes == 0 and r.stack_bytes == 0, f"{kernel.name}: {kernel.log}"


@pytest.mark.compile
@pytest.mark.skipif(bool(nvrtc_reason()), reason=nvrtc_reason())
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cupy_kernels_fit_a_block_of_1024_threads(dtype: str) -> None:
    """A block of 1024 threads leaves a thread 65536 / 1024 = 64 registers; each kernel is bounded to its block
    (`__launch_bounds__`), so ptxas keeps within them without spilling. Unbounded, layernorm's 16 values a
    thread took 72 and the launch failed with "too many resources requested"."""
    from backends.cupy.build import compile_sm90
    from backends.cupy.normalization_kernels import fused_source, step_source

    sources = [fused_source(op, dtype, block, 1024) for op in DECOMPOSITIONS for block in (1024, 4096, 16384)]
    sources += [step_source(op, dtype, 16384, 1024) for op in STEP_OPS]
    for source in sources:
        assert "__launch_bounds__(1024, 1)" in source[0], source[1]
        kernel = compile_sm90(*source)
        r = nvrtc_resources(kernel)
        assert 0 < r.registers <= 65536 // 1024, f"{kernel.name}: {r}"
        assert r.spill_bytes == 0 and r.stack_bytes == 0, f"{kernel.name}: {kernel.log}"


def test_cupy_threads_follow_the_chunk() -> None:
    """No more threads than a quarter of a chunk's columns (a warp at least), more where a chunk would spill."""
    from backends.cupy import BACKEND
    from suite.core.errors import ConfigError
    from suite.kit.launch import chunk_columns, row_threads

    assert chunk_columns(1, 4096) == 1 and chunk_columns(781, 4096) == 1024 and chunk_columns(32768, 4096) == 4096
    assert row_threads(64, 256) == 32 and row_threads(1, 256) == 32
    assert row_threads(4096, 256) == 256 and row_threads(512, 256) == 128
    assert row_threads(16384, 128) == 256 and row_threads(16384, 32, max_items=256) == 64
    assert BACKEND.option({}, "max_items") == 64 and BACKEND.option({"max_items": 256}, "max_items") == 256
    with pytest.raises(ConfigError, match="multiple of 32"):  # the schema judges the options before any work
        BACKEND.check_options({"block": 100})
