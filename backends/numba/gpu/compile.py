"""Compile Numba CUDA kernels to PTX for sm_90 (H100/H200) on a machine without a GPU, to check them there.

Needs a process where the simulator is off (NUMBA_ENABLE_CUDASIM unset): the simulator has no compiler.
numba-cuda 0.30 compiles the device functions a kernel calls (our `register_jitable` ops) for the current
device's compute capability even under `compile_ptx(cc=...)`, which asks the driver and fails without a GPU;
so, for the duration of the compile only, the current device is stood in for by one of the requested `cc`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any
from unittest import mock

SM90 = (9, 0)


def compile_ptx(pyfunc: Callable[..., None], signature: str, cc: tuple[int, int] = SM90, **options: Any) -> str:
    """PTX of the kernel `pyfunc` (a plain Python function) for `signature`, e.g. "void(float32[::1])".

    `options` go to `numba.cuda.compile_ptx` (fastmath, lineinfo, ...)."""
    import numba.cuda.dispatcher as dispatcher
    from numba import cuda

    device = SimpleNamespace(compute_capability=cc)
    with mock.patch.object(dispatcher, "get_current_device", lambda: device):
        ptx, _ = cuda.compile_ptx(pyfunc, signature, cc=cc, **options)
    return ptx


def compile_kernels(kernels: dict[str, tuple[Callable[..., None], str]], cc: tuple[int, int] = SM90) -> dict[str, str]:
    """name -> PTX for every (Python function, signature) of a module's `kernel_sources(...)`."""
    return {name: compile_ptx(fn, sig, cc) for name, (fn, sig) in kernels.items()}
