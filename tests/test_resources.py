"""Static resources of CUDA kernels compiled for sm_90 without a GPU: registers, spills, shared memory, occupancy.

CuPy kernels compile in this process through NVRTC; Triton and Numba kernels in the `suite.gpu.aot` helper process,
where the interpreter and the simulator this test session runs under are off. Each test uses its own disk
cache, so what it measures is a compile, not a previous run's answer.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from suite.gpu import aot, resources
from suite.gpu.occupancy import SM90, occupancy
from suite.gpu.resources import KernelSpec, Unrecorded
from tests.support import missing

pytestmark = pytest.mark.usefixtures("fresh_resource_cache")

SPILL_SOURCE = r"""
extern "C" __global__ void spill(const float* __restrict__ x, float* __restrict__ y) {
    float a[64];  // 64 values live at once: 72 registers unconstrained, spills under -maxrregcount=32
    int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int i = 0; i < 64; ++i) a[i] = x[t + i * 4096];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i) s += a[i] * a[63 - i];
#pragma unroll
    for (int i = 0; i < 64; ++i) y[t + i * 4096] = a[i] * s;
}
"""

SHARED_SOURCE = r"""
extern "C" __global__ void tile(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float buf[2048];  // 8 KiB of static shared memory
    int t = threadIdx.x;
    buf[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    y[blockIdx.x * blockDim.x + t] = buf[(t * 7) % 2048] + buf[2047 - t];
}
"""


needs_cupy = pytest.mark.skipif(bool(missing("cupy")), reason=missing("cupy"))


def _cupy_spec(source: str, name: str, options: tuple[str, ...] = (), threads: int = 256) -> KernelSpec:
    return KernelSpec("cupy", name, threads, (("source", source), ("kernel", name), ("options", options)))


def _entry_specs(backend: str, variant: str, ops: list[str], dtype: str = "float32", **opts) -> list:
    """What an elementwise_chain entry records when built (in this session's emulation or compile mode)."""
    from suite.core import targets
    from suite.core.registry import REGISTRY, KernelKey, discover

    discover()
    target = targets.TARGETS[(backend, "cuda")]
    entry = REGISTRY.get(KernelKey("elementwise_chain", backend, variant, "cuda"))
    x = target.asarray(np.linspace(-2, 2, 4096, dtype=dtype))
    out = target.empty((4096,), dtype)
    with resources.recording() as specs:
        entry({"x": x}, out, {"n": 4096, "ops": ops}, {"stream": None, **opts})
    return specs


@pytest.mark.compile
@needs_cupy
def test_cupy_elementwise_kernels_report_registers_and_full_occupancy() -> None:
    specs = _entry_specs("cupy", "unfused", ["scale", "gelu", "scale"], block=128)
    assert [s.threads for s in specs] == [128, 128, 128]
    summary = resources.for_row(specs)
    kernels = {k["name"]: k for k in summary["kernels"]}
    assert set(kernels) == {"chain_float32_scale", "chain_float32_gelu"}
    assert kernels["chain_float32_scale"]["launches"] == 2
    for k in kernels.values():
        assert 0 < k["regs"] <= 64 and k["spill_store_bytes"] == k["spill_load_bytes"] == 0, k
        assert k["smem_bytes"] == 0 and k["local_bytes"] == 0
        assert k["occupancy"] == 1.0 and k["limiter"] in ("threads", "blocks")
    assert summary["regs"] == max(k["regs"] for k in kernels.values()) and summary["spill_bytes"] == 0


@pytest.mark.compile
@needs_cupy
def test_cupy_spilling_and_shared_memory_kernels() -> None:
    free, capped = _cupy_spec(SPILL_SOURCE, "spill"), _cupy_spec(SPILL_SOURCE, "spill", ("-maxrregcount=32",))
    shared = _cupy_spec(SHARED_SOURCE, "tile", threads=1024)
    by = {(k["name"], k["regs"]): k for k in resources.analyse([free, capped, shared])}
    (spilling,) = [k for (name, regs), k in by.items() if name == "spill" and regs == 32]
    assert spilling["spill_store_bytes"] > 0 and spilling["spill_load_bytes"] > 0 and spilling["local_bytes"] > 0
    (unconstrained,) = [k for (name, regs), k in by.items() if name == "spill" and regs != 32]
    assert unconstrained["regs"] > 32 and unconstrained["spill_store_bytes"] == 0
    (tile,) = [k for (name, _), k in by.items() if name == "tile"]
    assert tile["smem_bytes"] == 8192 and tile["threads"] == 1024
    assert tile["occupancy"] == occupancy(1024, tile["regs"], 8192, SM90).fraction


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch")), reason=missing("triton", "torch"))
def test_triton_elementwise_kernel_compiles_in_the_helper() -> None:
    specs = _entry_specs("triton", "fused", ["gelu", "tanh"], dtype="float16", block=1024, num_warps=4)
    (spec,) = specs
    assert spec.threads == 128
    assert dict(spec.get("signature")) == {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32", "CHAIN": "constexpr",
                                             "BLOCK": "constexpr"}  # fmt: skip
    assert spec.get("divisible") == (0, 1, 2)  # aligned buffers, n = 4096
    (k,) = resources.analyse(specs)
    assert "error" not in k, k
    assert 0 < k["regs"] <= 255 and k["spill_store_bytes"] == 0 and k["local_bytes"] == 0
    assert k["smem_bytes"] >= 0 and 0 < k["occupancy"] <= 1.0
    assert k["occupancy"] == round(occupancy(128, k["regs"], k["smem_bytes"], SM90).fraction, 4)


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("numba_cuda")), reason=missing("numba_cuda"))
def test_numba_elementwise_kernels_compile_in_the_helper() -> None:
    specs = _entry_specs("numba", "unfused", ["tanh", "square"], block=256)
    assert [s.name for s in specs] == ["tanh", "square"]
    kernels = resources.analyse(specs)
    for k in kernels:
        assert "error" not in k, k
        assert k["regs"] > 0 and k["spill_store_bytes"] == 0 and k["smem_bytes"] == 0
        assert k["threads"] == 256 and k["occupancy"] == 1.0


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("numba_cuda")), reason=missing("numba_cuda"))
def test_the_second_analysis_comes_from_the_disk_cache(monkeypatch) -> None:
    specs = _entry_specs("numba", "fused", ["silu"], block=64)
    first = resources.analyse(specs)
    assert "error" not in first[0], first
    on_disk = json.loads(resources.cache_path().read_text())
    assert specs[0].cache_key() in on_disk

    resources.clear_memory_cache()  # a fresh worker: only the disk remembers

    def refuse(spec):
        raise AssertionError("compiled again despite the disk cache")

    monkeypatch.setattr(aot, "compile_remote", refuse)
    before = dict(resources.STATS)
    assert resources.analyse(specs) == first
    assert resources.STATS["disk"] == before["disk"] + 1 and resources.STATS["compiled"] == before["compiled"]


def test_cache_key_is_stable_and_ignores_block_size() -> None:
    a = KernelSpec("numba", "k", 128, (("factory", ("backends.numba.on_cuda.elementwise_chain", "kernel_source",
                                                    (("gelu",),))), ("arg_types", ("float32[::1]",))))  # fmt: skip
    b = KernelSpec.from_json(json.loads(json.dumps(a.to_json())))
    assert b == a and hash(b) == hash(a)
    wider = KernelSpec(a.backend, a.name, 1024, a.recipe)
    assert wider != a and wider.cache_key() == a.cache_key()
    other = KernelSpec("numba", "k", 128, (("factory", a.get("factory")), ("arg_types", ("float16[::1]",))))
    assert other.cache_key() != a.cache_key()


FAKE_LOG = """ptxas info    : Compiling entry function 'k2' for 'sm_90'
ptxas info    : Function properties for k2
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 16 bytes cumulative stack size, 512 bytes smem
"""


def test_any_registered_backend_reports_through_its_build(monkeypatch) -> None:
    """The analysis knows no library: a backend's Build (here a log it assembled itself) is all it reads."""
    from suite.core.backend import BACKENDS, Backend, Build

    class Fake(Backend):
        name = "fake"

        def compile(self, recipe):
            return Build(recipe["kernel"], log=FAKE_LOG, assembler="fake -v", extra_smem=256)

    monkeypatch.setitem(BACKENDS, "fake", Fake())
    (k,) = resources.analyse([KernelSpec("fake", "shown", 128, (("kernel", "k2"),), dynamic_smem=1024)])
    assert (k["regs"], k["spill_store_bytes"], k["spill_load_bytes"], k["local_bytes"]) == (32, 8, 4, 16)
    assert k["smem_bytes"] == 512 + 256 + 1024 and k["source"] == "sm_90 (fake -v)" and k["backend"] == "fake"
    assert k["occupancy"] == round(occupancy(128, 32, 512 + 256 + 1024, SM90).fraction, 4)
    with pytest.raises(ValueError, match="backend must be one of"):
        KernelSpec("no such backend", "k", 128, ())


def test_record_triton_derives_the_launch_signature() -> None:
    torch = pytest.importorskip("torch")
    from backends.triton.elementwise_chain import _chain_kernel
    from backends.triton.record import record_triton

    x = torch.zeros(4096, dtype=torch.float32)
    y = torch.zeros(4097, dtype=torch.bfloat16)[1:]  # 2-byte offset: not 16-byte aligned
    with resources.recording() as specs:
        record_triton(_chain_kernel, (x, y, 2**33), {"CHAIN": (1, 2), "BLOCK": 256}, 2)
        record_triton(_chain_kernel, (x, x, 1), {"CHAIN": (1,), "BLOCK": 256}, 8)
        record_triton(lambda: None, (x,), {}, 4)  # not a Triton kernel: recorded as such, no raise
    big, one, bad = specs
    assert dict(big.get("signature"))["y_ptr"] == "*bf16" and dict(big.get("signature"))["n"] == "i64"
    assert big.get("divisible") == (0, 2) and big.threads == 64
    assert dict(big.get("constexprs")) == {"CHAIN": (1, 2), "BLOCK": 256}
    assert big.get("factory") == ("backends.triton.elementwise_chain", "_chain_kernel", None)
    assert dict(one.get("constexprs"))["n"] == 1 and one.threads == 256  # Triton specialises 1
    assert isinstance(bad, Unrecorded)
    record_triton(_chain_kernel, (x, x, 7), {"CHAIN": (1,), "BLOCK": 256}, 4)  # outside: a no-op


def test_for_row_takes_the_worst_kernel(monkeypatch) -> None:
    numbers = {
        "light": {"registers": 16, "spill_store_bytes": 0, "spill_load_bytes": 0, "stack_bytes": 0, "smem_bytes": 0},
        "heavy": {"registers": 128, "spill_store_bytes": 8, "spill_load_bytes": 12, "stack_bytes": 24, "smem_bytes": 0},
        "shared": {"registers": 32, "spill_store_bytes": 0, "spill_load_bytes": 0, "stack_bytes": 0,
                   "smem_bytes": 100 * 1024},
    }  # fmt: skip

    def fake(spec):
        if spec.name == "broken":
            raise resources.ResourceError("NVRTC cannot compile broken")
        return {**numbers[spec.name], "kernel": spec.name, "assembler": "fake"}

    monkeypatch.setattr(resources, "compiled_resources", fake)
    specs = [_cupy_spec("a", "light", threads=256), _cupy_spec("b", "heavy", threads=512),
             _cupy_spec("c", "shared", threads=128), _cupy_spec("d", "broken")]  # fmt: skip
    summary = resources.for_row(specs)
    assert summary["regs"] == 128 and summary["spill_bytes"] == 20 and summary["smem_bytes"] == 100 * 1024
    occ = {k["name"]: k.get("occupancy") for k in summary["kernels"]}
    assert occ["heavy"] == 0.25 and occ["shared"] == 0.125 and occ["light"] == 1.0  # 128 regs × 512 threads
    assert summary["occupancy"] == 0.125 and occ["broken"] is None
    assert summary["errors"] == ["broken: ResourceError: NVRTC cannot compile broken"]


def test_annotate_never_fails_a_row(monkeypatch) -> None:
    from suite.core.row import Row

    def row() -> Row:
        return Row("s", "{}", "float32", "b", "cuda", "fused", "ok")

    cpu = Row("s", "{}", "float32", "numba", "cpu", "fused", "ok")
    resources.annotate(cpu, "cpu", [])
    assert cpu.extra["resources"] == "not applicable: CPU target" and cpu.regs is None

    empty = row()
    resources.annotate(empty, "cuda", [])
    assert "no kernels recorded" in empty.extra["resources"]

    monkeypatch.setattr(resources, "_compile", lambda spec: (_ for _ in ()).throw(RuntimeError("ptxas died")))
    failed = row()
    resources.annotate(failed, "cuda", [_cupy_spec("x", "k"), Unrecorded("triton", "t", "TypeError: dtype")])
    assert failed.regs is None and failed.occupancy is None and failed.status == "ok"
    assert "ptxas died" in failed.extra["resources"] and "not recorded" in failed.extra["resources"]

    monkeypatch.setattr(resources, "for_row", lambda specs, arch=None: 1 / 0)
    broken = row()
    resources.annotate(broken, "cuda", [_cupy_spec("x", "k")])
    assert broken.extra["resources"].startswith("resource analysis failed: ZeroDivisionError")


@pytest.mark.compile
@needs_cupy
def test_rows_carry_resources_through_the_suite(tmp_path) -> None:
    from suite.run.runner import run
    from tests.conftest import make_config

    cfg = make_config("scenario=elementwise_chain", "scenario.n=4096", "scenario.ops=[scale,gelu]",
                      "backends=[cupy,numba]", "device=all", "timing=quick", "isolate=false", "dtype=float32",
                      "variants=[fused,unfused]")  # fmt: skip
    frame = run(cfg, tmp_path, show_progress=False).table
    rows = {(r.backend, r.device, r.variant): r for r in frame.itertuples()}
    for variant in ("fused", "unfused"):
        cupy_row = rows[("cupy", "cuda", variant)]
        assert cupy_row.regs > 0 and cupy_row.spill_bytes == 0 and cupy_row.occupancy == 1.0
        kernels = json.loads(cupy_row.extra)["kernels"]
        assert len(kernels) == (1 if variant == "fused" else 2)
        cpu_row = rows[("numba", "cpu", variant)]
        assert np.isnan(cpu_row.regs) and "not applicable" in json.loads(cpu_row.extra)["resources"]
