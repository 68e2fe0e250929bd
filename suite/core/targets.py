"""Execution targets: one (backend, device) pair, how it runs on this machine, and how arrays reach it.

A target knows how to move a NumPy array to its device, allocate and poison a buffer there, bring it back and
synchronise. Its probe says how it can run here: `native` (timed for real), `emulated` (the Triton interpreter
or the Numba CUDA simulator: numerics only, never timed), `compile` (CUDA source compiled for sm_90 but not
run: no GPU) or `unavailable`, always with a reason.
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from suite.core import dtypes as _dtypes  # noqa: F401  registers bfloat16 with NumPy

NATIVE, EMULATED, COMPILE, UNAVAILABLE = "native", "emulated", "compile", "unavailable"


@dataclass(frozen=True)
class Availability:
    mode: str
    reason: str

    @property
    def runs(self) -> bool:
        return self.mode in (NATIVE, EMULATED)


class Target:
    """Base class; subclasses set `backend` and `device` and override what differs from NumPy on the host."""

    backend: ClassVar[str]
    device: ClassVar[str]
    stream: int | None = None
    """The suite's shared CUDA stream (a raw handle), set by the run on every CUDA target when a GPU is there:
    a target that queues copies (not only launches) puts them on it. None without a GPU."""

    refused_dtypes: ClassVar[dict[str, str]] = {}
    """Storage dtypes this target has no arrays or kernels for, each with the reason its rows give."""

    def probe(self) -> Availability:
        raise NotImplementedError

    def dtype_refusal(self, dtype: str) -> str:
        """Why this target cannot run a case stored in `dtype` ('' where it can): checked before anything is built,
        so its rows are `skipped` with the reason rather than failing inside a compiler."""
        return self.refused_dtypes.get(str(dtype), "")

    def asarray(self, a: np.ndarray) -> Any:
        return np.ascontiguousarray(a)

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return np.empty(shape, dtype=dtype)

    def poison(self, a: Any) -> None:
        """Fill with NaN so that elements a kernel fails to write are caught by the numerics check."""
        a.fill(np.nan)

    def to_host(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def synchronize(self) -> None:
        return None

    def free_bytes(self) -> int | None:
        """Free device memory, for footprint guards; None where unknown."""
        return None

    def release(self) -> None:
        """Hand the memory the library keeps cached (a pool, deferred frees) back to the device, so that free
        memory, as the footprint guard reads it, is what any library could allocate. Called between cases and
        before the guard; a no-op where the library never ran on a GPU. Never raises. Default: nothing cached."""
        return None

    @property
    def name(self) -> str:
        return f"{self.backend}/{self.device}"


TARGETS: dict[tuple[str, str], Target] = {}


def register_target(target: Target) -> Target:
    TARGETS[(target.backend, target.device)] = target
    return target


@functools.cache
def cuda_device_count() -> int:
    """GPUs visible through the driver API, without importing any CUDA library (0 where no driver is found)."""
    for lib in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            cuda = ctypes.CDLL(lib)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    return 0


EMULATION_SWITCHES = ("TRITON_INTERPRET", "NUMBA_ENABLE_CUDASIM")
"""The environment variables that turn the Triton interpreter and the Numba CUDA simulator on; a process that
must compile for real (`suite.gpu.aot`) starts without them."""


def configure_emulation(enable: bool) -> None:
    """Without a GPU, switch Triton to its interpreter and Numba CUDA to its simulator.

    Must run before any backend module is imported: Triton reads TRITON_INTERPRET when kernels are decorated
    and Numba reads NUMBA_ENABLE_CUDASIM when `numba.cuda` is first imported.
    """
    if enable and cuda_device_count() == 0:
        for switch in EMULATION_SWITCHES:
            os.environ.setdefault(switch, "1")


def emulating() -> bool:
    return any(os.environ.get(switch) == "1" for switch in EMULATION_SWITCHES)


class NotRunnable(Exception):
    """Raised by a launcher that was built (e.g. compiled for sm_90) but cannot run on this machine."""
