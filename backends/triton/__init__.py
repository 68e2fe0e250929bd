"""Triton backend: its target (torch tensors, on the GPU or, in the interpreter, on the CPU) and its kernels.

The interpreter is checked first: Triton reads TRITON_INTERPRET when a kernel is decorated, so with it set the
kernels are interpreted even on a machine with a GPU, and timing them would time NumPy. Launches go to the
stream given in opts["stream"] (a raw CUDA handle) by making it torch's current stream, which is the stream
Triton launches on (`launch_stream`).

Launch settings left unset are chosen per shape (`backends.triton.launch`) and recorded in each launcher's notes.
For the resource report, kernel modules record each kernel at warmup (`backends.triton.record`); the report
compiles it for sm_90 (`backends.triton.compile`) in a process where the interpreter is off.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from backends.torch.bridge import to_numpy, to_torch, torch_dtype
from backends.triton import interpreter_dot
from suite.core.backend import Backend, Build, Option, register_backend
from suite.core.targets import (
    EMULATED,
    NATIVE,
    UNAVAILABLE,
    Availability,
    Target,
    cuda_device_count,
)


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


if interpreting():
    interpreter_dot.install()  # bfloat16 tl.dot multiplied as numbers, not bit patterns


class TritonTarget(Target):
    backend = "triton"
    device = "cuda"

    def probe(self) -> Availability:
        if interpreting():
            return Availability(EMULATED, "Triton interpreter: numerics only, not timed")
        if cuda_device_count() > 0 and torch.cuda.is_available():
            return Availability(NATIVE, f"Triton on {torch.cuda.get_device_name()}")
        if cuda_device_count() > 0:
            return Availability(UNAVAILABLE, f"a GPU is present but torch {torch.__version__} has no CUDA")
        return Availability(UNAVAILABLE, "no CUDA GPU; TRITON_INTERPRET=1 would run the kernels interpreted")

    @property
    def torch_device(self) -> str:
        return "cuda" if self.probe().mode == NATIVE else "cpu"

    def asarray(self, a: np.ndarray) -> torch.Tensor:
        return to_torch(a, self.torch_device)

    def empty(self, shape: tuple[int, ...], dtype: str) -> torch.Tensor:
        return torch.empty(shape, dtype=torch_dtype(dtype), device=self.torch_device)

    def poison(self, a: Any) -> None:
        a.fill_(float("nan"))

    def to_host(self, a: Any) -> np.ndarray:
        return to_numpy(a)

    def synchronize(self) -> None:
        if self.probe().mode == NATIVE:
            torch.cuda.synchronize()

    def free_bytes(self) -> int | None:
        return torch.cuda.mem_get_info()[0] if self.probe().mode == NATIVE else None

    def release(self) -> None:
        """Triton's tensors are torch's: the caching allocator's unused blocks back to the driver, where torch has
        initialised CUDA (the interpreter's tensors live in host memory, and leave it uninitialised)."""
        with contextlib.suppress(Exception):
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()


class Triton(Backend):
    name = "triton"
    packages = ("triton",)
    options = (
        Option(
            "block",
            "elements per program of the elementwise kernels; default: per shape (1024, fewer for a small n)",
            None,
            low=16,
            high=65536,
            power_of_two=True,
        ),
        Option(
            "num_warps",
            "warps per program; default: per shape, each kernel's choice for its tile",
            None,
            low=1,
            high=32,
            power_of_two=True,
        ),
    )
    compile_isolated = True

    def compile(self, recipe: Mapping[str, Any]) -> Build:
        from backends.triton.compile import build

        return build(recipe)

    def loaded_attributes(self, live: Any) -> dict[str, int]:
        """A CompiledKernel's n_regs and n_spills (local memory in 4-byte words), once its handles are loaded."""
        init = getattr(live, "_init_handles", None)
        if callable(init):
            init()
        return {
            "regs": int(live.n_regs),
            "local_bytes": int(live.n_spills) * 4,
            "smem_bytes": int(live.metadata.shared),
        }

    def launch_stream(self, handle: int | None) -> Callable[[], contextlib.AbstractContextManager]:
        """The external stream as torch's current stream; without a GPU there is no stream to honour."""
        if handle is None or TARGET.probe().mode != NATIVE:
            return contextlib.nullcontext
        external = torch.cuda.ExternalStream(int(handle))
        return lambda: torch.cuda.stream(external)

    def toolchain(self) -> dict[str, str]:
        found = super().toolchain()
        found.update({var: os.environ[var] for var in _PTXAS_VARS if os.environ.get(var)})
        return found


_PTXAS_VARS = ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")
"""Where Triton is told to find its ptxas: another ptxas may allocate registers differently."""

TARGET = TritonTarget()
BACKEND = register_backend(Triton(TARGET))
