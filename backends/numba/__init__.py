"""The Numba backend: a CPU target (host NumPy arrays, timed for real) and a CUDA target.

This module imports `numba.cuda` only when the CUDA target is probed or used, and the kernel modules import
it under a guard: numba-cuda is an optional dependency, and where it is missing only the CUDA target is
unavailable. `NUMBA_ENABLE_CUDASIM=1` (set by the suite on
machines without a GPU, before any backend is imported) turns the CUDA target into the simulator: numerics
only, never timed.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any

import numpy as np

from suite.core.backend import Backend, Copy, Option, register_backend
from suite.core.targets import EMULATED, NATIVE, UNAVAILABLE, Availability, Target, cuda_device_count


def simulating() -> bool:
    """Whether `numba.cuda` is (or will be, once imported) the CUDA simulator."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


class NumbaCPU(Target):
    backend = "numba"
    device = "cpu"

    def probe(self) -> Availability:
        try:
            import numba
        except ImportError as exc:
            return Availability(UNAVAILABLE, f"numba cannot be imported: {exc}")
        return Availability(NATIVE, f"numba {numba.__version__} on the host CPU")


class NumbaCUDA(Target):
    """Device arrays of `numba.cuda`; on a GPU every copy goes through the suite's shared stream."""

    backend = "numba"
    device = "cuda"

    def probe(self) -> Availability:
        if importlib.util.find_spec("numba_cuda") is None:
            return Availability(UNAVAILABLE, "numba-cuda is not installed (pip install 'numba-cuda[cu13]')")
        if simulating():  # numba.cuda *is* the simulator then, even where a GPU exists
            return Availability(EMULATED, "Numba CUDA simulator: numerics only, not timed")
        if cuda_device_count() == 0:
            return Availability(UNAVAILABLE, "no CUDA device, and NUMBA_ENABLE_CUDASIM is not set")
        try:
            from numba import cuda

            if cuda.is_available():
                return Availability(NATIVE, f"numba-cuda on {cuda.get_current_device().name}")
            return Availability(UNAVAILABLE, "numba.cuda.is_available() is False: driver or toolkit unusable")
        except Exception as exc:  # a broken driver or toolkit install must not take the suite down
            return Availability(UNAVAILABLE, f"numba.cuda failed: {type(exc).__name__}: {exc}")

    def _stream(self) -> Any:
        """The suite's shared stream on a GPU (the one kernels launch on and the timer records on); 0 otherwise."""
        if simulating():
            return 0
        return _shared_stream()

    def asarray(self, a: np.ndarray) -> Any:
        from numba import cuda

        return cuda.to_device(np.ascontiguousarray(a), stream=self._stream())

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        from numba import cuda

        return cuda.device_array(shape, dtype=dtype, stream=self._stream())

    def poison(self, a: Any) -> None:
        # A host NaN array copied over: works on a GPU and in the simulator alike, and is never timed.
        a.copy_to_device(np.full(a.shape, np.nan, dtype=a.dtype), stream=self._stream())

    def to_host(self, a: Any) -> np.ndarray:
        stream = self._stream()
        host = a.copy_to_host(stream=stream)
        if not isinstance(stream, int):
            stream.synchronize()
        return host

    def synchronize(self) -> None:
        from numba import cuda

        cuda.synchronize()

    def free_bytes(self) -> int | None:
        if simulating():
            return None
        from numba import cuda

        return int(cuda.current_context().get_memory_info().free)


@functools.cache
def _shared_stream() -> Any:
    from numba import cuda

    from suite.gpu import driver as cuda_driver

    return cuda.external_stream(cuda_driver.shared_stream())


class Numba(Backend):
    name = "numba"
    options = (Option("block", "threads per block of the CUDA kernels", 256, low=32, high=1024, step=32),)

    def copies(self, device: str, n: int, stream: int | None) -> list[Copy]:
        """On the CPU: the ordinary-store copy the CPU ceiling is held to, and the memcpy loop."""
        from backends.numba.copies import cpu_copies

        return cpu_copies(n) if device == "cpu" else []


BACKEND = register_backend(Numba(NumbaCPU(), NumbaCUDA()))
