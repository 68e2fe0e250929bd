"""Occupancy per architecture: the limits tables against calculator results worked by hand, the choice of
architecture (device.arch, the GPU's own, sm_90) and where it is recorded, and, on a GPU, the table of the
GPU's own architecture against the driver's occupancy API."""

from __future__ import annotations

import ctypes

import pytest

from suite.core import targets
from suite.core.errors import ConfigError
from suite.gpu import resources
from suite.gpu.occupancy import ARCHS, LIMITS, limits_for, occupancy
from suite.gpu.resources import KernelSpec

# (arch, (threads/block, registers/thread, static smem bytes)) -> (blocks/SM, warps/SM, limiter), by hand:
# warps/block = ceil(threads/32); registers per warp rounded up to 256, a quarter of the 65536 per sub-partition
# (16384 // regs-per-warp warps each, four sub-partitions); smem + 1 KiB reserved rounded up to 128 B, out of
# the SM's carve-out maximum; at most max_warps and max_blocks per SM.
HAND = [
    # 256 threads, 32 registers, no smem: full occupancy everywhere, bound by threads
    *[((arch, (256, 32, 0)), (8, 64, "threads")) for arch in ("sm_80", "sm_90", "sm_100")],
    *[((arch, (256, 32, 0)), (6, 48, "threads")) for arch in ("sm_86", "sm_89")],
    # 64 registers: 2048 per warp -> 8 warps per sub-partition -> 32 warps -> 4 blocks of 8
    *[((arch, (256, 64, 0)), (4, 32, "registers")) for arch in ARCHS],
    # 255 registers: 8192 per warp -> 2 per sub-partition -> 8 warps -> 2 blocks of 4
    *[((arch, (128, 255, 0)), (2, 8, "registers")) for arch in ARCHS],
    # 48 KiB of smem: 50,176 B per block; 164 KiB holds 3, 100 KiB 2, 228 KiB 4
    (("sm_80", (128, 32, 48 * 1024)), (3, 12, "shared memory")),
    *[((arch, (128, 32, 48 * 1024)), (2, 8, "shared memory")) for arch in ("sm_86", "sm_89")],
    *[((arch, (128, 32, 48 * 1024)), (4, 16, "shared memory")) for arch in ("sm_90", "sm_100")],
    # one-warp blocks: the block limit binds, and it differs (32, 16, 24)
    *[((arch, (32, 8, 0)), (32, 32, "blocks")) for arch in ("sm_80", "sm_90", "sm_100")],
    (("sm_86", (32, 8, 0)), (16, 16, "blocks")),
    (("sm_89", (32, 8, 0)), (24, 24, "blocks")),
    # sub-partitions: 1280 registers per warp -> 12 per sub-partition -> 48 warps -> 16 blocks of 3 (dividing
    # the whole file would give 51 warps, 17 blocks)
    (("sm_90", (96, 40, 0)), (16, 48, "registers")),
    # a block over the per-block shared-memory maximum (99 KiB on sm_86) cannot launch; 227 KiB on sm_90
    (("sm_86", (128, 32, 100 * 1024)), (0, 0, "shared memory")),
    (("sm_86", (128, 32, 99 * 1024)), (1, 4, "shared memory")),
    (("sm_90", (128, 32, 100 * 1024)), (2, 8, "shared memory")),
    (("sm_90", (128, 32, 228 * 1024)), (0, 0, "shared memory")),
    # more than 1024 threads per block never launches
    (("sm_90", (1056, 16, 0)), (0, 0, "threads")),
]


@pytest.mark.parametrize(("case", "expected"), HAND, ids=[f"{a}-{args}" for (a, args), _ in HAND])
def test_calculator_results_per_arch(case, expected):
    arch, args = case
    limits = limits_for(arch)
    occ = occupancy(*args, limits=limits)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limiter) == expected
    assert occ.fraction == pytest.approx(expected[1] / limits.max_warps)


def test_the_tables_hold_the_published_limits():
    table = {a: (x.max_warps, x.max_blocks, x.smem_bytes // 1024, x.smem_per_block // 1024) for a, x in LIMITS.items()}
    assert table == {"sm_80": (64, 32, 164, 163), "sm_86": (48, 16, 100, 99), "sm_89": (48, 24, 100, 99),
                     "sm_90": (64, 32, 228, 227), "sm_100": (64, 32, 228, 227)}  # fmt: skip
    for x in LIMITS.values():
        assert (x.registers, x.max_regs_per_thread, x.reg_unit, x.smem_unit, x.smem_reserved) == (
            65536, 255, 256, 128, 1024)  # fmt: skip


@pytest.mark.parametrize("arch", ["sm_75", "sm_120", "90", ""])
def test_an_unknown_arch_is_refused(arch):
    with pytest.raises(ValueError, match="known: sm_80, sm_86, sm_89, sm_90, sm_100"):
        limits_for(arch)
    with pytest.raises(ValueError, match="no SM limits"):
        resources.resolve_arch(arch)


def test_the_config_refuses_an_unknown_arch_before_any_work(config):
    from suite.run.validate import plan

    with pytest.raises(ConfigError, match=r"unknown device.arch 'sm_75'; valid: sm_80, sm_86, sm_89, sm_90, sm_100"):
        plan(config("scenario=elementwise_chain", "preset=S", "device.arch=sm_75"))
    plan(config("scenario=elementwise_chain", "preset=S", "device.arch=sm_86"))  # a known one passes


@pytest.fixture
def own_arch(monkeypatch):
    """Pretend this machine has a GPU of a given compute capability (None: no GPU)."""
    from suite.gpu import driver

    def pretend(capability: str | None) -> None:
        monkeypatch.setattr(targets, "cuda_device_count", lambda: 0 if capability is None else 1)
        monkeypatch.setattr(driver, "compute_capability", lambda: capability)
        resources._own_arch.cache_clear()

    yield pretend
    resources._own_arch.cache_clear()


def test_unset_arch_is_the_gpus_own_else_sm90(own_arch):
    own_arch(None)
    assert resources.resolve_arch() == ("sm_90", "")
    own_arch("8.9")
    assert resources.resolve_arch() == ("sm_89", "")
    assert resources.resolve_arch("sm_80") == ("sm_80", "")  # device.arch wins over the GPU's own
    own_arch("12.0")
    arch, note = resources.resolve_arch()
    assert arch == "sm_90" and "sm_120" in note


FAKE_LOG = """ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers, 49152 bytes smem
"""


@pytest.fixture
def fake_backend(monkeypatch, fresh_resource_cache):
    from suite.core.backend import BACKENDS, Backend, Build

    class Fake(Backend):
        name = "fake_arch"

        def compile(self, recipe):
            return Build(recipe["kernel"], log=FAKE_LOG, assembler="fake -v")

    monkeypatch.setitem(BACKENDS, "fake_arch", Fake())
    return KernelSpec("fake_arch", "k", 128, (("kernel", "k"),))


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_get_the_chosen_archs_occupancy_and_say_which(arch, fake_backend, own_arch):
    own_arch(None)
    row = type("Row", (), {})()
    row.regs = row.spill_bytes = row.smem_bytes = row.occupancy = None
    row.extra = {}
    resources.annotate(row, "cuda", [fake_backend], arch=arch)
    expected = occupancy(128, 64, 49152, limits_for(arch))
    assert row.occupancy == round(expected.fraction, 4) and row.extra["occupancy_arch"] == arch
    (k,) = row.extra["kernels"]
    assert (k["arch"], k["limiter"], k["blocks_per_sm"]) == (arch, expected.limiter, expected.blocks_per_sm)
    assert "occupancy_arch_note" not in row.extra


def test_the_arch_asked_for_wins_and_a_fallback_is_noted(fake_backend, own_arch):
    own_arch("12.0")
    assert resources.resolve_arch("sm_86")[0] == "sm_86"
    summary = resources.for_row([fake_backend])
    assert summary["arch"] == "sm_90" and "sm_120" in summary["arch_note"]
    assert summary["kernels"][0]["occupancy"] == round(occupancy(128, 64, 49152, limits_for("sm_90")).fraction, 4)


def test_execute_builds_under_the_jobs_arch(monkeypatch, tmp_path):
    """A case's resources are computed for the job's `arch` (device.arch), as the runner passes it."""
    from suite.core.scenario import SCENARIOS
    from suite.run import check, execute
    from suite.run.job import Case
    from suite.run.runner import jobs
    from suite.run.stages import Check
    from suite.run.validate import prepare
    from tests.conftest import make_config

    seen = []

    def build_and_check(key, avail, job, data, scn):
        seen.append(resources.resolve_arch(job.arch)[0])
        return Check("error", "not built in this test"), None

    monkeypatch.setattr(check, "build_and_check", build_and_check)
    cfg = make_config("plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]",
                      "variants=[good]", "device=cpu", "dtype=float32")  # fmt: skip
    (job, *_) = jobs(cfg, prepare(cfg), tmp_path, set())
    job.arch = "sm_89"  # device.arch, as the runner passes it
    rows = execute.execute(job, SCENARIOS[job.scenario], Case(job.scenario, job.params, job.dtype, 7, seed=1), {})
    assert seen == ["sm_89"] and rows[0].status == "error"


PROBE = r"""
extern "C" __global__ void probe(const float* __restrict__ x, float* __restrict__ y) {
    extern __shared__ float dynamic_smem[];
#if STATIC_FLOATS > 0
    __shared__ float static_smem[STATIC_FLOATS];
#endif
    float a[LIVE];  // LIVE values live at once: the register count grows with it
    int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int i = 0; i < LIVE; ++i) a[i] = x[t + i * 4096];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < LIVE; ++i) s += a[i] * a[LIVE - 1 - i];
#if STATIC_FLOATS > 0
    static_smem[threadIdx.x % STATIC_FLOATS] = s;
    __syncthreads();
    s += static_smem[(threadIdx.x + 1) % STATIC_FLOATS];
#endif
    if (s == 12345.0f) dynamic_smem[0] = s;  // keeps the dynamic array referenced; never launched here anyway
    y[t] = s;
}
"""


def _ok(result, what):
    code, *rest = result
    assert int(code) == 0, f"{what}: {code}"
    return rest[0] if len(rest) == 1 else rest


def _ptx(live: int, static_floats: int, arch: str) -> bytes:
    from cuda.bindings import nvrtc

    prog = _ok(nvrtc.nvrtcCreateProgram(PROBE.encode(), b"probe.cu", 0, [], []), "nvrtcCreateProgram")
    options = [f"--gpu-architecture=compute_{arch[3:]}".encode(), f"-DLIVE={live}".encode(),
               f"-DSTATIC_FLOATS={static_floats}".encode()]  # fmt: skip
    _ok(nvrtc.nvrtcCompileProgram(prog, len(options), options), "nvrtcCompileProgram")
    size = _ok(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
    ptx = b" " * size
    _ok(nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
    return ptx


@pytest.mark.gpu
@pytest.mark.skipif(targets.cuda_device_count() == 0, reason="no CUDA device")
def test_the_table_matches_the_drivers_occupancy_api():
    """Probe kernels of several register and shared-memory footprints, loaded from PTX on this GPU: for every
    block size and dynamic shared memory size, cuOccupancyMaxActiveBlocksPerMultiprocessor gives the blocks per
    SM the table of this GPU's architecture gives for the loaded kernel's registers and shared memory."""
    cu = pytest.importorskip("cuda.bindings.driver")
    pytest.importorskip("cuda.bindings.nvrtc")
    _ok(cu.cuInit(0), "cuInit")
    dev = _ok(cu.cuDeviceGet(0), "cuDeviceGet")
    _ok(cu.cuCtxSetCurrent(_ok(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")), "cuCtxSetCurrent")
    attr = cu.CUdevice_attribute
    major = _ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "major")
    minor = _ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "minor")
    arch = f"sm_{major}{minor}"
    if arch not in LIMITS:
        pytest.skip(f"no limits table for this GPU's {arch}")
    limits = limits_for(arch)
    optin = _ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev), "optin")
    assert optin == limits.smem_per_block
    fa = cu.CUfunction_attribute
    mismatches, checked = [], 0
    for live, static_floats in [(4, 0), (40, 0), (100, 1024), (200, 0), (24, 4096)]:
        image = ctypes.create_string_buffer(_ptx(live, static_floats, arch))
        module = _ok(cu.cuModuleLoadData(ctypes.addressof(image)), "cuModuleLoadData")
        func = _ok(cu.cuModuleGetFunction(module, b"probe"), "cuModuleGetFunction")
        regs = _ok(cu.cuFuncGetAttribute(fa.CU_FUNC_ATTRIBUTE_NUM_REGS, func), "NUM_REGS")
        static = _ok(cu.cuFuncGetAttribute(fa.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, func), "SHARED_SIZE_BYTES")
        most = optin - static  # opt in to the largest dynamic shared memory, as a kernel that needs it must
        _ok(cu.cuFuncSetAttribute(func, fa.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, most), "opt in")
        for threads in (32, 96, 128, 160, 256, 384, 512, 1024):
            for dynamic in sorted({0, 1000, 20 * 1024, 50 * 1024, most}):
                got = _ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(func, threads, dynamic), "occupancy")
                ours = occupancy(threads, regs, static + dynamic, limits)
                checked += 1
                if got != ours.blocks_per_sm:
                    mismatches.append((threads, regs, static, dynamic, got, ours.blocks_per_sm, ours.limiter))
        _ok(cu.cuModuleUnload(module), "cuModuleUnload")
    assert not mismatches, (
        f"{len(mismatches)} of {checked} differ (threads, regs, static, dynamic, driver, ours, limiter): "
        f"{mismatches[:10]}"
    )


def test_the_check_computes_resources_for_the_jobs_arch(monkeypatch):
    """The build's resource stage hands the job's `arch` (device.arch) to the analysis."""
    from types import SimpleNamespace

    from suite.core.registry import KernelKey
    from suite.run import build

    seen = {}
    monkeypatch.setattr(resources, "annotate", lambda row, device, specs, built_for, arch=None: seen.update(arch=arch))
    job = SimpleNamespace(params={"n": 8}, arch="sm_89")
    built = SimpleNamespace(run_params={"n": 8})
    build.kernel_resources(KernelKey("s", "b", "v", "cuda"), None, built, job, None, [])
    assert seen == {"arch": "sm_89"}
