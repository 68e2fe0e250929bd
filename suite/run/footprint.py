"""The footprint guard: skip a case before it runs when its variant would not fit in the device's free memory.

A scenario that can say how much memory a variant holds while it runs overrides the `Scenario` hook
`footprint_bytes(params, dtype, variant)` (attention: q, k, v and O, plus the L×L S and P when
unfused). `guard` compares that with what the target reports free; where the target cannot tell (the CPU,
the interpreter, the simulator, a compile-only target: their arrays live in host memory), with the host's
available memory. The reason it returns names both numbers, so a skipped row says why.

Free memory is read after every CUDA library has handed back what it keeps cached (`release_caches`: torch's
caching allocator, CuPy's pools, Numba's deferred frees): memory parked in one library's pool is free for the
next case, and would otherwise skip it falsely. A case that ran out of memory all the same says, in the same
terms, what it needed and what was free (`out_of_memory`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from suite.core import targets

MEMINFO = Path("/proc/meminfo")


def host_available_bytes() -> int | None:
    """Memory the host can hand out without swapping: MemAvailable, else free physical pages; None if unknown."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def release_caches() -> None:
    """Have every CUDA target hand its library's cached memory back (`Target.release`), so that what a target
    reports free is what any library could allocate. A target's release must not raise; one that does is
    ignored here, since a cache left full costs at most a skipped case."""
    for target in list(targets.TARGETS.values()):
        if target.device == "cuda":
            with contextlib.suppress(Exception):
                target.release()


def free_on(target: Any) -> tuple[int | None, str]:
    """Free bytes where `target`'s arrays live, and where that is: the device it reports, else host memory."""
    reported = target.free_bytes()
    if reported is not None:
        return int(reported), target.name
    return host_available_bytes(), f"{target.name} (host memory)"


def guard(scn: Any, params: dict[str, Any], dtype: str, variant: str, target: Any) -> str | None:
    """Why this case cannot run on `target` (its footprint exceeds the free memory), or None when it fits,
    when the scenario has no footprint model, or when the free memory is unknown. The libraries' caches are
    released first."""
    need = scn.footprint_bytes(params, dtype, variant)
    if need is None:
        return None
    release_caches()
    free, where = free_on(target)
    if free is None or need <= free:
        return None
    return f"{variant} needs {fmt_bytes(need)} ({need:,} bytes), more than the {fmt_bytes(free)} free on {where}"


def inputs_and_output(scn: Any, params: dict[str, Any], dtype: str) -> int | None:
    """Bytes of the case's inputs and output: a floor on any variant's footprint, for families without a model."""
    try:
        out = scn.output_shape(params)
        shapes = [*scn.input_shapes(params).values(), *(out.values() if isinstance(out, dict) else [out])]
    except Exception:  # a family that cannot say its shapes without making the inputs
        return None
    return sum(int(np.prod(shape, dtype=np.int64)) for shape in shapes) * np.dtype(dtype).itemsize


def out_of_memory(scn: Any, params: dict[str, Any], dtype: str, variant: str, target: Any) -> str:
    """The reason of a row that ran out of device memory: what the case needs (the family's footprint model,
    else its inputs and output) and what is free now, the caches released; one line."""
    need = scn.footprint_bytes(params, dtype, variant)
    how = "footprint"
    if need is None:
        need, how = inputs_and_output(scn, params, dtype), "inputs and output; no footprint model"
    release_caches()
    try:
        free, where = free_on(target)
    except Exception:  # a device that cannot even say what is free
        free, where = None, target.name
    needs = f"the case needs ~{fmt_bytes(need)} ({how})" if need is not None else "the case's footprint is unknown"
    has = f"{fmt_bytes(free)} free on {where}" if free is not None else f"free memory unknown on {where}"
    return f"device out of memory: {needs}, {has}"
