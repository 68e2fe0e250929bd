"""Turn CUDA C source into a CuPy kernel on a GPU, or into a compiled-only stand-in for sm_90 without one.

CuPy's own compile helpers query the device, so without a GPU the source goes through the low-level
`cupy.cuda.nvrtc` bindings instead, with ptxas's verbose log kept for the resource report. That keeps every
kernel honest on a CPU-only machine: it must compile for the real target, and its resource use is on record.
Builds are cached by (source, name, options), so the unfused chain compiles each op once.

A kernel built with its block size is recorded for the resource report (`record_cupy`): its recipe is the
source itself, which `Cupy.compile` compiles again through NVRTC, in this process (NVRTC needs no device).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backends.cupy import TARGET, cupy
from suite.core import backend as protocol
from suite.core.backend import Build
from suite.core.kernelspec import KernelSpec, active, guarded
from suite.core.targets import NATIVE, NotRunnable

ARCH = f"sm_{protocol.ARCH[0]}{protocol.ARCH[1]}"
NVRTC_OPTIONS = (f"-arch={ARCH}", "-Xptxas=-v", "-std=c++17")
ASSEMBLER = "NVRTC -Xptxas=-v"


@dataclass(frozen=True)
class CompiledOnly:
    """A kernel compiled for sm_90 that this machine cannot run; calling it raises NotRunnable.

    `log` is ptxas's verbose log of the build (its registers and spills are in the row's columns)."""

    name: str
    cubin: bytes
    log: str

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise NotRunnable(f"compiled for {ARCH} through NVRTC; no GPU to run it")


def build(
    source: str, name: str, options: Sequence[str] = (), threads: int | None = None, dynamic_smem: int = 0
) -> Any:
    """The kernel `name` of `source`: a compiled `cupy.RawKernel` on a GPU, else a `CompiledOnly`.

    With `threads` (the block size it is launched with) the kernel is recorded for the resource report
    (`record_cupy`), with `dynamic_smem` bytes of dynamic shared memory per block.
    """
    kernel = _build(source, name, tuple(options))
    if threads is not None:
        record_cupy(source, name, tuple(options), threads, live=kernel, dynamic_smem=dynamic_smem)
    return kernel


def record_cupy(
    source: str,
    kernel: str,
    options: Sequence[str],
    threads: int,
    *,
    name: str | None = None,
    live: Any = None,
    dynamic_smem: int = 0,
) -> None:
    """Record a CuPy RawKernel: recipe fields `source`, `kernel` (the extern "C" name) and `options` (NVRTC
    options besides -arch and -Xptxas=-v). `live` is read for its attributes where it is a loaded RawKernel."""
    if not active():
        return

    def spec() -> KernelSpec:
        recipe = (("source", source), ("kernel", kernel), ("options", tuple(str(o) for o in options)))
        live_kernel = live if live is not None and hasattr(live, "attributes") else None
        return KernelSpec("cupy", name or kernel, int(threads), recipe, int(dynamic_smem), live=live_kernel)

    guarded("cupy", name or kernel, spec)


def compile_recipe(recipe: Any) -> Build:
    """The ptxas log of a recorded kernel's NVRTC build (`Cupy.compile`)."""
    kernel = compile_sm90(recipe["source"], recipe["kernel"], tuple(recipe.get("options", ())))
    return Build(kernel.name, log=kernel.log, assembler=ASSEMBLER)


@functools.cache
def _build(source: str, name: str, options: tuple[str, ...]) -> Any:
    if TARGET.probe().mode != NATIVE:
        return compile_sm90(source, name, options)
    kernel = cupy.RawKernel(source, name, options=options)
    kernel.compile()  # now, not in the first timed launch
    return kernel


@functools.cache
def compile_sm90(source: str, name: str, options: tuple[str, ...] = ()) -> CompiledOnly:
    """Compile through NVRTC for sm_90 (no device needed); raise RuntimeError with NVRTC's log on failure."""
    nvrtc = cupy.cuda.nvrtc
    program = nvrtc.createProgram(source, f"{name}.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(program, [*NVRTC_OPTIONS, *options])
        except nvrtc.NVRTCError as exc:
            raise RuntimeError(f"NVRTC cannot compile {name}: {_log(nvrtc, program)}") from exc
        log, cubin = _log(nvrtc, program), nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)
    # A name mangled by C++ linkage would not be found at launch; say so at build time.
    if f"entry function '{name}'" not in log:
        raise RuntimeError(f"ptxas reported no entry function '{name}' (is it extern \"C\"?):\n{log}")
    return CompiledOnly(name, cubin, log)


def _log(nvrtc: Any, program: Any) -> str:
    return nvrtc.getProgramLog(program).rstrip("\x00").strip()
