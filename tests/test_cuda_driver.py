"""suite.gpu.driver on cuda.bindings. Without a GPU: the driver's own error on this machine, and the module's calls
against a fake `cuda.bindings.driver` that checks what each call is given (handle types, argument order, the
stream) and answers as the driver does: events time what was recorded between them, a copy lands in host memory
when its stream is synchronised, kernel parameters are packed from the (values, types) pair. On a CUDA device
(`nox -s gpu`): the shared stream is non-blocking, read_back returns a CuPy array's bytes without waiting on the
shared stream, and stream_done follows a spin."""

from __future__ import annotations

import functools
import gc
import struct
import time
from typing import Any

import pytest

from suite.core.targets import cuda_device_count
from suite.gpu import driver, timer_kernels
from suite.run import faults

SHARED, PRIVATE = 0x5000, 0x6000
"""The stream handles the fake's first and second cuStreamCreate give: the shared stream is made first."""


class FakeCu:
    """cuda.bindings.driver for the calls the module makes; its CUresult, enums and handle types are the real
    module's. `fail` maps a call's name to the CUresult it answers instead of succeeding."""

    def __init__(self, real: Any) -> None:
        self.real, self.calls, self.fail = real, [], {}
        self.now_ms = 0.0
        self.streams = [SHARED, PRIVATE]
        self.recorded: dict[int, float] = {}
        self.memory: dict[int, bytes] = {}
        self.pending: list[tuple[int, memoryview, bytes]] = []
        self.functions: dict[int, bytes] = {}
        self.capturing: set[int] = set()
        self.launched: list[tuple] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("cu"):
            raise AttributeError(f"the fake has no {name}: add it, answering as the driver does")
        return getattr(self.real, name)

    def _answer(self, name: str, *args: Any, outputs: tuple = ()) -> tuple:
        self.calls.append((name, *args))
        code = self.fail.get(name)
        if code is not None:
            return (self.real.CUresult(code), *(None for _ in outputs))
        return (self.real.CUresult.CUDA_SUCCESS, *outputs)

    def cuInit(self, flags: int) -> tuple:
        return self._answer("cuInit", flags)

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple:
        return self._answer("cuDevicePrimaryCtxRetain", dev, outputs=(self.real.CUcontext(0xC0),))

    def cuCtxSetCurrent(self, ctx: Any) -> tuple:
        assert int(ctx) == 0xC0
        return self._answer("cuCtxSetCurrent", int(ctx))

    def cuStreamCreate(self, flags: int) -> tuple:
        assert flags == self.real.CUstream_flags.CU_STREAM_NON_BLOCKING
        return self._answer("cuStreamCreate", flags, outputs=(self.real.CUstream(self.streams.pop(0)),))

    def cuEventCreate(self, flags: int) -> tuple:
        handle = self.real.CUevent(0xE00 + len(self.calls))
        return self._answer("cuEventCreate", flags, outputs=(handle,))

    def cuEventRecord(self, event: Any, stream: int) -> tuple:
        assert isinstance(event, self.real.CUevent) and isinstance(stream, int)
        self.recorded[int(event)] = self.now_ms
        return self._answer("cuEventRecord", int(event), stream)

    def cuEventSynchronize(self, event: Any) -> tuple:
        assert isinstance(event, self.real.CUevent)
        return self._answer("cuEventSynchronize", int(event))

    def cuEventElapsedTime(self, start: Any, end: Any) -> tuple:
        assert isinstance(start, self.real.CUevent) and isinstance(end, self.real.CUevent)
        if ("cuEventSynchronize", int(end)) not in self.calls:
            return (self.real.CUresult.CUDA_ERROR_NOT_READY, None)
        elapsed = self.recorded[int(end)] - self.recorded[int(start)]
        return self._answer("cuEventElapsedTime", int(start), int(end), outputs=(elapsed,))

    def cuEventDestroy(self, event: Any) -> tuple:
        return self._answer("cuEventDestroy", int(event))

    def cuStreamQuery(self, stream: int) -> tuple:
        return self._answer("cuStreamQuery", stream)

    def cuStreamSynchronize(self, stream: int) -> tuple:
        for copy in [c for c in self.pending if c[0] == stream]:
            copy[1][:] = copy[2]
            self.pending.remove(copy)
        return self._answer("cuStreamSynchronize", stream)

    def cuMemcpyDtoHAsync(self, dst: Any, src: int, nbytes: int, stream: int) -> tuple:
        """Queued on `stream`: the bytes reach `dst` when that stream is synchronised."""
        base = max(b for b in self.memory if b <= src)
        source = self.memory[base][src - base : src - base + nbytes]
        assert len(source) == nbytes, "read past the end of the allocation"
        self.pending.append((stream, memoryview(dst)[:nbytes], source))
        return self._answer("cuMemcpyDtoHAsync", src, nbytes, stream)

    def cuModuleLoadData(self, image: bytes) -> tuple:
        assert image.endswith(b"\0"), "PTX handed to the driver is a NUL-terminated string"
        return self._answer("cuModuleLoadData", outputs=(self.real.CUmodule(0xD0),))

    def cuModuleGetFunction(self, module: Any, name: bytes) -> tuple:
        assert isinstance(module, self.real.CUmodule) and isinstance(name, bytes)
        self.functions[0xF00 + len(self.functions)] = name
        return self._answer("cuModuleGetFunction", name, outputs=(self.real.CUfunction(max(self.functions)),))

    def cuLaunchKernel(self, f: Any, gx, gy, gz, bx, by, bz, shared: int, stream: int, params: tuple, extra) -> tuple:
        """Packs kernelParams as cuda.bindings does: each value converted by its ctypes type, back to back."""
        assert isinstance(f, self.real.CUfunction)
        values, types = params
        assert len(values) == len(types)
        packed = b"".join(bytes(kind(value)) for value, kind in zip(values, types, strict=True))
        self.launched.append((self.functions[int(f)], (gx, gy, gz), (bx, by, bz), shared, stream, packed))
        return self._answer("cuLaunchKernel", stream)

    def cuStreamBeginCapture(self, stream: int, mode: Any) -> tuple:
        assert mode == self.real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self.capturing.add(stream)
        return self._answer("cuStreamBeginCapture", stream)

    def cuStreamEndCapture(self, stream: int) -> tuple:
        if stream not in self.capturing:
            return (self.real.CUresult.CUDA_ERROR_ILLEGAL_STATE, None)
        self.capturing.discard(stream)
        return self._answer("cuStreamEndCapture", stream, outputs=(self.real.CUgraph(0x900),))

    def cuGraphInstantiate(self, graph: Any, flags: int) -> tuple:
        assert isinstance(graph, self.real.CUgraph)
        return self._answer("cuGraphInstantiate", int(graph), flags, outputs=(self.real.CUgraphExec(0x901),))

    def cuGraphLaunch(self, executable: Any, stream: int) -> tuple:
        assert isinstance(executable, self.real.CUgraphExec)
        return self._answer("cuGraphLaunch", int(executable), stream)

    def cuGraphDestroy(self, graph: Any) -> tuple:
        return self._answer("cuGraphDestroy", int(graph))

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


CACHED = ("context", "shared_stream", "_private_stream", "_timer_module")
"""The module's once-only calls: each test on the fake gets fresh ones, and the real ones (a GPU session's shared
stream, already wrapped by the libraries) are back untouched after it."""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCu:
    cu = FakeCu(pytest.importorskip("cuda.bindings.driver"))
    monkeypatch.setattr(driver, "_cu", lambda: cu)
    for name in CACHED:
        monkeypatch.setattr(driver, name, functools.cache(getattr(driver, name).__wrapped__))
    return cu


@pytest.mark.skipif(cuda_device_count() > 0, reason="this machine has a GPU: cuInit succeeds")
def test_without_a_gpu_context_raises_the_drivers_error_naming_cuinit() -> None:
    pytest.importorskip("cuda.bindings.driver")
    with pytest.raises(driver.CudaError, match=r"^cuInit failed") as raised:
        driver.context()  # a failure is not cached: nothing to undo
    if raised.value.code is not None:  # a driver that answered: its CUresult, by number and by name
        assert f"CUresult {raised.value.code} (CUDA_ERROR_" in str(raised.value)


def test_a_failed_call_names_itself_and_its_curesult(fake: FakeCu) -> None:
    fake.fail["cuStreamCreate"] = 100
    with pytest.raises(driver.CudaError) as raised:
        driver.shared_stream()
    assert str(raised.value) == "cuStreamCreate failed with CUresult 100 (CUDA_ERROR_NO_DEVICE)"
    assert raised.value.code == 100
    assert fake.names() == ["cuInit", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuStreamCreate"]


@pytest.mark.parametrize(
    ("code", "kind", "what"),
    [(700, faults.STICKY, "illegal memory access"), (719, faults.STICKY, "launch failure"),
     (2, faults.OOM, "device out of memory"), (1, None, None)],
)  # fmt: skip
def test_the_faults_classification_reads_the_drivers_errors(fake: FakeCu, code: int, kind, what) -> None:
    fake.fail["cuEventSynchronize"] = code
    start, end = driver.Event(), driver.Event()
    with pytest.raises(driver.CudaError) as raised:
        start.elapsed_ms(end)
    found = faults.classify(raised.value)
    assert (found.kind, found.what) == (kind, what) if found else kind is None


def test_elapsed_ms_waits_for_the_end_event_and_times_start_to_end(fake: FakeCu) -> None:
    start, end = driver.Event(), driver.Event()
    fake.now_ms = 1.0
    start.record(SHARED)
    fake.now_ms = 3.5
    end.record(SHARED)
    assert start.elapsed_ms(end) == 2.5
    s, e = int(start.handle), int(end.handle)
    assert fake.calls[-4:] == [("cuEventRecord", s, SHARED), ("cuEventRecord", e, SHARED),
                               ("cuEventSynchronize", e), ("cuEventElapsedTime", s, e)]  # fmt: skip
    del start, end
    gc.collect()
    assert {("cuEventDestroy", s), ("cuEventDestroy", e)} <= set(fake.calls)


def test_launch_packs_each_argument_as_a_uint64_on_the_given_stream(fake: FakeCu) -> None:
    driver._launch(timer_kernels.SPIN, 3, 64, SHARED, 2**40 + 3, 5)
    name, grid, block, shared_mem, stream, packed = fake.launched[-1]
    assert name == timer_kernels.SPIN.encode() and grid == (3, 1, 1) and block == (64, 1, 1)
    assert shared_mem == 0 and stream == SHARED
    assert packed == struct.pack("<QQ", 2**40 + 3, 5)


def test_spin_asks_for_no_negative_time(fake: FakeCu) -> None:
    driver.spin(SHARED, -7)
    assert fake.launched[-1][0] == timer_kernels.SPIN.encode() and fake.launched[-1][-1] == struct.pack("<Q", 0)
    assert fake.names().count("cuModuleLoadData") == 1


@pytest.mark.parametrize(("code", "done"), [(0, True), (600, False), (400, driver.CudaError)])
def test_stream_done_on_success_not_ready_and_an_error(fake: FakeCu, code: int, done) -> None:
    if code:
        fake.fail["cuStreamQuery"] = code
    if done is driver.CudaError:
        with pytest.raises(driver.CudaError, match=r"^cuStreamQuery failed with CUresult 400 \(CUDA_ERROR_INVALID_HAN"):
            driver.stream_done(SHARED)
    else:
        assert driver.stream_done(SHARED) is done
    assert fake.calls[-1] == ("cuStreamQuery", SHARED)


def test_read_back_copies_on_its_own_stream_and_waits_for_that_one_only(fake: FakeCu) -> None:
    assert driver.shared_stream() == SHARED
    fake.memory[0x10000] = bytes(range(256))
    assert driver.read_back(0x10000 + 16, 8) == bytes(range(16, 24))
    assert driver.read_back(0x10000, 4) == bytes(range(4))
    assert ("cuMemcpyDtoHAsync", 0x10010, 8, PRIVATE) in fake.calls
    syncs = [c for c in fake.calls if c[0] == "cuStreamSynchronize"]
    assert syncs == [("cuStreamSynchronize", PRIVATE)] * 2 and fake.names().count("cuStreamCreate") == 2
    assert driver.read_back(0x10000, 0) == b""


def test_capture_ends_the_capture_when_the_launcher_raises(fake: FakeCu) -> None:
    def launcher() -> None:
        raise ValueError("the launcher failed")

    with pytest.raises(ValueError, match="the launcher failed"):
        driver.capture(SHARED, launcher)
    assert not fake.capturing and fake.names()[-2:] == ["cuStreamEndCapture", "cuGraphDestroy"]
    assert "cuGraphInstantiate" not in fake.names()


def test_capture_says_why_a_graph_could_not_be_made(fake: FakeCu) -> None:
    fake.fail["cuStreamEndCapture"] = 901
    with pytest.raises(driver.CudaError, match=r"^cuStreamEndCapture .* CUresult 901 \(CUDA_ERROR_STREAM_CAPTURE_INV"):
        driver.capture(SHARED, lambda: None)
    assert faults.classify(driver.CudaError("x", 901)) is None  # the launcher's failure, not the device's


def test_a_captured_graph_replays_on_the_stream_given(fake: FakeCu) -> None:
    graph = driver.capture(SHARED, lambda: fake.calls.append(("launcher",)))
    graph.launch(SHARED)
    names = fake.names()
    assert names[names.index("cuStreamBeginCapture") :] == [
        "cuStreamBeginCapture", "launcher", "cuStreamEndCapture", "cuGraphInstantiate", "cuGraphLaunch"]  # fmt: skip
    assert fake.calls[-1] == ("cuGraphLaunch", 0x901, SHARED)


def test_a_graph_that_does_not_instantiate_is_destroyed(fake: FakeCu) -> None:
    fake.fail["cuGraphInstantiate"] = 1
    with pytest.raises(driver.CudaError, match="cuGraphInstantiate"):
        driver.capture(SHARED, lambda: None)
    assert fake.calls[-1] == ("cuGraphDestroy", 0x900)


@pytest.mark.gpu
def test_the_shared_stream_is_non_blocking() -> None:
    from cuda.bindings import driver as cu

    flags = driver._check(cu.cuStreamGetFlags(driver.shared_stream()), "cuStreamGetFlags")
    assert int(flags) & driver.CU_STREAM_NON_BLOCKING


@pytest.mark.gpu
def test_read_back_returns_a_cupy_arrays_bytes() -> None:
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(1023, dtype=cupy.float32) * 3 + 1
    cupy.cuda.get_current_stream().synchronize()  # read_back orders itself with no stream but its own
    expected = x.get().tobytes()
    assert driver.read_back(x.data.ptr, x.nbytes) == expected
    assert driver.read_back(x.data.ptr + 40, 12) == expected[40:52]


@pytest.mark.gpu
def test_stream_done_follows_a_spin_and_read_back_does_not_wait_for_it() -> None:
    cupy = pytest.importorskip("cupy")
    x = cupy.ones(16, dtype=cupy.float32)
    cupy.cuda.get_current_stream().synchronize()
    stream = driver.shared_stream()
    driver.read_back(x.data.ptr, 8)  # its private stream made, and the timer's kernels loaded, before the spin
    driver.spin(stream, 0)
    driver.synchronize(stream)
    assert driver.stream_done(stream)
    driver.spin(stream, 50_000_000)
    assert driver.stream_done(stream) is False
    started = time.perf_counter()
    assert driver.read_back(x.data.ptr, 8) == struct.pack("<ff", 1.0, 1.0)
    assert time.perf_counter() - started < 0.025 and driver.stream_done(stream) is False
    driver.synchronize(stream)
    assert driver.stream_done(stream) is True
