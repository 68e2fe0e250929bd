"""torch as the rival a user would pick instead of hand-written kernels, on the CPU and, where a GPU answers, CUDA.

Three variants per scenario, each checked and timed like every other row on the same inputs:
- `library`: torch's tuned kernel where one exists (layer_norm, rms_norm, softmax, scaled_dot_product_attention,
  matmul / addmm);
- `eager`: the scenario's canonical unfused decomposition as torch ops, one op per kernel, each intermediate
  stored in the case's dtype in a buffer allocated before the launch;
- `compiled`: the same decomposition through torch.compile (Inductor), see `backends.torch.compiler`.

Hand-written fused kernels are only worth their upkeep if they beat what the compiler fuses for free and stand
near the tuned library kernel; these rows put both beside them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from backends.torch.bridge import to_numpy, to_torch
from suite.core.backend import Backend, Copy, Option, register_backend
from suite.core.targets import NATIVE, UNAVAILABLE, Availability, Target, cuda_device_count


class TorchCPU(Target):
    backend, device = "torch", "cpu"

    def probe(self) -> Availability:
        return Availability(NATIVE, f"torch {torch.__version__} on the CPU ({torch.get_num_threads()} threads)")

    def asarray(self, a: np.ndarray) -> Any:
        return to_torch(a)

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return torch.empty(shape, dtype=getattr(torch, dtype))

    def poison(self, a: Any) -> None:
        a.fill_(float("nan"))

    def to_host(self, a: Any) -> np.ndarray:
        return to_numpy(a)


class TorchCUDA(TorchCPU):
    backend, device = "torch", "cuda"

    def probe(self) -> Availability:
        if cuda_device_count() > 0 and torch.cuda.is_available():
            return Availability(NATIVE, f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
        return Availability(UNAVAILABLE, "no CUDA device: torch's GPU kernels cannot run here")

    def asarray(self, a: np.ndarray) -> Any:
        return to_torch(a, "cuda")

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return torch.empty(shape, dtype=getattr(torch, dtype), device="cuda")

    def to_host(self, a: Any) -> np.ndarray:
        return to_numpy(a)

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def free_bytes(self) -> int | None:
        return int(torch.cuda.mem_get_info()[0])

    def release(self) -> None:
        """The caching allocator's unused blocks back to the driver (torch.cuda.empty_cache), where torch has
        initialised CUDA: until then it holds none, and initialising it only to release nothing would cost a
        context."""
        with contextlib.suppress(Exception):
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()


MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""torch.compile's modes: reduce-overhead adds CUDA graphs, max-autotune autotunes matmul templates too."""


class Torch(Backend):
    name = "torch"
    packages = ("torch",)
    options = (
        Option("mode", "torch.compile mode of variant `compiled`", "default", kind=str, choices=MODES),
        Option("dynamic", "compile shape-generic code (true) or each case's exact shapes (false)", False, kind=bool),
    )

    def launch_stream(self, handle: int | None) -> Callable[[], contextlib.AbstractContextManager]:
        """The suite's shared stream as torch's current stream (GPU runs); on the CPU there is none."""
        if handle is None or self.targets["cuda"].probe().mode != NATIVE:
            return contextlib.nullcontext
        external = torch.cuda.ExternalStream(int(handle))
        return lambda: torch.cuda.stream(external)

    def copies(self, device: str, n: int, stream: int | None) -> list[Copy]:
        """`copy_`: on the CPU memcpy underneath (its stores may stream); on a GPU on the shared stream."""
        if device == "cpu":
            src, dst = torch.ones(n), torch.empty(n)
            return [Copy("torch copy_", lambda: dst.copy_(src), streams=True)]
        if self.targets["cuda"].probe().mode != NATIVE or stream is None:
            return []
        src, dst = torch.ones(n, device="cuda"), torch.empty(n, device="cuda")
        context = self.launch_stream(stream)

        def copy() -> None:
            with context():
                dst.copy_(src)

        return [Copy("torch copy_", copy)]


BACKEND = register_backend(Torch(TorchCPU(), TorchCUDA()))


DEVICES = tuple(BACKEND.targets)
"""torch's devices: one entry serves CPU and CUDA tensors alike, since torch dispatches on the tensors' device."""
