"""Attributes read from kernels loaded on a GPU, checked here on stand-ins with each library's attribute names.

On a GPU every recorded kernel carries its loaded handle (`KernelSpec.live`); the report adds what the driver
says next to the sm_90 build, and falls back to it when the static compile fails. The stand-ins follow the
documented shapes: Triton's CompiledKernel (n_regs, n_spills in 4-byte words, metadata.shared, handles loaded
lazily by _init_handles), CuPy's RawKernel.attributes dict, Numba's compiled _Kernel properties.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from suite.core.targets import cuda_device_count
from suite.gpu import resources
from suite.gpu.occupancy import SM90, occupancy
from suite.gpu.resources import KernelSpec


class TritonKernel:
    """A CompiledKernel before its first launch: the attributes exist once _init_handles has run."""

    def __init__(self) -> None:
        self.metadata = SimpleNamespace(shared=1024)

    def _init_handles(self) -> None:
        self.n_regs, self.n_spills = 96, 6


CUPY = SimpleNamespace(attributes={"num_regs": 40, "local_size_bytes": 0, "shared_size_bytes": 128,
                                   "max_threads_per_block": 1024, "const_size_bytes": 0})  # fmt: skip
NUMBA = SimpleNamespace(regs_per_thread=72, local_mem_per_thread=16, shared_mem_per_block=2048,
                        max_threads_per_block=768)  # fmt: skip


def _spec(backend: str, live: object, threads: int = 256, dynamic_smem: int = 0) -> KernelSpec:
    return KernelSpec(backend, f"{backend}_kernel", threads, (("kernel", "k"),), dynamic_smem, live=live)


@pytest.fixture
def no_static(monkeypatch):
    def fail(spec: KernelSpec) -> dict:
        raise RuntimeError("ptxas not found")

    monkeypatch.setattr(resources, "compiled_resources", fail)


@pytest.mark.parametrize(
    ("backend", "live", "expected"),
    [
        ("triton", TritonKernel(), {"regs": 96, "local_bytes": 24, "smem_bytes": 1024}),
        ("cupy", CUPY, {"regs": 40, "local_bytes": 0, "smem_bytes": 128, "max_threads_per_block": 1024}),
        ("numba", NUMBA, {"regs": 72, "local_bytes": 16, "smem_bytes": 2048, "max_threads_per_block": 768}),
    ],
)
def test_loaded_attributes_map_each_library(backend: str, live: object, expected: dict) -> None:
    assert resources.loaded_attributes(_spec(backend, live)) == expected


def test_without_a_static_build_the_loaded_kernel_gives_the_numbers(no_static) -> None:
    (k,) = resources.analyse([_spec("numba", NUMBA, threads=256, dynamic_smem=4096)])
    assert k["source"] == "loaded kernel" and k["error"] == "RuntimeError: ptxas not found"
    assert k["regs"] == 72 and k["local_bytes"] == 16 and k["smem_bytes"] == 2048 + 4096
    assert k["spill_store_bytes"] is None  # the driver reports local memory, not spill traffic
    assert k["occupancy"] == round(occupancy(256, 72, 6144, SM90).fraction, 4)


def test_static_numbers_stay_and_the_loaded_ones_ride_along(monkeypatch) -> None:
    static = {"registers": 38, "spill_store_bytes": 0, "spill_load_bytes": 0, "stack_bytes": 0, "smem_bytes": 128,
              "assembler": "NVRTC -Xptxas=-v"}  # fmt: skip
    monkeypatch.setattr(resources, "compiled_resources", lambda spec: static)
    (k,) = resources.analyse([_spec("cupy", CUPY)])
    assert k["regs"] == 38 and k["source"] == "sm_90 (NVRTC -Xptxas=-v)"
    assert k["loaded"]["regs"] == 40  # the GPU's own build may differ from sm_90's: both are kept


def test_a_failing_loaded_kernel_is_reported_not_raised(no_static) -> None:
    (k,) = resources.analyse([_spec("cupy", SimpleNamespace(attributes={}))])
    assert k["loaded_error"].startswith("KeyError") and "regs" not in k


@pytest.mark.skipif(cuda_device_count() > 0, reason="a GPU is here: a stream handle is honoured")
def test_without_a_gpu_no_backend_has_a_stream_to_honour() -> None:
    """Launches enter the backend's stream context; with no GPU (or no handle) it is a no-op for every backend."""
    import contextlib

    from backends.numba import stream_arg
    from suite.core.backend import BACKENDS
    from suite.core.registry import discover

    discover()
    for name in ("triton", "cupy", "numba", "torch", "numpy"):
        assert BACKENDS[name].launch_stream(None) is contextlib.nullcontext, name
        assert BACKENDS[name].launch_stream(12345) is contextlib.nullcontext, name  # not native here
    assert stream_arg(None) == 0 and stream_arg(12345) == 0  # Numba's default stream
