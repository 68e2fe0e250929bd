"""The footprint guard: skip a case before it runs when its variant would not fit in the device's free memory.

A scenario that can say how much memory a variant holds while it runs overrides the `Scenario` hook
`footprint_bytes(params, dtype, variant)` (attention: q, k, v and O, plus the L×L S and P when
unfused). `guard` compares that with what the target reports free; where the target cannot tell (the CPU,
the interpreter, the simulator, a compile-only target: their arrays live in host memory), with the host's
available memory. The reason it returns names both numbers, so a skipped row says why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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


def guard(scn: Any, params: dict[str, Any], dtype: str, variant: str, target: Any) -> str | None:
    """Why this case cannot run on `target` (its footprint exceeds the free memory), or None when it fits,
    when the scenario has no footprint model, or when the free memory is unknown."""
    need = scn.footprint_bytes(params, dtype, variant)
    if need is None:
        return None
    reported = target.free_bytes()
    free = host_available_bytes() if reported is None else int(reported)
    if free is None or need <= free:
        return None
    where = target.name if reported is not None else f"{target.name} (host memory)"
    return f"{variant} needs {fmt_bytes(need)} ({need:,} bytes), more than the {fmt_bytes(free)} free on {where}"
