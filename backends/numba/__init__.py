"""The Numba backend: a CPU target (host NumPy arrays, timed for real) and a CUDA target.

This module imports `numba.cuda` only when the CUDA target is probed or used, and the kernel modules import
it under a guard: numba-cuda is an optional dependency, and where it is missing only the CUDA target is
unavailable. `NUMBA_ENABLE_CUDASIM=1` (set by the suite on
machines without a GPU, before any backend is imported) turns the CUDA target into the simulator: numerics
only, never timed.

A Numba launch takes its stream as an argument (`dispatcher[grid, block, stream]`), so `launch_stream`'s context
gives the stream object and kernel modules take it once, when they build (`stream_arg`).

On an AVX-512 host the CPU kernels are built at the full vector width (`full_width`: LLVM's preference for
256-bit vectors off), set on this package's import.

For the resource report, kernel modules record each kernel (`backends.numba.record`); the report compiles it for
sm_90 (`backends.numba.compile`) in a process where the simulator is off.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from backends.numba.full_width import use_full_width
from suite.core.backend import Backend, Build, Copy, Option, register_backend
from suite.core.install import CUDA_STACK
from suite.core.targets import EMULATED, NATIVE, UNAVAILABLE, Availability, Target, cuda_device_count

use_full_width()  # before Numba builds its first CPU function (`backends.numba.full_width`)


def simulating() -> bool:
    """Whether `numba.cuda` is (or will be, once imported) the CUDA simulator."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


NO_BF16 = {"bfloat16": "Numba has no bfloat16 array type (NumPy's comes from ml_dtypes, which Numba cannot type)"}


class NumbaCPU(Target):
    backend = "numba"
    device = "cpu"
    refused_dtypes = NO_BF16

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
    refused_dtypes = NO_BF16
    used = False
    """Whether this process made device arrays through the target: only then may `numba.cuda` hold deferred frees."""

    def probe(self) -> Availability:
        if importlib.util.find_spec("numba_cuda") is None:
            return Availability(UNAVAILABLE, f"numba-cuda is not installed ({CUDA_STACK})")
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
        if simulating() or self.stream is None:
            return 0
        return _external(self.stream)

    def asarray(self, a: np.ndarray) -> Any:
        from numba import cuda

        self.used = True
        return cuda.to_device(np.ascontiguousarray(a), stream=self._stream())

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        from numba import cuda

        self.used = True
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

    def release(self) -> None:
        """Numba's deferred deallocations carried out now: freed device arrays wait in a queue until it fills,
        the memory manager's (device memory) and the context's (streams, events, modules). Only where the target
        made device arrays on a GPU: `current_context()` would otherwise create a context to release nothing."""
        if simulating() or not self.used:
            return
        with contextlib.suppress(Exception):
            from numba import cuda

            context = cuda.current_context()
            pending = getattr(context.memory_manager, "deallocations", None)  # an EMM plugin may keep none
            if pending is not None:
                pending.clear()
            context.deallocations.clear()


@functools.cache
def _external(handle: int) -> Any:
    """`handle` as a Numba stream, made once: every kernel and copy of the process shares it."""
    from numba import cuda

    return cuda.external_stream(handle)


class Numba(Backend):
    name = "numba"
    packages = ("numba", "numba-cuda")
    options = (
        Option(
            "block",
            "threads per block of the CUDA kernels (default: from the shape, suite.kit.launch_shape)",
            None,
            low=32,
            high=1024,
            step=32,
        ),
        Option(
            "math",
            "tanh and exp of the CPU elementwise kernels: fast (vectorisable float32) or libm (scalar calls)",
            "fast",
            kind=str,
            choices=("fast", "libm"),
        ),
    )
    compile_isolated = True

    def compile(self, recipe: Mapping[str, Any]) -> Build:
        from backends.numba.compile import build

        return build(recipe)

    def loaded_attributes(self, live: Any) -> dict[str, int]:
        """The compiled kernel's regs_per_thread, local_mem_per_thread, shared_mem_per_block, max_threads_per_block."""
        return {
            "regs": int(live.regs_per_thread),
            "local_bytes": int(live.local_mem_per_thread),
            "smem_bytes": int(live.shared_mem_per_block),
            "max_threads_per_block": int(live.max_threads_per_block),
        }

    def launch_stream(self, handle: int | None) -> Callable[[], contextlib.AbstractContextManager]:
        """A context giving the shared stream as a Numba stream on a GPU; the simulator has no streams."""
        if simulating() or not isinstance(handle, int) or isinstance(handle, bool):
            return contextlib.nullcontext
        return functools.partial(contextlib.nullcontext, _external(handle))

    def copies(self, device: str, n: int, stream: int | None) -> list[Copy]:
        """On the CPU: the ordinary-store copy the CPU ceiling is held to, and the memcpy loop."""
        from backends.numba.copies import cpu_copies

        return cpu_copies(n) if device == "cpu" else []


BACKEND = register_backend(Numba(NumbaCPU(), NumbaCUDA()))


def stream_arg(handle: int | None) -> Any:
    """What a launch passes as its stream for the suite's stream `handle`: the shared stream, or 0 (the default
    stream) where there is none to honour."""
    with BACKEND.launch_stream(handle)() as stream:
        return 0 if stream is None else stream
