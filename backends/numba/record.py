"""Recording a Numba CUDA kernel for the resource report: the factory that rebuilds it and its argument types.

The report compiles each kernel again for sm_90 in another process (`Numba.compile`), which rebuilds it from a
module-level factory and compiles it for the argument types the launch had. Kernel modules call `record_numba`
when they compile the kernel for a launch's arrays, with the compiled kernel on a GPU (read for its attributes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from suite.core.kernelspec import KernelSpec, active, guarded, pairs
from suite.core.kernelspec import factory as recorded_factory


def numba_arg_type(value: Any) -> str:
    """A Numba signature type for a launch argument: arrays by dtype, rank and layout; Python scalars."""
    if isinstance(value, str):
        return value
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        ndim = len(value.shape)
        if ndim == 0:
            return str(value.dtype)
        flags = getattr(value, "flags", None)
        contiguous = True
        if flags is not None:
            with contextlib.suppress(Exception):
                contiguous = bool(flags["C_CONTIGUOUS"])
        dims = [":"] * ndim
        if contiguous:
            dims[-1] = "::1"
        return f"{value.dtype}[{', '.join(dims)}]"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    raise TypeError(f"cannot derive a Numba type for {type(value).__name__}")


def record_numba(
    factory: Sequence[Any],
    arg_types: Sequence[Any],
    threads: int,
    *,
    name: str | None = None,
    compiled: Any = None,
    dynamic_smem: int = 0,
    **options: Any,
) -> None:
    """Record a Numba CUDA kernel: `factory` = (module, attribute, args) gives its Python function or
    `@cuda.jit` dispatcher; `arg_types` are Numba type strings ("float32[::1]") or the launch's arrays and
    scalars. `compiled` is the dispatcher's compiled kernel for these types on a GPU (`dispatcher.compile(sig)`),
    `options` go to `compile_ptx` (fastmath, lineinfo, ...; max_registers to ptxas)."""
    if not active():
        return
    f = recorded_factory(factory)
    shown = name or (f"{f[1]}{f[2]!r}" if f[2] is not None else f[1])

    def build() -> KernelSpec:
        types = tuple(numba_arg_type(a) for a in arg_types)
        recipe = (("factory", f), ("arg_types", types), ("options", pairs(sorted(options.items()))))
        return KernelSpec("numba", shown, int(threads), recipe, int(dynamic_smem), live=compiled)

    guarded("numba", shown, build)
