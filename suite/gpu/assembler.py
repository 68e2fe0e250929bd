"""From a backend's `Build` to the numbers the report shows: assemble its PTX with ptxas's `-v`, read the log.

Backends hand over PTX or an assembler's log, never numbers, so every kernel's registers, spills, stack and
shared memory come from ptxas's own report, read one way (`suite.gpu.ptxas`). PTX goes through the ptxas the
backend names (the one its runtime assembles with, so the registers are those of the cubin it would load) or
through nvJitLink with `-Xptxas=-v` (for a PTX ISA newer than a given ptxas reads), each the other's fallback.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from suite.core.backend import ARCH, Build
from suite.gpu.ptxas import KernelResources, parse_ptxas


def _ptx_target(ptx: str) -> str:
    found = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.MULTILINE)
    return found.group(1) if found else f"sm_{ARCH[0]}{ARCH[1]}"


def _any_ptxas() -> str:
    """A ptxas of the CUDA toolkit, for PTX whose backend names none: on PATH, else under $CUDA_HOME."""
    found = shutil.which("ptxas")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = Path(home) / "bin" / "ptxas"
    if candidate.exists():
        return str(candidate)
    raise FileNotFoundError("no ptxas on PATH or under $CUDA_HOME/bin")


def _run_ptxas(path: str, ptx: str, arch: str, options: list[str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        command = [path, "-v", *options, f"--gpu-name={arch}", str(src), "-o", str(Path(tmp) / "kernel.cubin")]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(path).name} failed ({proc.returncode}): {log.strip()[-2000:]}")
    return log


def _run_nvjitlink(ptx: str, arch: str, options: list[str]) -> str:
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(len(options) + 2, [f"-arch={arch}", "-Xptxas=-v", *options])
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            nvjitlink.get_error_log(handle, log)
            raise RuntimeError(f"nvJitLink failed: {exc}: {log.decode(errors='replace').strip()[-2000:]}") from exc
        size = nvjitlink.get_info_log_size(handle)
        log = bytearray(size)
        nvjitlink.get_info_log(handle, log)
    finally:
        nvjitlink.destroy(handle)
    # nvJitLink's own summary lines follow ptxas's; only ptxas's are in the format suite.gpu.ptxas reads.
    text = log.decode(errors="replace").rstrip("\x00")
    return "\n".join(line for line in text.splitlines() if line.startswith("ptxas"))


def assemble(
    ptx: str,
    *,
    prefer: str,
    ptxas: str | None = None,
    ptxas_options: list[str] | None = None,
    maxrregcount: int | None = None,
) -> tuple[str, str]:
    """(ptxas -v log, which assembler) for `ptx` on its own .target; tries `prefer` ("ptxas" or "nvjitlink")
    first and the other where it fails (e.g. a PTX ISA newer than that ptxas)."""
    arch = _ptx_target(ptx)
    regs = [f"--maxrregcount={maxrregcount}"] if maxrregcount else []
    errors = []
    order = ["ptxas", "nvjitlink"] if prefer == "ptxas" else ["nvjitlink", "ptxas"]
    for tool in order:
        try:
            if tool == "ptxas":
                path = ptxas or _any_ptxas()
                log = _run_ptxas(path, ptx, arch, [*(ptxas_options or []), *regs])
                return log, f"{Path(path).name} -v"
            log = _run_nvjitlink(ptx, arch, [f"-maxrregcount={maxrregcount}"] if maxrregcount else [])
            return log, "nvJitLink -Xptxas=-v"
        except Exception as exc:
            errors.append(f"{tool}: {type(exc).__name__}: {exc}")
    raise RuntimeError("no assembler could read the PTX: " + " | ".join(errors))


def entry(log: str, name: str | None) -> KernelResources:
    """The record of entry `name` in a ptxas log, or the log's only entry with registers."""
    found = parse_ptxas(log)
    if name in found:
        return found[name]
    entries = [r for r in found.values() if r.registers > 0]
    if len(entries) == 1:
        return entries[0]
    raise RuntimeError(f"ptxas reported no entry {name!r}; found {sorted(found)}")


_SHARED = re.compile(r"\.shared\s+(?:\.align\s+\d+\s+)?\.[bsuf](\d+)\s+[\w$.]+\[(\d+)\]")


def ptx_shared_bytes(ptx: str) -> int:
    """Static shared memory a PTX module declares at module scope, where nvJitLink's verbose log does not
    count it against the kernel."""
    return sum(int(bits) // 8 * int(count) for bits, count in _SHARED.findall(ptx))


def read(build: Build, started: float | None = None) -> dict[str, Any]:
    """kernel, registers, spill_store_bytes, spill_load_bytes, stack_bytes, smem_bytes (ptxas's static plus
    the build's extra), assembler and compile_s (since `started`, a perf_counter reading) of `build`."""
    started = time.perf_counter() if started is None else started
    if build.ptx is None:
        log, assembler = build.log or "", build.assembler
    else:
        log, assembler = assemble(
            build.ptx,
            prefer=build.prefer,
            ptxas=build.ptxas,
            ptxas_options=list(build.ptxas_options),
            maxrregcount=build.max_registers,
        )
    r = entry(log, build.kernel)
    smem = r.smem_bytes + build.extra_smem
    if build.module_shared and build.ptx is not None and not r.smem_bytes:
        smem += ptx_shared_bytes(build.ptx)
    return {
        "kernel": r.name,
        "registers": r.registers,
        "spill_store_bytes": r.spill_store_bytes,
        "spill_load_bytes": r.spill_load_bytes,
        "stack_bytes": r.stack_bytes,
        "smem_bytes": smem,
        "assembler": assembler,
        "compile_s": round(time.perf_counter() - started, 3),
    }
