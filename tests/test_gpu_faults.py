"""GPU faults on the CPU, with the fake CUDA targets of tests/fakes_gpu.py: out of memory is an `error` row naming
the footprint and the free memory, and the sweep goes on; a sticky CUDA error restarts the worker and costs the
culprit's row only; a timeout's row says the worker was restarted; the libraries' caches are released before the
footprint guard and after each case; uploads and poison are synchronised before the first launch, and the
launch before the read-back."""

from __future__ import annotations

import enum
import functools
import importlib
from types import SimpleNamespace
from typing import Any

import pytest

from suite.core.targets import NATIVE, Availability
from suite.run import faults, footprint, measure, worker
from suite.run.config import TimingConfig
from suite.run.job import Job

MIB = 2**20


@pytest.fixture(scope="module")
def fakes():
    """tests.fakes_gpu, registered for this module's tests only (imported here, not at collection, so that no
    other module's parametrisation sees the fake kernels)."""
    module = importlib.import_module("tests.fakes_gpu")
    module.install()
    yield module
    module.uninstall()


@pytest.fixture
def gpu(fakes):
    fakes.reset()
    yield fakes
    fakes.reset()


@pytest.fixture(scope="module")
def in_process(fakes):
    return worker.InProcess(worker.Settings(emulate=True, devices=["cuda"]))


@pytest.fixture(scope="module")
def child(fakes):
    """A real worker process with the fakes as its plugin."""
    w = worker.Worker(worker.Settings(emulate=True, devices=["cuda"], plugins=["tests.fakes_gpu"]))
    yield w
    w.close()


def job(*variants: str, n: int = 64) -> Job:
    quick = TimingConfig(budget_s=0.0, min_reps=1, max_reps=2, warmup=0)
    return Job("fake_gpu", {"n": n}, "float32", ["fakegpu"], ["cuda"], list(variants), 0, quick, True, 1 << 24, {},
               strict=True)  # fmt: skip


def by_variant(rows: list) -> dict[str, Any]:
    assert len({r.variant for r in rows}) == len(rows), [r.variant for r in rows]  # one row per implementation
    return {r.variant: r for r in rows}


# What an exception means


class OutOfMemoryError(RuntimeError):
    """Named as torch.OutOfMemoryError and cupy.cuda.memory.OutOfMemoryError are."""


class CudaAPIError(Exception):
    """Made as Numba's: the CUresult and the call."""

    def __init__(self, code: Any, msg: str) -> None:
        self.code, self.msg = code, msg
        super().__init__(code, msg)

    def __str__(self) -> str:
        return f"[{self.code}] {self.msg}"


class CUDARuntimeError(RuntimeError):
    """Made as CuPy's: the status, and the runtime's name and string as the message."""

    def __init__(self, status: int, text: str) -> None:
        self.status = status
        super().__init__(text)


class CUresult(enum.IntEnum):
    """As cuda.bindings hands Numba the driver's result."""

    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_LAUNCH_FAILED = 719


class OutOfResources(Exception):
    """Triton's: a kernel asking for more shared memory than the SM has is the kernel's failure, not the device's."""


class Response(Exception):
    code = 700  # an attribute named `code` on an exception of no CUDA library means nothing here


def _wrapped() -> BaseException:
    try:
        raise CudaAPIError(700, "Call to cuMemcpyDtoH results in CUDA_ERROR_ILLEGAL_ADDRESS")
    except CudaAPIError as inner:
        try:
            raise RuntimeError("copying the output back failed") from inner
        except RuntimeError as outer:
            return outer


def _driver_error() -> BaseException:
    from suite.gpu.driver import CudaError

    return CudaError("cuEventSynchronize failed with CUresult 719")


CLASSIFIED = [
    (OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB."), faults.OOM, "device out of memory"),
    (CudaAPIError(2, "Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY"), faults.OOM, "device out of memory"),
    (CudaAPIError(CUresult.CUDA_ERROR_OUT_OF_MEMORY, "Call to cuMemAlloc"), faults.OOM, "device out of memory"),
    (RuntimeError("CUDA error: out of memory"), faults.OOM, "device out of memory"),
    (CudaAPIError(700, "Call to cuMemcpyDtoH results in CUDA_ERROR_ILLEGAL_ADDRESS"), faults.STICKY,
     "illegal memory access"),
    (RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered"), faults.STICKY,
     "illegal memory access"),
    (CUDARuntimeError(719, "cudaErrorLaunchFailure: unspecified launch failure"), faults.STICKY, "launch failure"),
    (CudaAPIError(CUresult.CUDA_ERROR_LAUNCH_FAILED, "Call to cuCtxSynchronize"), faults.STICKY, "launch failure"),
    (RuntimeError("CUDA error: misaligned address\nCUDA kernel errors might be asynchronously reported"),
     faults.STICKY, "misaligned address"),
    (CudaAPIError(715, "Call to cuCtxSynchronize results in CUDA_ERROR_ILLEGAL_INSTRUCTION"), faults.STICKY,
     "illegal instruction"),
    (_driver_error(), faults.STICKY, "launch failure"),
    (_wrapped(), faults.STICKY, "illegal memory access"),
]  # fmt: skip


@pytest.mark.parametrize(("exc", "kind", "what"), CLASSIFIED, ids=lambda v: v if isinstance(v, str) else None)
def test_gpu_exceptions_are_classified(exc: BaseException, kind: str, what: str) -> None:
    fault = faults.classify(exc)
    assert fault is not None and (fault.kind, fault.what) == (kind, what)
    assert "\n" not in fault.detail and fault.detail.startswith(type(exc).__name__)


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("kernel launch failed on purpose"),
        MemoryError("Unable to allocate 8.00 GiB for an array with shape (2147483648,) and data type float32"),
        OutOfResources("out of resource: shared memory, Required: 262144, Hardware limit: 232448"),
        Response("teapot"),
        ValueError("code 2"),
        CudaAPIError(1, "Call to cuLaunchKernel results in CUDA_ERROR_INVALID_VALUE"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_other_exceptions_are_no_gpu_fault(exc: BaseException) -> None:
    assert faults.classify(exc) is None


# Out of memory


def test_out_of_memory_is_an_error_row_with_the_footprint_and_the_sweep_goes_on(in_process, gpu) -> None:
    gpu.DEVICE.parked["fakepool"] = 2 * gpu.GIB  # another library's pool: released before the free memory is read
    rows = by_variant(in_process.run(job("oom_build", "oom_launch", "numba_oom", "good"), 60))
    need = footprint.fmt_bytes(gpu.FOOTPRINT_PER_ELEMENT * 64 * 4)
    for variant, kind in (("oom_build", "OutOfMemoryError"), ("oom_launch", "OutOfMemoryError"),
                          ("numba_oom", "CudaAPIError")):  # fmt: skip
        row = rows[variant]
        assert row.status == "error", (variant, row.reason)
        assert row.reason.startswith(f"device out of memory: the case needs ~{need} (footprint), 8.0 GiB free on "
                                     "fakegpu/cuda (" + kind), row.reason  # fmt: skip
        assert "\n" not in row.reason
    assert rows["good"].status == "ok", rows["good"].reason
    assert gpu.DEVICE.lost is None
    after = by_variant(in_process.run(job("good", n=100), 60))  # the next case runs in the same process
    assert after["good"].status == "ok"


def test_out_of_memory_while_timing_is_a_row_per_implementation(in_process, gpu, monkeypatch) -> None:
    def timed(*_: Any) -> Any:
        raise gpu.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 MiB.")

    monkeypatch.setattr(measure, "timed", timed)
    rows = by_variant(in_process.run(job("good", "oom_launch"), 60))
    assert set(rows) == {"good", "oom_launch"}
    for row in rows.values():
        assert row.status == "error"
        assert row.reason.startswith("device out of memory: the case needs ~1.0 KiB (footprint), 8.0 GiB free on "
                                     "fakegpu/cuda, while timing the case (OutOfMemoryError: CUDA out of memory"), row.reason  # fmt: skip


def test_a_footprint_without_a_model_falls_back_to_inputs_and_output(gpu, monkeypatch) -> None:
    scn = gpu.GpuDoubling()
    monkeypatch.setattr(scn, "footprint_bytes", lambda *_: None)
    reason = footprint.out_of_memory(scn, {"n": 1024}, "float32", "good", gpu.GPU)
    assert reason == "device out of memory: the case needs ~8.0 KiB (inputs and output; no footprint model), " \
                     "8.0 GiB free on fakegpu/cuda"  # fmt: skip


# Sticky errors: a fresh worker


def test_sticky_error_restarts_the_worker_and_the_rest_of_the_case_runs(child) -> None:
    before = child.process.pid
    rows = by_variant(child.run(job("illegal", "good"), 120))
    assert rows["illegal"].status == "error"
    assert rows["illegal"].reason.startswith("illegal memory access; the CUDA context is lost, the worker was "
                                             "restarted (CudaAPIError: [700] Call to cuLaunchKernel"), rows["illegal"].reason  # fmt: skip
    # the fake device stays lost in the process that hit the error: `good` passes only in a fresh worker
    assert rows["good"].status == "ok", rows["good"].reason
    assert child.process.pid != before and child.process.is_alive()
    again = by_variant(child.run(job("good", n=100), 120))  # and the sweep goes on in it
    assert again["good"].status == "ok"


def test_timeout_restarts_the_worker_and_its_row_says_so(child) -> None:
    before = child.process.pid
    rows = by_variant(child.run(job("hang", "good"), 8))
    assert rows["hang"].status == "error"
    assert rows["hang"].reason == ("timeout: over the case limit of 8 s (timing.case_timeout_s) while running "
                                   "fakegpu/cuda/hang; the worker was killed and restarted")  # fmt: skip
    assert rows["good"].status == "ok", rows["good"].reason
    assert child.process.pid != before and child.process.is_alive()


def test_sticky_error_in_process_costs_the_culprit_row(in_process, gpu) -> None:
    rows = by_variant(in_process.run(job("misaligned"), 60))
    assert rows["misaligned"].status == "error"
    assert rows["misaligned"].reason.startswith("misaligned address; the CUDA context is lost and stays lost "
                                                "(isolate=false: no worker to restart) (RuntimeError: CUDA error: "
                                                "misaligned address)"), rows["misaligned"].reason  # fmt: skip


def test_sticky_error_while_timing_loses_the_case(in_process, gpu, monkeypatch) -> None:
    def timed(*_: Any) -> Any:
        raise gpu.CudaAPIError(700, "Call to cuEventSynchronize results in CUDA_ERROR_ILLEGAL_ADDRESS")

    monkeypatch.setattr(measure, "timed", timed)
    with pytest.raises(faults.ContextLost) as lost:
        in_process.session.run(job("good"))
    assert lost.value.culprit is None and lost.value.what == "illegal memory access"
    with pytest.raises(worker.WorkerLost, match=r"^illegal memory access; the CUDA context is lost"):
        in_process.run(job("good"), 60)  # the runner makes every row of the case an error with this reason


def test_a_cpu_kernel_is_never_taken_for_a_gpu_fault() -> None:
    from suite.core.registry import KernelKey
    from suite.run import build

    (status, reason), oom = build.failure(KernelKey("s", "b", "v", "cpu"), RuntimeError("LLVM: out of memory"))
    assert (status, oom) == ("error", False) and reason == "RuntimeError: LLVM: out of memory"
    (status, reason), oom = build.failure(KernelKey("s", "b", "v", "cpu"), RuntimeError("misaligned address"))
    assert (status, oom) == ("error", False)  # raised no ContextLost: a CPU kernel cannot lose a CUDA context


# Caches released


def test_a_case_that_fits_once_caches_are_released_is_not_skipped(in_process, gpu) -> None:
    n = 1 << 20
    need = gpu.FOOTPRINT_PER_ELEMENT * n * 4  # 16 MiB
    gpu.reset(free=20 * MIB)
    gpu.DEVICE.parked.update({"fakepool": 10 * MIB, "fakegpu": 2 * MIB})
    assert gpu.GPU.free_bytes() < need  # read without releasing, the guard would skip the case
    rows = by_variant(in_process.run(job("good", n=n), 60))
    assert rows["good"].status == "ok", rows["good"].reason
    assert gpu.PARKER.releases >= 1  # the other library's pool, not only the target's own


def test_caches_are_released_after_each_case(in_process, gpu) -> None:
    rows = by_variant(in_process.run(job("good"), 60))
    assert rows["good"].status == "ok"
    assert gpu.DEVICE.parked == {}  # what the case's arrays left in the fake pools is handed back
    releases = gpu.GPU.releases
    gpu.DEVICE.parked["fakegpu"] = MIB
    in_process.run(job("good"), 60)
    assert gpu.GPU.releases > releases and gpu.DEVICE.parked == {}


def test_a_case_that_does_not_fit_even_then_is_skipped(in_process, gpu) -> None:
    gpu.reset(free=10 * MIB)
    gpu.DEVICE.parked["fakepool"] = 5 * MIB
    rows = by_variant(in_process.run(job("good", n=1 << 20), 60))
    assert rows["good"].status == "skipped"
    assert rows["good"].reason == "good needs 16.0 MiB (16,777,216 bytes), more than the 10.0 MiB free on fakegpu/cuda"


# Uploads, poison, launch and read-back in order


def test_uploads_and_poison_are_synchronised_before_the_first_launch_and_the_read_back(in_process, gpu) -> None:
    rows = by_variant(in_process.run(job("good"), 60))
    assert rows["good"].status == "ok"
    calls = gpu.GPU.calls
    syncs = [i for i, c in enumerate(calls) if c == "synchronize"]
    made = max(i for i, c in enumerate(calls) if c in ("asarray", "empty", "poison"))
    first_use = min(calls.index("build"), calls.index("launch"))
    assert any(made < i < first_use for i in syncs), calls
    last_launch = max(i for i, c in enumerate(calls) if c == "launch")
    assert any(last_launch < i < calls.index("to_host") for i in syncs), calls


# The backends' release hooks: only where the library ran on a GPU, and never raising


class Counter:
    def __init__(self, fail: bool = False) -> None:
        self.calls, self.fail = 0, fail

    def __call__(self, *_: Any) -> None:
        self.calls += 1
        if self.fail:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_torch_allocators_are_emptied_where_cuda_is_initialised(backend: str, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    target = importlib.import_module(f"backends.{backend}").BACKEND.targets["cuda"]
    empty = Counter()
    monkeypatch.setattr(torch.cuda, "empty_cache", empty)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    target.release()
    assert empty.calls == 0
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    target.release()
    assert empty.calls == 1
    monkeypatch.setattr(torch.cuda, "empty_cache", Counter(fail=True))
    target.release()  # never raises


def test_cupy_pools_are_freed_once_cupy_ran_on_a_gpu(monkeypatch) -> None:
    cupy_backend = importlib.import_module("backends.cupy")
    device, pinned = Counter(fail=True), Counter()
    fake = SimpleNamespace(get_default_memory_pool=lambda: SimpleNamespace(free_all_blocks=device),
                           get_default_pinned_memory_pool=lambda: SimpleNamespace(free_all_blocks=pinned))  # fmt: skip
    monkeypatch.setattr(cupy_backend, "cupy", fake)
    probe = functools.cache(lambda: Availability(NATIVE, "CuPy on a fake GPU"))
    monkeypatch.setattr(cupy_backend, "_probe", probe)
    cupy_backend.TARGET.release()
    assert device.calls == pinned.calls == 0  # never probed: nothing pooled, and no probe made to find out
    probe()
    cupy_backend.TARGET.release()
    assert device.calls == pinned.calls == 1  # the device pool's failure does not keep the pinned pool full


def test_numba_deferred_frees_are_flushed_where_it_made_device_arrays(monkeypatch) -> None:
    numba_backend = importlib.import_module("backends.numba")
    cuda = pytest.importorskip("numba.cuda")
    target = numba_backend.BACKEND.targets["cuda"]
    memory, context = Counter(), Counter()
    ctx = SimpleNamespace(deallocations=SimpleNamespace(clear=context),
                          memory_manager=SimpleNamespace(deallocations=SimpleNamespace(clear=memory)))  # fmt: skip
    monkeypatch.setattr(cuda, "current_context", lambda: ctx, raising=False)
    monkeypatch.setattr(numba_backend, "simulating", lambda: False)
    monkeypatch.setattr(target, "used", False)
    target.release()
    assert memory.calls == context.calls == 0
    monkeypatch.setattr(target, "used", True)
    target.release()
    assert memory.calls == context.calls == 1
    monkeypatch.setattr(cuda, "current_context", Counter(fail=True), raising=False)
    target.release()  # never raises
