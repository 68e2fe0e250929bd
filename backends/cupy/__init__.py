"""CuPy backend: its target (CuPy arrays on a GPU; NumPy arrays where it can only compile) and its kernels.

Without a GPU the kernels' CUDA sources are still compiled for sm_90 through NVRTC, which needs no device:
that is `compile` mode, where entries build (and report registers and spills) but launchers raise
NotRunnable. The probe is cached: it may compile a kernel, and the answer cannot change within a run.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from suite.core.backend import Backend, Build, Copy, Option, register_backend
from suite.core.install import CUDA_STACK
from suite.core.targets import (
    COMPILE,
    NATIVE,
    UNAVAILABLE,
    Availability,
    Target,
    cuda_device_count,
)
from suite.kit.launch import MAX_ITEMS
from suite.kit.launch_shape import NOMINAL, Device

try:
    import cupy
except ImportError:  # the target still registers, and says why it cannot run
    cupy = None

_PROBE_SOURCE = 'extern "C" __global__ void probe(float* y) { y[threadIdx.x] = 1.0f; }'


@functools.cache
def _probe() -> Availability:
    if cupy is None:
        return Availability(UNAVAILABLE, f"cupy is not installed ({CUDA_STACK})")
    no_gpu = "no GPU"
    if cuda_device_count() > 0:
        try:  # what the kernels need: NVRTC through CuPy, a launch, a copy back
            y = cupy.zeros(32, dtype=np.float32)
            cupy.RawKernel(_PROBE_SOURCE, "probe")((1,), (32,), (y,))
            if float(y[0].get()) != 1.0:
                raise RuntimeError("a trivial kernel did not write its output")
            name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()
            return Availability(NATIVE, f"CuPy {cupy.__version__} on {name}")
        except Exception as exc:  # a GPU CuPy cannot use: fall back to compiling, and say why
            no_gpu = f"CuPy cannot use the GPU ({type(exc).__name__}: {exc})"
    from backends.cupy.build import compile_sm90

    try:
        compile_sm90(_PROBE_SOURCE, "probe")
    except Exception as exc:
        return Availability(UNAVAILABLE, f"{no_gpu}, and NVRTC cannot compile for sm_90 ({exc})")
    return Availability(COMPILE, f"{no_gpu}: CUDA sources compiled for sm_90 through NVRTC, not run")


def sm_device() -> Device:
    """SMs and resident threads per SM of the GPU CuPy runs on; the nominal sm_90 where it only compiles."""
    if _probe().mode != NATIVE:
        return NOMINAL
    gpu = cupy.cuda.Device()
    attrs = gpu.attributes
    name = cupy.cuda.runtime.getDeviceProperties(gpu.id)["name"].decode()
    return Device(int(attrs["MultiProcessorCount"]), int(attrs["MaxThreadsPerMultiProcessor"]), name)


class CupyTarget(Target):
    backend = "cupy"
    device = "cuda"
    refused_dtypes = {"bfloat16": "the CuPy kernels are written for float and __half storage; no __nv_bfloat16 build"}

    def probe(self) -> Availability:
        return _probe()

    @property
    def on_gpu(self) -> bool:
        return self.probe().mode == NATIVE

    def asarray(self, a: np.ndarray) -> Any:
        return cupy.asarray(a) if self.on_gpu else super().asarray(a)

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return cupy.empty(shape, dtype=dtype) if self.on_gpu else super().empty(shape, dtype)

    def to_host(self, a: Any) -> np.ndarray:
        return cupy.asnumpy(a) if self.on_gpu else super().to_host(a)

    def synchronize(self) -> None:
        if self.on_gpu:
            cupy.cuda.Device().synchronize()

    def free_bytes(self) -> int | None:
        return cupy.cuda.runtime.memGetInfo()[0] if self.on_gpu else None

    def release(self) -> None:
        """CuPy's pooled device blocks and pinned host blocks back (free_all_blocks), where CuPy has run on a GPU
        in this process: a probe not yet made means its pools are empty, and making it here would compile."""
        if cupy is None or _probe.cache_info().currsize == 0 or not self.on_gpu:
            return
        for pool in (cupy.get_default_memory_pool, cupy.get_default_pinned_memory_pool):
            with contextlib.suppress(Exception):
                pool().free_all_blocks()


class Cupy(Backend):
    name = "cupy"
    packages = ("cupy-cuda13x", "cupy-cuda12x", "cupy", "nvidia-cuda-nvrtc")
    options = (
        Option(
            "block",
            "threads per block (default: from the shape, suite.kit.launch_shape)",
            None,
            low=32,
            high=1024,
            step=32,
        ),
        Option("max_items", "row values one normalization thread may hold", MAX_ITEMS, low=1, high=512),
    )

    def compile(self, recipe: Mapping[str, Any]) -> Build:
        """NVRTC needs no device and no process of its own: the build runs here, with ptxas's log kept."""
        from backends.cupy.build import compile_recipe

        return compile_recipe(recipe)

    def loaded_attributes(self, live: Any) -> dict[str, int]:
        """What the driver reports for the loaded function (`RawKernel.attributes`)."""
        a = live.attributes
        return {
            "regs": int(a["num_regs"]),
            "local_bytes": int(a["local_size_bytes"]),
            "smem_bytes": int(a["shared_size_bytes"]),
            "max_threads_per_block": int(a["max_threads_per_block"]),
        }

    def launch_stream(self, handle: int | None) -> Callable[[], contextlib.AbstractContextManager]:
        """The suite's shared stream as CuPy's current stream (entered per launch); nothing to honour without a GPU."""
        if handle is None or TARGET.probe().mode != NATIVE:
            return contextlib.nullcontext
        with warnings.catch_warnings():  # CuPy 14's replacement, Stream.from_external, takes no raw handle
            warnings.simplefilter("ignore", DeprecationWarning)
            external = cupy.cuda.ExternalStream(int(handle))
        return lambda: external

    def copies(self, device: str, n: int, stream: int | None) -> list[Copy]:
        """A device-to-device copy on the shared stream, where CuPy runs on the GPU."""
        if device != "cuda" or stream is None or _probe().mode != NATIVE:
            return []
        src, dst, context = cupy.ones(n, cupy.float32), cupy.empty(n, cupy.float32), self.launch_stream(stream)

        def copy() -> None:
            with context():
                dst[...] = src

        return [Copy("cupy copy", copy)]


TARGET = CupyTarget()
BACKEND = register_backend(Cupy(TARGET))
