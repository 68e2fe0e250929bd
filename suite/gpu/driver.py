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


class L2Flush:
    """Overwrites a buffer twice the L2 size on the shared stream, so each repetition starts with a cold L2."""

    def __init__(self) -> None:
        ensure_current()
        self.size = 2 * max(l2_bytes(), 1 << 20)
        self.ptr = ctypes.c_uint64()
        _check(_lib().cuMemAlloc_v2(ctypes.byref(self.ptr), ctypes.c_size_t(self.size)), "cuMemAlloc")

    def __call__(self, stream: int) -> None:
        _check(
            _lib().cuMemsetD8Async(self.ptr, ctypes.c_ubyte(0), ctypes.c_size_t(self.size), ctypes.c_void_p(stream)),
            "cuMemsetD8Async",
        )
