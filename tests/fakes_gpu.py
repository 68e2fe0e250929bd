"""Fake CUDA targets and kernels that fail the way GPU kernels do, for the harness's GPU paths on a CPU.

One fake device with a fixed amount of free memory, shared by two fake libraries: `fakegpu` (the kernels of the
`fake_gpu` scenario, y = 2·x) and `fakepool`, which has no kernels and only parks memory in its pool, as one
library's cache does to the next. The variants misbehave as CUDA kernels do: out of memory at build or at launch
(torch's and Numba's exceptions), a sticky error (an illegal address, a misaligned one) after which every call
on the device fails as it would on a lost context, and a launch that hangs. `fakegpu` records every call made on
it, so that the order of uploads, poison, synchronisation, launch and read-back can be checked.

The targets say `emulated` (host NumPy standing in for a GPU): a native CUDA target would have the run bind the
real driver's shared stream, which a CPU machine has not. Imported in-process by tests/test_gpu_faults.py
(`install`/`uninstall` around its tests, so no other test sees them) and by a worker through
`plugins=[tests.fakes_gpu]`, which installs them on import.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from suite.core.backend import BACKENDS, Backend
from suite.core.registry import REGISTRY, KernelKey
from suite.core.scenario import SCENARIOS, Params
from suite.core.targets import EMULATED, TARGETS, Availability, Target
from tests.fakes import Doubling

BEHAVIOURS = ("good", "oom_build", "oom_launch", "numba_oom", "illegal", "misaligned", "hang")
SCENARIO, BACKEND, POOL = "fake_gpu", "fakegpu", "fakepool"
FOOTPRINT_PER_ELEMENT = 4
"""The fake family's footprint model: x, y and two temporaries, each n elements of the dtype."""
GIB = 2**30
STICKY_NAMES = {700: "CUDA_ERROR_ILLEGAL_ADDRESS", 716: "CUDA_ERROR_MISALIGNED_ADDRESS"}


class OutOfMemoryError(RuntimeError):
    """As torch.OutOfMemoryError (and cupy.cuda.memory.OutOfMemoryError) is named."""


class CudaAPIError(Exception):
    """As numba.cuda.cudadrv.driver.CudaAPIError is made: the driver's CUresult and the call that failed."""

    def __init__(self, code: int, msg: str) -> None:
        self.code, self.msg = code, msg
        super().__init__(code, msg)

    def __str__(self) -> str:
        return f"[{self.code}] {self.msg}"


class Device:
    """The one fake GPU: what is free, what each library parks in its pool, and whether its context is lost."""

    def __init__(self) -> None:
        self.reset()

    def reset(self, free: int = 8 * GIB) -> None:
        self.free = free
        self.parked: dict[str, int] = {}
        self.lost: int | None = None
        """The sticky error code once a kernel hit one: every later call on the device raises it."""

    def check(self, call: str) -> None:
        if self.lost is not None:
            raise CudaAPIError(self.lost, f"Call to {call} results in {STICKY_NAMES[self.lost]}")


DEVICE = Device()


class FakeCudaTarget(Target):
    """Host arrays posing as device arrays on DEVICE, their bytes parked in the target's pool until it releases
    them; every call recorded in `calls`, releases counted."""

    device = "cuda"

    def __init__(self, backend: str) -> None:
        self.backend = backend  # type: ignore[misc]  # the class attribute, per instance: two fake libraries
        self.calls: list[str] = []
        self.releases = 0

    def probe(self) -> Availability:
        return Availability(EMULATED, "host NumPy posing as a GPU")

    def asarray(self, a: np.ndarray) -> Any:
        DEVICE.check("cuMemcpyHtoD")
        self.calls.append("asarray")
        return self._park(np.ascontiguousarray(a).copy())

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        DEVICE.check("cuMemAlloc")
        self.calls.append("empty")
        return self._park(np.empty(shape, dtype=dtype))

    def _park(self, a: np.ndarray) -> np.ndarray:
        """A caching allocator keeps what it handed out once it is freed: counted parked from the start."""
        DEVICE.parked[self.backend] = DEVICE.parked.get(self.backend, 0) + a.nbytes
        return a

    def poison(self, a: Any) -> None:
        self.calls.append("poison")
        a.fill(np.nan)

    def synchronize(self) -> None:
        DEVICE.check("cuCtxSynchronize")
        self.calls.append("synchronize")

    def to_host(self, a: Any) -> np.ndarray:
        DEVICE.check("cuMemcpyDtoH")
        self.calls.append("to_host")
        return np.asarray(a).copy()

    def free_bytes(self) -> int | None:
        return DEVICE.free - sum(DEVICE.parked.values())

    def release(self) -> None:
        self.releases += 1
        DEVICE.parked.pop(self.backend, None)


class FakeGpu(Backend):
    name = BACKEND


class FakePool(Backend):
    name = POOL


class GpuDoubling(Doubling):
    """y = 2·x on the fake GPU (tests.fakes' family); variant names are the fake kernels' behaviours."""

    name = SCENARIO
    variants = BEHAVIOURS
    pairs = ()
    rivals = ()
    presets = {"S": {"n": [64]}, "M": {"n": [1000]}, "L": {"n": [10000]}}

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        return {"x": (params["n"],)}

    def footprint_bytes(self, params: Params, dtype: str, variant: str) -> int | None:
        return FOOTPRINT_PER_ELEMENT * params["n"] * np.dtype(dtype).itemsize


def _fail(behaviour: str) -> None:
    """Raise as the library would for `behaviour`; a sticky error loses the device's context first."""
    if behaviour in ("oom_build", "oom_launch"):
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 8 GiB")
    if behaviour == "numba_oom":
        raise CudaAPIError(2, "Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY")
    if behaviour == "illegal":
        DEVICE.lost = 700
        raise CudaAPIError(700, "Call to cuLaunchKernel results in CUDA_ERROR_ILLEGAL_ADDRESS")
    if behaviour == "misaligned":
        DEVICE.lost = 716
        raise RuntimeError("CUDA error: misaligned address\nCUDA kernel errors might be asynchronously reported")


def _entry(behaviour: str, target: FakeCudaTarget) -> Any:
    def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Any:
        DEVICE.check("cuModuleLoadData")
        target.calls.append("build")
        if behaviour == "oom_build":
            _fail(behaviour)
        x = inputs["x"]

        def launch() -> None:
            DEVICE.check("cuLaunchKernel")
            target.calls.append("launch")
            if behaviour == "hang":
                time.sleep(600)
            _fail(behaviour)
            np.multiply(x, 2, out=out)

        return launch

    return entry


GPU, PARKER = FakeCudaTarget(BACKEND), FakeCudaTarget(POOL)
_BACKENDS = (FakeGpu(GPU), FakePool(PARKER))


def install() -> None:
    """Register the fake scenario, both fake libraries and the kernels (idempotent)."""
    SCENARIOS.setdefault(SCENARIO, GpuDoubling())
    for backend in _BACKENDS:
        BACKENDS.setdefault(backend.name, backend)
        for target in backend.targets.values():
            TARGETS[(target.backend, target.device)] = target
    for behaviour in BEHAVIOURS:
        key = KernelKey(SCENARIO, BACKEND, behaviour, "cuda")
        if REGISTRY.get(key) is None:
            REGISTRY.add(key, _entry(behaviour, GPU))


def uninstall() -> None:
    """Remove what `install` registered, so that tests iterating the registries never see the fakes."""
    SCENARIOS.pop(SCENARIO, None)
    for backend in _BACKENDS:
        BACKENDS.pop(backend.name, None)
        for target in backend.targets.values():
            TARGETS.pop((target.backend, target.device), None)
    for behaviour in BEHAVIOURS:
        REGISTRY.kernels.pop(KernelKey(SCENARIO, BACKEND, behaviour, "cuda"), None)


def reset(free: int = 8 * GIB) -> None:
    """A fresh device, nothing recorded."""
    DEVICE.reset(free)
    for target in (GPU, PARKER):
        target.calls.clear()
        target.releases = 0


install()
