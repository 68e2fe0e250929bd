"""The CUDA driver API through cuda.bindings: the one stream every backend launches on, events, and an L2 flush.

Timing through the driver rather than one library keeps every backend equal: Triton (torch), CuPy and Numba
all wrap the same stream handle (torch.cuda.ExternalStream, cupy.cuda.ExternalStream, numba's
cuda.external_stream) and the timer records events on it. All three libraries use the device's primary
context, which is the one made current here. Stream handles cross this module's boundary as plain ints, the
form those three take; every other handle stays the cuda.bindings object the driver gave.

Each cuda.bindings call returns a tuple, its CUresult first and its outputs after; `_check` turns a result other
than CUDA_SUCCESS into a CudaError naming the call and the CUresult by number and name, which is what
`suite.run.faults` reads to tell a lost context from an exhausted device.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Callable
from typing import Any

CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
CU_DEVICE_ATTRIBUTE_CC_MAJOR = 75
CU_DEVICE_ATTRIBUTE_CC_MINOR = 76
CU_EVENT_DEFAULT = 0
CU_STREAM_NON_BLOCKING = 1
CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1
CUDA_SUCCESS = 0
CUDA_ERROR_NOT_READY = 600


class CudaError(RuntimeError):
    """A driver call that failed; `code` is its CUresult (None where no call returned one)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@functools.cache
def _cu() -> Any:
    """cuda.bindings.driver, imported on first use so that importing this module needs no CUDA install."""
    from cuda.bindings import driver

    return driver


def _code_name(code: int) -> str:
    try:
        return _cu().CUresult(code).name
    except ValueError:
        return "unknown CUresult"


def _check(result: tuple, what: str) -> Any:
    """The outputs of a cuda.bindings call (None, the one output, or a tuple of them); CudaError if its CUresult
    is not CUDA_SUCCESS."""
    code = int(result[0])
    if code != CUDA_SUCCESS:
        raise CudaError(f"{what} failed with CUresult {code} ({_code_name(code)})", code)
    outputs = result[1:]
    return None if not outputs else outputs[0] if len(outputs) == 1 else outputs


def _c_string(raw: bytes) -> str:
    """A char buffer the driver filled (cuda.bindings hands back the whole buffer): up to its first NUL."""
    return raw.split(b"\0", 1)[0].decode()


def _init() -> None:
    """cuInit; a machine without the driver library fails here too, as a CudaError naming cuInit."""
    try:
        result = _cu().cuInit(0)
    except (ImportError, OSError, RuntimeError) as exc:  # no cuda-bindings, or no libcuda for it to load
        raise CudaError(f"cuInit failed: no CUDA driver to call ({type(exc).__name__}: {exc})") from exc
    _check(result, "cuInit")


@functools.cache
def context() -> int:
    """Make device 0's primary context current (the one torch, CuPy and Numba use) and return it."""
    _init()
    ctx = _check(_cu().cuDevicePrimaryCtxRetain(0), "cuDevicePrimaryCtxRetain")
    _check(_cu().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return int(ctx)


def ensure_current() -> None:
    _check(_cu().cuCtxSetCurrent(context()), "cuCtxSetCurrent")


def _new_stream() -> int:
    context()
    stream = _check(_cu().cuStreamCreate(CU_STREAM_NON_BLOCKING), "cuStreamCreate")
    return int(stream)


@functools.cache
def shared_stream() -> int:
    """The stream handle every backend launches on and the timer records events on. Non-blocking: it never
    waits on the legacy default stream, so a library's stray launch there does not order itself with it."""
    return _new_stream()


@functools.cache
def _private_stream() -> int:
    """This module's own stream for `read_back`, apart from the shared stream so a copy never waits on it."""
    return _new_stream()


def device_name() -> str:
    context()
    return _c_string(_check(_cu().cuDeviceGetName(256, 0), "cuDeviceGetName"))


def pci_bus_id() -> str:
    """Device 0's PCI bus id (cuDeviceGetPCIBusId), as NVML names the same GPU."""
    context()
    return _c_string(_check(_cu().cuDeviceGetPCIBusId(64, 0), "cuDeviceGetPCIBusId"))


def cuda_version() -> str:
    """The CUDA version the driver supports, as `13.0` (cuDriverGetVersion)."""
    value = _check(_cu().cuDriverGetVersion(), "cuDriverGetVersion")
    return f"{value // 1000}.{value % 1000 // 10}"


def _attribute(attribute: int, what: str | None = None) -> int:
    context()
    cu = _cu()
    found = cu.cuDeviceGetAttribute(cu.CUdevice_attribute(attribute), 0)
    return int(_check(found, what or f"cuDeviceGetAttribute({attribute})"))


def compute_capability() -> str:
    """Device 0's compute capability, as `9.0`."""
    major = _attribute(CU_DEVICE_ATTRIBUTE_CC_MAJOR, "CC major")
    minor = _attribute(CU_DEVICE_ATTRIBUTE_CC_MINOR, "CC minor")
    return f"{major}.{minor}"


def l2_bytes() -> int:
    return _attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size")


def free_bytes() -> int:
    ensure_current()
    free, _total = _check(_cu().cuMemGetInfo(), "cuMemGetInfo")
    return int(free)


class Event:
    def __init__(self) -> None:
        ensure_current()
        self.handle = _check(_cu().cuEventCreate(CU_EVENT_DEFAULT), "cuEventCreate")
        self._destroy = _cu().cuEventDestroy  # bound now: a destructor run at interpreter exit imports nothing

    def record(self, stream: int) -> None:
        _check(_cu().cuEventRecord(self.handle, stream), "cuEventRecord")

    def wait(self) -> None:
        """Block the host until this event has completed (cuEventSynchronize)."""
        _check(_cu().cuEventSynchronize(self.handle), "cuEventSynchronize")

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event to `end`, once `end` has completed."""
        _check(_cu().cuEventSynchronize(end.handle), "cuEventSynchronize")
        return float(_check(_cu().cuEventElapsedTime(self.handle, end.handle), "cuEventElapsedTime"))

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._destroy(self.handle)


def synchronize(stream: int) -> None:
    _check(_cu().cuStreamSynchronize(stream), "cuStreamSynchronize")


def stream_done(stream: int) -> bool:
    """Whether everything queued on `stream` has finished (cuStreamQuery), without waiting for it."""
    result = _cu().cuStreamQuery(stream)
    if int(result[0]) == CUDA_ERROR_NOT_READY:
        return False
    _check(result, "cuStreamQuery")
    return True


def read_back(ptr: int, nbytes: int) -> bytes:
    """`nbytes` of device memory from address `ptr`, copied on this module's private stream and synchronised
    there only: work still queued on the shared stream is not waited for, which is what lets a check see what a
    kernel wrote while the shared stream is held back."""
    if nbytes == 0:
        return b""
    ensure_current()
    stream = _private_stream()
    host = bytearray(nbytes)
    _check(_cu().cuMemcpyDtoHAsync(host, ptr, nbytes, stream), "cuMemcpyDtoHAsync")
    synchronize(stream)
    return bytes(host)


def profiler_start() -> None:
    """cuProfilerStart: from here a profiler started with profiling off (ncu --profile-from-start off) counts."""
    _check(_cu().cuProfilerStart(), "cuProfilerStart")


def profiler_stop() -> None:
    _check(_cu().cuProfilerStop(), "cuProfilerStop")


@functools.cache
def _timer_module() -> dict[str, Any]:
    """The timer's own kernels (suite.gpu.timer_kernels), loaded once from PTX the driver compiles for this GPU."""
    from suite.gpu import timer_kernels

    ensure_current()
    module = _check(_cu().cuModuleLoadData(timer_kernels.PTX.encode() + b"\0"), "cuModuleLoadData")
    functions = {}
    for name in (timer_kernels.READ_FLUSH, timer_kernels.SPIN):
        functions[name] = _check(_cu().cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction {name}")
    return functions


def _launch(name: str, grid: int, block: int, stream: int, *args: int) -> None:
    """Launch one of the timer's kernels, every argument a 64-bit integer (a pointer, a count, nanoseconds):
    kernelParams as cuda.bindings packs them, a tuple of the values and a tuple of their ctypes types."""
    params = (tuple(args), (ctypes.c_uint64,) * len(args))
    function = _timer_module()[name]
    _check(_cu().cuLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, stream, params, 0), f"cuLaunchKernel {name}")


class L2Flush:
    """Reads a buffer twice the L2 size on the shared stream (suite.gpu.timer_kernels), so each repetition starts
    with an L2 of clean lines that are not the kernel's: its data is evicted and nothing is left to write back."""

    def __init__(self) -> None:
        from suite.gpu import timer_kernels

        ensure_current()
        cu = _cu()
        self.size = 2 * max(l2_bytes(), 1 << 20)
        self.ptr = _check(cu.cuMemAlloc(self.size), "cuMemAlloc")
        self.sink = _check(cu.cuMemAlloc(16), "cuMemAlloc")
        _check(cu.cuMemsetD8(self.ptr, 0, self.size), "cuMemsetD8")
        _check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        self.vectors = self.size // 16
        self.grid = timer_kernels.flush_grid(self.vectors, _attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT))
        self.threads = timer_kernels.FLUSH_THREADS

    def __call__(self, stream: int) -> None:
        from suite.gpu import timer_kernels

        args = (int(self.ptr), self.vectors, int(self.sink))
        _launch(timer_kernels.READ_FLUSH, self.grid, self.threads, stream, *args)

    def close(self) -> None:
        for ptr in (self.ptr, self.sink):
            with contextlib.suppress(Exception):
                _cu().cuMemFree(ptr)


def spin(stream: int, ns: int) -> None:
    """Queue a kernel on `stream` that keeps the GPU busy for `ns` nanoseconds (one thread on the global timer)."""
    from suite.gpu import timer_kernels

    _launch(timer_kernels.SPIN, 1, 1, stream, max(int(ns), 0))


class Graph:
    """A CUDA graph captured from a launcher's work on the shared stream, instantiated and ready to replay."""

    def __init__(self, graph: Any, executable: Any) -> None:
        self.graph, self.executable = graph, executable

    def launch(self, stream: int) -> None:
        _check(_cu().cuGraphLaunch(self.executable, stream), "cuGraphLaunch")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            _cu().cuGraphExecDestroy(self.executable)
            _cu().cuGraphDestroy(self.graph)


def capture(stream: int, launch: Callable[[], None]) -> Graph:
    """Capture every kernel `launch()` queues on `stream` into a graph. Thread-local mode: a call that cannot be
    captured (an allocation, a synchronisation, work on another stream joined badly) ends the capture with an
    error, raised here as CudaError naming the call that failed; the stream is left out of capture either way."""
    ensure_current()
    cu = _cu()
    mode = cu.CUstreamCaptureMode(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
    _check(cu.cuStreamBeginCapture(stream, mode), "cuStreamBeginCapture")
    try:
        launch()
    except BaseException:
        ended = cu.cuStreamEndCapture(stream)
        if int(ended[0]) == CUDA_SUCCESS and int(ended[1]):
            cu.cuGraphDestroy(ended[1])  # a graph of what was captured before the launcher raised: not wanted
        raise
    graph = _check(cu.cuStreamEndCapture(stream), "cuStreamEndCapture (the launcher did something a graph cannot hold)")
    try:
        executable = _check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
    except CudaError:
        cu.cuGraphDestroy(graph)
        raise
    return Graph(graph, executable)
