"""Triton kernels built for sm_90 (H100/H200) without a GPU: what the compile tests' scripts share.

Triton's compiler refuses to run where TRITON_INTERPRET is set, so each compile test runs a script in a
subprocess without it (`support.run_without_emulation`); the scripts import this module for the build itself,
so that every family's kernels are compiled, and their PTX assembled, the same way. Importing it imports Triton:
only those scripts do.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas

TARGET = GPUTarget("cuda", 90, 32)


def aligned(positions: Iterable[int]) -> dict[tuple[int], list[list[Any]]]:
    """Triton's attrs marking the arguments at `positions` 16-byte aligned (pointers) or multiples of 16: what its
    launcher specialises on when a real call passes such values."""
    return {(i,): [["tt.divisibility", 16]] for i in positions}


def compile_sm90(fn: Callable, signature: dict[str, str], constexprs: dict[str, Any] | None = None,
                 options: dict[str, Any] | None = None, attrs: dict | None = None) -> tuple[Any, str]:  # fmt: skip
    """(`fn` compiled for sm_90, the log of `ptxas -v` assembling its PTX for sm_90a: registers, spills, shared
    memory). Raises where either step fails."""
    src = triton.compiler.ASTSource(fn=fn, signature=signature, attrs=attrs, constexprs=constexprs)
    kernel = triton.compile(src, target=TARGET, options=options or {})
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as ptx:
        ptx.write(kernel.asm["ptx"])
        ptx.flush()
        command = [get_ptxas(90).path, "-v", "--gpu-name", "sm_90a", ptx.name, "-o", "/dev/null"]
        log = subprocess.run(command, capture_output=True, text=True, check=True)
    return kernel, log.stdout + log.stderr
