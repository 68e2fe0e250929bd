"""Per-kernel resources read from ptxas's verbose log (`-Xptxas=-v`): registers, spills, stack, shared memory.

Without a GPU these are the only evidence a compiled kernel is sound: an elementwise kernel that spills or
needs a stack frame has gone wrong. NVRTC, nvcc, Triton and Numba all hand ptxas's log over in the same
format, so every backend reads it here. A record starts at "Compiling entry function 'k'" or "Function
properties for k"; the spill line and the "Used N registers" line that follow belong to it. Non-entry
functions that ptxas kept out of line appear too, with 0 registers (ptxas reports registers for entries only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_START = re.compile(r"Compiling entry function '([^']+)'|Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_FIELDS = ("registers", "spill_store_bytes", "spill_load_bytes", "stack_bytes", "smem_bytes")


@dataclass(frozen=True)
class KernelResources:
    name: str
    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_bytes: int
    smem_bytes: int

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


def parse_ptxas(log: str) -> dict[str, KernelResources]:
    """Every function the log describes, by (unmangled for `extern "C"`) name, in order of appearance."""
    found: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in log.splitlines():
        if start := _START.search(line):
            name = start.group(1) or start.group(2)
            current = found.setdefault(name, dict.fromkeys(_FIELDS, 0))
        elif current is None:
            continue
        elif frame := _FRAME.search(line):
            stack, stores, loads = map(int, frame.groups())
            current.update(stack_bytes=stack, spill_store_bytes=stores, spill_load_bytes=loads)
        elif used := _USED.search(line):
            current["registers"] = int(used.group(1))
            if smem := _SMEM.search(line):
                current["smem_bytes"] = int(smem.group(1))
    return {name: KernelResources(name, **fields) for name, fields in found.items()}
