"""The CUDA driver API through ctypes: the one stream every backend launches on, events, and an L2 flush.

Timing through the driver rather than one library keeps every backend equal: Triton (torch), CuPy and Numba
all wrap the same stream handle (torch.cuda.ExternalStream, cupy.cuda.ExternalStream, numba's
cuda.external_stream) and the timer records events on it. All three libraries use the device's primary
context, which is the one made current here.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Callable

CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
CU_DEVICE_ATTRIBUTE_CC_MAJOR = 75
CU_DEVICE_ATTRIBUTE_CC_MINOR = 76
CU_EVENT_DEFAULT = 0
CU_STREAM_NON_BLOCKING = 1


class CudaError(RuntimeError):
    pass


@functools.cache
def _lib() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


def _check(result: int, what: str) -> None:
    if result != 0:
        raise CudaError(f"{what} failed with CUresult {result}")


@functools.cache
def context() -> int:
    """Make device 0's primary context current (the one torch, CuPy and Numba use) and return it."""
    lib = _lib()
    _check(lib.cuInit(0), "cuInit")
    ctx = ctypes.c_void_p()
    _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), "cuDevicePrimaryCtxRetain")
    _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx.value or 0


def ensure_current() -> None:
    _check(_lib().cuCtxSetCurrent(ctypes.c_void_p(context())), "cuCtxSetCurrent")


@functools.cache
def shared_stream() -> int:
    """The stream handle every backend launches on and the timer records events on."""
    context()
    stream = ctypes.c_void_p()
    _check(_lib().cuStreamCreate(ctypes.byref(stream), CU_STREAM_NON_BLOCKING), "cuStreamCreate")
    return stream.value or 0


def device_name() -> str:
    context()
    buf = ctypes.create_string_buffer(256)
    _check(_lib().cuDeviceGetName(buf, 256, 0), "cuDeviceGetName")
    return buf.value.decode()


def cuda_version() -> str:
    """The CUDA version the driver supports, as `13.0` (cuDriverGetVersion)."""
    value = ctypes.c_int()
    _check(_lib().cuDriverGetVersion(ctypes.byref(value)), "cuDriverGetVersion")
    return f"{value.value // 1000}.{value.value % 1000 // 10}"


def compute_capability() -> str:
    """Device 0's compute capability, as `9.0`."""
    context()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_lib().cuDeviceGetAttribute(ctypes.byref(major), CU_DEVICE_ATTRIBUTE_CC_MAJOR, 0), "CC major")
    _check(_lib().cuDeviceGetAttribute(ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_CC_MINOR, 0), "CC minor")
    return f"{major.value}.{minor.value}"


def l2_bytes() -> int:
    context()
    value = ctypes.c_int()
    _check(_lib().cuDeviceGetAttribute(ctypes.byref(value), CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 0), "L2 size")
    return value.value


def free_bytes() -> int:
    ensure_current()
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    _check(_lib().cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
    return free.value


class Event:
    def __init__(self) -> None:
        ensure_current()
        self.handle = ctypes.c_void_p()
        _check(_lib().cuEventCreate(ctypes.byref(self.handle), CU_EVENT_DEFAULT), "cuEventCreate")

    def record(self, stream: int) -> None:
        _check(_lib().cuEventRecord(self.handle, ctypes.c_void_p(stream)), "cuEventRecord")

    def elapsed_ms(self, end: Event) -> float:
        _check(_lib().cuEventSynchronize(end.handle), "cuEventSynchronize")
        ms = ctypes.c_float()
        _check(_lib().cuEventElapsedTime(ctypes.byref(ms), self.handle, end.handle), "cuEventElapsedTime")
        return float(ms.value)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            _lib().cuEventDestroy_v2(self.handle)


def synchronize(stream: int) -> None:
    _check(_lib().cuStreamSynchronize(ctypes.c_void_p(stream)), "cuStreamSynchronize")


def _attribute(attribute: int) -> int:
    context()
    value = ctypes.c_int()
    _check(_lib().cuDeviceGetAttribute(ctypes.byref(value), attribute, 0), f"cuDeviceGetAttribute({attribute})")
    return value.value


@functools.cache
def _timer_module() -> dict[str, ctypes.c_void_p]:
    """The timer's own kernels (suite.gpu.timer_kernels), loaded once from PTX the driver compiles for this GPU."""
    from suite.gpu import timer_kernels

    ensure_current()
    module = ctypes.c_void_p()
    _check(
        _lib().cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(timer_kernels.PTX.encode())), "cuModuleLoadData"
    )
    functions = {}
    for name in (timer_kernels.READ_FLUSH, timer_kernels.SPIN):
        function = ctypes.c_void_p()
        _check(_lib().cuModuleGetFunction(ctypes.byref(function), module, name.encode()), f"cuModuleGetFunction {name}")
        functions[name] = function
    return functions


def _launch(name: str, grid: int, block: int, stream: int, *args: int) -> None:
    values = [ctypes.c_uint64(a) for a in args]
    params = (ctypes.c_void_p * len(values))(*(ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values))
    _check(
        _lib().cuLaunchKernel(_timer_module()[name], grid, 1, 1, block, 1, 1, 0, ctypes.c_void_p(stream), params, None),
        f"cuLaunchKernel {name}",
    )


class L2Flush:
    """Reads a buffer twice the L2 size on the shared stream (suite.gpu.timer_kernels), so each repetition starts
    with an L2 of clean lines that are not the kernel's: its data is evicted and nothing is left to write back."""

    def __init__(self) -> None:
        from suite.gpu import timer_kernels

        ensure_current()
        self.size = 2 * max(l2_bytes(), 1 << 20)
        self.ptr, self.sink = ctypes.c_uint64(), ctypes.c_uint64()
        _check(_lib().cuMemAlloc_v2(ctypes.byref(self.ptr), ctypes.c_size_t(self.size)), "cuMemAlloc")
        _check(_lib().cuMemAlloc_v2(ctypes.byref(self.sink), ctypes.c_size_t(16)), "cuMemAlloc")
        _check(_lib().cuMemsetD8_v2(self.ptr, ctypes.c_ubyte(0), ctypes.c_size_t(self.size)), "cuMemsetD8")
        _check(_lib().cuCtxSynchronize(), "cuCtxSynchronize")
        self.vectors = self.size // 16
        self.grid = timer_kernels.flush_grid(self.vectors, _attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT))
        self.threads = timer_kernels.FLUSH_THREADS

    def __call__(self, stream: int) -> None:
        from suite.gpu import timer_kernels

        _launch(
            timer_kernels.READ_FLUSH, self.grid, self.threads, stream, self.ptr.value, self.vectors, self.sink.value
        )

    def close(self) -> None:
        for ptr in (self.ptr, self.sink):
            with contextlib.suppress(Exception):
                _lib().cuMemFree_v2(ptr)


def spin(stream: int, ns: int) -> None:
    """Queue a kernel on `stream` that keeps the GPU busy for `ns` nanoseconds (one thread on the global timer)."""
    from suite.gpu import timer_kernels

    _launch(timer_kernels.SPIN, 1, 1, stream, max(int(ns), 0))


CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1


class Graph:
    """A CUDA graph captured from a launcher's work on the shared stream, instantiated and ready to replay."""

    def __init__(self, graph: ctypes.c_void_p, executable: ctypes.c_void_p) -> None:
        self.graph, self.executable = graph, executable

    def launch(self, stream: int) -> None:
        _check(_lib().cuGraphLaunch(self.executable, ctypes.c_void_p(stream)), "cuGraphLaunch")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            _lib().cuGraphExecDestroy(self.executable)
            _lib().cuGraphDestroy(self.graph)


def capture(stream: int, launch: Callable[[], None]) -> Graph:
    """Capture every kernel `launch()` queues on `stream` into a graph. Thread-local mode: a call that cannot be
    captured (an allocation, a synchronisation, work on another stream joined badly) ends the capture with an
    error, raised here as CudaError naming the call that failed; the stream is left out of capture either way."""
    ensure_current()
    _check(_lib().cuStreamBeginCapture_v2(ctypes.c_void_p(stream), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
           "cuStreamBeginCapture")  # fmt: skip
    graph = ctypes.c_void_p()
    try:
        launch()
    finally:
        ended = _lib().cuStreamEndCapture(ctypes.c_void_p(stream), ctypes.byref(graph))
    _check(ended, "cuStreamEndCapture (the launcher did something a graph cannot hold)")
    executable = ctypes.c_void_p()
    try:
        _check(_lib().cuGraphInstantiateWithFlags(ctypes.byref(executable), graph, ctypes.c_ulonglong(0)),
               "cuGraphInstantiate")  # fmt: skip
    except CudaError:
        _lib().cuGraphDestroy(graph)
        raise
    return Graph(graph, executable)
