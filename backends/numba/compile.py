"""Compiling Numba CUDA kernels to PTX for sm_90 (H100/H200) on a machine without a GPU, to check and measure them.

Needs a process where the simulator is off (NUMBA_ENABLE_CUDASIM unset): the simulator has no compiler; the
resource report compiles here through `Numba.compile` in such a process (`Numba.compile_isolated`), and the
compile tests in a subprocess of their own. numba-cuda 0.30 compiles the device functions a kernel calls (our
`register_jitable` ops) for the current device's compute capability even under `compile_ptx(cc=...)`, which
asks the driver and fails without a GPU; so, for the duration of the compile only, the current device is stood
in for by one of the requested `cc`.

The PTX goes to the suite to assemble, through nvJitLink first: numba-cuda writes a newer PTX ISA than an
older ptxas may read. Numba declares `cuda.shared.array`s at module scope, which nvJitLink's log does not count
against the kernel, so the Build asks for them to be counted from the PTX.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any
from unittest import mock

from suite.core.backend import ARCH, Build
from suite.core.kernelspec import resolve_factory

_OPTIONS = ("debug", "lineinfo", "fastmath", "opt", "forceinline", "launch_bounds")
"""The dispatcher's target options that change the PTX `compile_ptx` writes."""


def compile_ptx(pyfunc: Callable[..., None], signature: str, cc: tuple[int, int] = ARCH, **options: Any) -> str:
    """PTX of the kernel `pyfunc` (a plain Python function) for `signature`, e.g. "void(float32[::1])".

    `options` go to `numba.cuda.compile_ptx` (fastmath, lineinfo, ...)."""
    import numba.cuda.dispatcher as dispatcher
    from numba import cuda

    device = SimpleNamespace(compute_capability=cc)
    with mock.patch.object(dispatcher, "get_current_device", lambda: device):
        ptx, _ = cuda.compile_ptx(pyfunc, signature, cc=cc, **options)
    return ptx


def compile_kernels(kernels: dict[str, tuple[Callable[..., None], str]], cc: tuple[int, int] = ARCH) -> dict[str, str]:
    """name -> PTX for every (Python function, signature) of a module's `kernel_sources(...)`."""
    return {name: compile_ptx(fn, sig, cc) for name, (fn, sig) in kernels.items()}


def build(recipe: Mapping[str, Any]) -> Build:
    """The PTX of the kernel `recipe` describes (fields: see `backends.numba.record`), with the options its
    dispatcher was made with and those recorded (max_registers goes to the assembler)."""
    obj = resolve_factory(recipe["factory"])
    pyfunc = getattr(obj, "py_func", obj)
    target_options = dict(getattr(obj, "targetoptions", None) or {})
    options = {k: target_options[k] for k in _OPTIONS if k in target_options}
    options.update(dict(recipe["options"]))
    max_registers = options.pop("max_registers", None) or target_options.get("max_registers")
    ptx = compile_ptx(pyfunc, f"void({', '.join(recipe['arg_types'])})", ARCH, **options)
    entry = re.search(r"\.entry\s+([\w$.]+)", ptx)
    return Build(
        entry.group(1) if entry else None, ptx=ptx, prefer="nvjitlink", max_registers=max_registers, module_shared=True
    )
