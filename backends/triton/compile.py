"""Compiling a recorded Triton kernel for sm_90 without a GPU, as Triton itself would build it for an H100/H200.

`triton.compile` with `GPUTarget("cuda", 90, 32)` gives the PTX; the suite assembles it with the ptxas Triton
ships and the options its `make_cubin` passes, so the registers reported are those of the cubin Triton would
load. `metadata.shared` (the shared memory Triton launches the kernel with) adds to ptxas's static count.
Runs only where the interpreter is off (`Triton.compile_isolated`): it replaces `triton.jit` on import.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Mapping
from typing import Any

import triton
from triton.backends.compiler import GPUTarget

from suite.core.backend import ARCH, Build
from suite.core.kernelspec import resolve_factory


def ptxas_path(capability: int) -> str:
    """The ptxas Triton assembles with for `capability` (e.g. 90), across the Triton versions' APIs."""
    from triton.backends.nvidia import compiler

    get = getattr(compiler, "get_ptxas", None)
    if get is None:
        import triton.knobs as knobs

        return knobs.nvidia.ptxas.path
    try:
        tool = get(capability)
    except TypeError:  # Triton versions whose get_ptxas takes no arch
        tool = get()
    return tool[0] if isinstance(tool, tuple) else tool.path  # (path, version) in older Triton


def _ptxas_options(meta: Any) -> tuple[str, ...]:
    """What Triton's make_cubin passes to ptxas, so the registers are those of the cubin Triton built."""
    options = [] if getattr(meta, "enable_fp_fusion", True) else ["--fmad=false"]
    options += str(getattr(meta, "ptx_options", "") or "").split()
    try:
        from triton.backends.nvidia.compiler import CUDABackend

        if "--regAllocOptLevel=2" in inspect.getsource(CUDABackend.make_cubin):
            options.append("--regAllocOptLevel=2")
    except (ImportError, OSError, TypeError):
        pass
    return tuple(options)


def build(recipe: Mapping[str, Any]) -> Build:
    """The PTX of the kernel `recipe` describes (fields: see `backends.triton.record`)."""
    fn = resolve_factory(recipe["factory"])
    signature = {name: kind for name, kind in recipe["signature"]}
    constexprs = dict(recipe["constexprs"])
    attrs = {(i,): [["tt.divisibility", 16]] for i in recipe["divisible"]}
    options = dict(recipe["options"])
    source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    capability = ARCH[0] * 10 + ARCH[1]
    kernel = triton.compile(source, target=GPUTarget("cuda", capability, 32), options=options)
    meta = kernel.metadata
    ptxas = None
    with contextlib.suppress(Exception):  # then nvJitLink assembles it, or another ptxas
        ptxas = ptxas_path(capability)
    return Build(
        getattr(meta, "name", None),
        ptx=kernel.asm["ptx"],
        extra_smem=int(getattr(meta, "shared", 0) or 0),
        prefer="ptxas",
        ptxas=ptxas,
        ptxas_options=_ptxas_options(meta),
    )
