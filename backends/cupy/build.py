"""Turn CUDA C source into a CuPy kernel on a GPU, or into a compiled-only stand-in for sm_90 without one.

CuPy's own compile helpers query the device, so without a GPU the source goes through the low-level
`cupy.cuda.nvrtc` bindings instead, with ptxas's verbose log parsed for registers and spills. That keeps
every kernel honest on a CPU-only machine: it must compile for the real target, and its resource use is on
record. Builds are cached by (source, name, options), so the unfused chain compiles each op once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backends.cupy import TARGET, cupy
from suite.core.targets import NATIVE, NotRunnable
from suite.gpu import resources
from suite.gpu.ptxas import KernelResources, parse_ptxas

ARCH = "sm_90"
NVRTC_OPTIONS = (f"-arch={ARCH}", "-Xptxas=-v", "-std=c++17")


@dataclass(frozen=True)
class CompiledOnly:
    """A kernel compiled for sm_90 that this machine cannot run; calling it raises NotRunnable."""

    name: str
    cubin: bytes
    log: str
    resources: KernelResources

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        r = self.resources
        raise NotRunnable(
            f"compiled for {ARCH} through NVRTC ({r.registers} registers, {r.spill_bytes} spill bytes); "
            "no GPU to run it"
        )


def build(
    source: str, name: str, options: Sequence[str] = (), threads: int | None = None, dynamic_smem: int = 0
) -> Any:
    """The kernel `name` of `source`: a compiled `cupy.RawKernel` on a GPU, else a `CompiledOnly`.

    With `threads` (the block size it is launched with) the kernel is recorded for the resource report
    (`suite.gpu.resources`), with `dynamic_smem` bytes of dynamic shared memory per block.
    """
    kernel = _build(source, name, tuple(options))
    if threads is not None:
        resources.record_cupy(source, name, tuple(options), threads, live=kernel, dynamic_smem=dynamic_smem)
    return kernel


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
    resources = parse_ptxas(log).get(name)
    if resources is None:
        raise RuntimeError(f"ptxas reported no entry function '{name}' (is it extern \"C\"?):\n{log}")
    return CompiledOnly(name, cubin, log, resources)


def _log(nvrtc: Any, program: Any) -> str:
    return nvrtc.getProgramLog(program).rstrip("\x00").strip()
