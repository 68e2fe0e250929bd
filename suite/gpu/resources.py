"""Static resources of every CUDA kernel a variant launches, compiled for sm_90 with or without a GPU.

Fusing grows a kernel's live state, and registers, spills and shared memory decide how many warps an SM keeps
resident. Backends record each kernel an entry builds as a `KernelSpec` (`suite.core.kernelspec`; the suite
wraps the entry call in `recording()`); `analyse` has each spec's backend compile it for sm_90
(`Backend.compile`) — in this process, or in the persistent `suite.gpu.aot` helper where the backend's compiler
cannot run beside emulation (`Backend.compile_isolated`) — reads registers, spills, stack and static shared
memory from ptxas's `-v` log (`suite.gpu.assembler`), and computes the theoretical occupancy from the limits
of one architecture (`device.arch`; unset: the GPU's own, else sm_90; see `resolve_arch`), recorded beside it.
Compilations are cached in memory and on disk (keyed by the kernel's recipe, the source files it comes from
and the toolchain versions), so a sweep pays each once. On a GPU the loaded kernels' attributes are read too
(`loaded` in the report), through the backend (`Backend.loaded_attributes`).

Nothing here knows a kernel library: what differs between them is behind the `Backend` protocol.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from suite.core.backend import BACKENDS, versions
from suite.core.kernelspec import KernelSpec, Unrecorded, recording
from suite.core.registry import discover
from suite.gpu import aot
from suite.gpu.assembler import read
from suite.gpu.occupancy import ARCHS, limits_for, occupancy

__all__ = [
    "STATS",
    "KernelSpec",
    "ResourceError",
    "Unrecorded",
    "analyse",
    "annotate",
    "cache_path",
    "clear_memory_cache",
    "compiled_resources",
    "for_row",
    "loaded_attributes",
    "recording",
    "resolve_arch",
]

SCHEMA = 2
"""Bump when what a cached compile result holds changes."""


class ResourceError(RuntimeError):
    """A kernel's resources could not be obtained; the message says why."""


# --- caches ---------------------------------------------------------------------------------------------------

_ASSEMBLERS = ("nvidia-nvjitlink", "cuda-bindings")
"""What `suite.gpu.assembler` assembles PTX with, besides a ptxas the backends name."""


@functools.cache
def toolchain() -> dict[str, str]:
    """What decides every compile besides a kernel's recipe and source: this Python, the cache schema, the
    assemblers, and what each backend declares (all of them, imported first, so the answer is the same in
    every process of a run whichever backends it has used)."""
    found = {"python": sys.version.split()[0], "schema": str(SCHEMA), **versions(*_ASSEMBLERS)}
    discover()
    for backend in BACKENDS.values():
        found.update(backend.toolchain())
    return found


def cache_dir() -> Path:
    """$FUSEBENCH_CACHE_DIR, else $XDG_CACHE_HOME/fusebench, else ~/.cache/fusebench."""
    if os.environ.get("FUSEBENCH_CACHE_DIR"):
        return Path(os.environ["FUSEBENCH_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fusebench"


def cache_path() -> Path:
    tag = hashlib.sha256(json.dumps(toolchain(), sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir() / f"resources-{tag}.json"


_MEMORY: dict[str, dict[str, Any]] = {}
"""cache key -> compile result, or {"error": ...} for a compile that failed in this process."""
_DISK: dict[Path, dict[str, Any]] = {}
STATS = {"memory": 0, "disk": 0, "compiled": 0}


def _disk_entries(path: Path) -> dict[str, Any]:
    if path not in _DISK:
        try:
            _DISK[path] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            _DISK[path] = {}
    return _DISK[path]


def _disk_put(path: Path, key: str, result: dict[str, Any]) -> None:
    """Merge into the file (other workers may have added entries) and replace it atomically."""
    entries = _disk_entries(path)
    entries[key] = result
    with contextlib.suppress(OSError, ValueError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError, ValueError):
            entries.update({k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if k not in entries})
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(entries, f, sort_keys=True)
        os.replace(tmp, path)


def clear_memory_cache() -> None:
    """Forget this process's compile results (the disk cache stays)."""
    _MEMORY.clear()
    _DISK.clear()


def compiled_resources(spec: KernelSpec) -> dict[str, Any]:
    """The sm_90 compile of `spec`: kernel, registers, spill_store_bytes, spill_load_bytes, stack_bytes,
    smem_bytes (static, plus what the backend's launch adds at compile time), assembler, compile_s. Cached;
    raises ResourceError."""
    key = spec.cache_key()
    if key in _MEMORY:
        STATS["memory"] += 1
        result = _MEMORY[key]
    else:
        path = cache_path()
        result = _disk_entries(path).get(key)
        if result is not None:
            STATS["disk"] += 1
        else:
            STATS["compiled"] += 1
            try:
                result = _compile(spec)
            except Exception as exc:
                result = {"error": f"{type(exc).__name__}: {exc}"}
            else:
                _disk_put(path, key, result)
        _MEMORY[key] = result
    if "error" in result:
        raise ResourceError(result["error"])
    return result


def _compile(spec: KernelSpec) -> dict[str, Any]:
    backend = BACKENDS[spec.backend]
    if backend.compile_isolated:
        return aot.compile_remote(spec.compile_json())
    return read(backend.compile(dict(spec.recipe)))


# --- the architecture occupancy is computed for -------------------------------------------------------------

DEFAULT_ARCH = "sm_90"


@functools.cache
def _own_arch() -> tuple[str, str]:
    """This machine's GPU's architecture and, where there is none or it has no limits table, why sm_90's used."""
    from suite.core.targets import cuda_device_count

    if cuda_device_count() == 0:
        return DEFAULT_ARCH, ""
    try:
        from suite.gpu import driver

        own = "sm_" + driver.compute_capability().replace(".", "")
    except Exception as exc:
        return DEFAULT_ARCH, f"compute capability unreadable ({_first_line(exc)}): {DEFAULT_ARCH}'s limits used"
    if own not in ARCHS:
        return DEFAULT_ARCH, f"no limits for this GPU's {own} (known: {', '.join(ARCHS)}): {DEFAULT_ARCH}'s used"
    return own, ""


def resolve_arch(arch: str | None = None) -> tuple[str, str]:
    """The architecture occupancy is computed for, and a note where it is not the one asked for: `arch`
    (device.arch) where given, else this GPU's own, else sm_90. An unknown name is refused."""
    if arch is not None:
        limits_for(arch)  # ValueError naming the known ones
        return arch, ""
    return _own_arch()


# --- analysis -------------------------------------------------------------------------------------------------


def loaded_attributes(spec: KernelSpec) -> dict[str, Any]:
    """Attributes of the kernel as loaded on this machine's GPU (only where `spec.live` is set, i.e. native),
    as its backend reads them. Seen on an H200 for the matmul kernels of three backends (results/h200_matmul:
    the loaded registers equal the sm_90 build's, bar one built by a different ptxas); the mapping is tested on
    stand-ins (tests/test_resources_live.py)."""
    return BACKENDS[spec.backend].loaded_attributes(spec.live)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def _report(spec: KernelSpec | Unrecorded, launches: int, arch: str) -> dict[str, Any]:
    if isinstance(spec, Unrecorded):
        error = f"not recorded: {spec.reason}"
        return {"name": spec.name, "backend": spec.backend, "launches": launches, "error": error}
    out: dict[str, Any] = {"name": spec.name, "backend": spec.backend, "threads": spec.threads, "launches": launches}
    static = live = None
    try:
        static = compiled_resources(spec)
    except Exception as exc:
        out["error"] = _first_line(exc)
    if spec.live is not None:
        try:
            live = loaded_attributes(spec)
            out["loaded"] = live
        except Exception as exc:
            out["loaded_error"] = _first_line(exc)
    if static is not None:
        out.update(
            regs=static["registers"],
            spill_store_bytes=static["spill_store_bytes"],
            spill_load_bytes=static["spill_load_bytes"],
            local_bytes=static["stack_bytes"],
            smem_bytes=static["smem_bytes"] + spec.dynamic_smem,
            source=f"sm_90 ({static['assembler']})",
        )
    elif live is not None:
        out.update(
            regs=live["regs"],
            spill_store_bytes=None,
            spill_load_bytes=None,
            local_bytes=live["local_bytes"],
            smem_bytes=live["smem_bytes"] + spec.dynamic_smem,
            source="loaded kernel",
        )
    if out.get("regs") is not None:
        occ = occupancy(spec.threads, out["regs"], out["smem_bytes"], limits_for(arch))
        out.update(occupancy=round(occ.fraction, 4), limiter=occ.limiter, blocks_per_sm=occ.blocks_per_sm, arch=arch)
    return out


def analyse(specs: Sequence[KernelSpec | Unrecorded], arch: str | None = None) -> list[dict[str, Any]]:
    """One report per distinct kernel (in launch order, with how many times it was recorded): name, backend,
    threads, regs, spill_store_bytes, spill_load_bytes, local_bytes, smem_bytes, occupancy (fraction of the
    maximum of `arch`, as `resolve_arch` chooses it), limiter, blocks_per_sm, arch; `error` where its compile
    failed, `loaded` where a GPU ran it."""
    arch = resolve_arch(arch)[0]
    counts: dict[KernelSpec | Unrecorded, int] = {}
    first: dict[KernelSpec | Unrecorded, KernelSpec | Unrecorded] = {}
    for spec in specs:
        counts[spec] = counts.get(spec, 0) + 1
        first.setdefault(spec, spec)  # the first recorded carries the live handle
    return [_report(first[s], n, arch) for s, n in counts.items()]


def for_row(specs: Sequence[KernelSpec | Unrecorded], arch: str | None = None) -> dict[str, Any]:
    """The variant's worst kernel for results.csv: most registers, most spill bytes, most shared memory and
    the lowest occupancy (each may come from a different kernel), plus every kernel's report and the `arch`
    occupancy was computed for. A value is None where no kernel has it; `errors` lists the kernels without
    numbers."""
    arch, note = resolve_arch(arch)
    kernels = analyse(specs, arch)

    def worst(key: str, pick: Any, values: list[Any] | None = None) -> Any:
        vals = values if values is not None else [k[key] for k in kernels if k.get(key) is not None]
        return pick(vals) if vals else None

    spills = [
        k["spill_store_bytes"] + k["spill_load_bytes"]
        for k in kernels
        if k.get("spill_store_bytes") is not None and k.get("spill_load_bytes") is not None
    ]
    out = {
        "regs": worst("regs", max),
        "spill_bytes": worst("", max, spills),
        "smem_bytes": worst("smem_bytes", max),
        "occupancy": worst("occupancy", min),
        "kernels": kernels,
        "arch": arch,
    }
    if note:
        out["arch_note"] = note
    errors = [f"{k['name']}: {k['error']}" for k in kernels if "error" in k]
    if errors:
        out["errors"] = errors
    return out


def annotate(
    row: Any,
    device: str,
    specs: Sequence[KernelSpec | Unrecorded],
    built_for: str | None = None,
    arch: str | None = None,
) -> None:
    """Fill a results row's regs / spill_bytes / smem_bytes / occupancy, extra["kernels"] and
    extra["occupancy_arch"] (the architecture occupancy was computed for; extra["occupancy_arch_note"] says
    why where it is not the GPU's own); on a CPU target, or where nothing could be analysed, extra["resources"]
    says why. Never raises.

    The kernels are those built for the row's own params; `built_for` (params as JSON) names the smaller
    emulation slice they were built for instead, where the case's own could not be built, and is kept in
    extra["resources_params"]."""
    try:
        if device != "cuda":
            row.extra["resources"] = "not applicable: CPU target"
            return
        if not specs:
            row.extra["resources"] = "no kernels recorded (the entry did not build, or does not record its kernels)"
            return
        summary = for_row(specs, arch)
        row.regs, row.spill_bytes = summary["regs"], summary["spill_bytes"]
        row.smem_bytes, row.occupancy = summary["smem_bytes"], summary["occupancy"]
        row.extra["kernels"], row.extra["occupancy_arch"] = summary["kernels"], summary["arch"]
        if summary.get("arch_note"):
            row.extra["occupancy_arch_note"] = summary["arch_note"]
        if built_for:
            row.extra["resources_params"] = built_for
        if summary.get("errors"):
            row.extra["resources"] = "; ".join(summary["errors"])[:1000]
    except Exception as exc:  # resource analysis must never fail a row
        row.extra["resources"] = f"resource analysis failed: {_first_line(exc)}"
