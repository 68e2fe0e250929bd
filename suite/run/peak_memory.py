"""Fusion's second payoff: the peak memory of each implementation, measured beside the ledger's model, and the
memory verdicts.

Measured around one untimed call on a fresh set of buffers (`Check.rebuild`, the same as a timing block's), after
the build-and-check, so no compilation is counted: everything the implementation holds while it runs — its inputs'
copies, its output, the intermediates it allocates ahead for timing fairness and any scratch the call allocates
and frees — is the growth of

- on the CPU, the process's resident set: its high-water mark is reset (`/proc/self/clear_refs`) before the
  rebuild and read after the call (`rss_peak`). Allocations of 64 KiB and more are made to map fresh pages while
  it is read (glibc's `mallopt`), so that memory freed earlier and reused does not hide an allocation; pages a
  buffer never touches are not resident and do not count. It sees every library (NumPy, Numba's runtime, torch).
- on CUDA, the device's memory in use (`cuMemGetInfo` through the target), with every library's pool released
  first, read after the call: a block freed during the call stays in its library's pool (torch's caching
  allocator, CuPy's pool, Numba's deferred frees) and counts, so this is the call's peak to the allocators'
  rounding, one accounting for every library.

The modeled peak is the ledger's (`VariantLedger.peak_bytes`); for the compiler's variant, where the row's
`extra.compiler` lists what the generated code allocates, the inputs and outputs plus those buffers. Memory
verdicts compare the same pairs as the time verdicts (`Scenario.pairs`, `Scenario.rivals`), on measured peaks
where both were measured, else on modeled ones, and say which.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import gc
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from suite.core.registry import KernelKey
from suite.core.scenario import Scenario
from suite.core.targets import NATIVE
from suite.run import faults, footprint
from suite.run.stages import Memory, MemoryComparison, Stages

Found = dict[KernelKey, Stages]

PEAK_BLOCK = 97
"""The buffer set the measurement builds (an offset of its own, like a timing block's; never one of theirs)."""
MEMORY_BAND = 0.05
MEMORY_FLOOR_MIB = 1.0
"""A memory verdict needs the saving (or the cost) beyond both 5% of the baseline's peak and 1 MiB: below that a
resident-set reading moves with the allocator's pages and the interpreter's own objects."""
MMAP_THRESHOLD = 64 * 1024
STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def measured(found: Found, scn: Scenario, params: Any, dtype: str) -> Found:
    """Each implementation with its `Memory` stage: the peak measured where it ran natively and passed its check,
    the modeled peak of its variant (what its generated code allocates for the compiler's)."""
    held = _held(scn, params, dtype)
    out = dict(found)
    for key, stages in found.items():
        if stages.ledger is None and not stages.ok:
            continue
        modeled = _modeled(stages, held, dtype)
        peak, note = None, ""
        if stages.ok and stages.mode == NATIVE and stages.check is not None and stages.check.rebuild is not None:
            peak, note = _measure(key.device, stages)
        elif stages.ok and stages.mode != NATIVE:
            note = "not measured: not run natively"
        out[key] = replace(stages, memory=Memory(peak, modeled, note))
    return out


def _held(scn: Scenario, params: Any, dtype: str) -> int | None:
    """The least any variant holds: its inputs and outputs (the ledger's smallest peak)."""
    try:
        peaks = [lg.peak_bytes for lg in scn.ledger(params, dtype).values() if lg.peak_bytes is not None]
    except Exception:
        return None
    return min(peaks) if peaks else None


def _modeled(stages: Stages, held: int | None, dtype: str) -> int | None:
    """The ledger's peak; for the compiler's variant, the inputs and outputs plus every buffer its generated code
    allocates (all counted alive at once: an upper bound, Inductor frees some as it goes)."""
    ledger = stages.ledger.peak_bytes_modeled if stages.ledger is not None else None
    compiler = stages.check.notes.get("compiler") if stages.check is not None else None
    elements = compiler.get("buffer_elements") if isinstance(compiler, dict) else None
    if elements is None or held is None:
        return ledger
    return held + int(elements) * np.dtype(dtype).itemsize


def _measure(device: str, stages: Stages) -> tuple[int | None, str]:
    check, target = stages.check, stages.availability.target
    assert check is not None and check.rebuild is not None
    meter = rss_peak if device == "cpu" else (lambda: device_peak(target))
    try:
        with meter() as reading:
            launcher = check.rebuild(PEAK_BLOCK)  # built, run once and checked: its buffers are all resident
            del launcher
        return reading[0], reading[1]
    except faults.ContextLost:
        raise
    except Exception as exc:
        return None, f"not measured: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def settle() -> None:
    """Free now what would otherwise be freed during the measurement and hide an allocation there: buffers
    waiting in a reference cycle, and what the libraries keep cached (the footprint guard releases it too)."""
    gc.collect()
    footprint.release_caches()


@functools.cache
def freeze_imports() -> None:
    """Take what the imports made out of the collector's sight, once per process: `settle` collects the whole
    heap before every peak it reads, and with torch, Triton and Numba loaded that heap holds some 400,000
    objects (modules, classes, functions) that never become garbage, so each collection took 0.3–0.4 s, a
    minute of a family's run. Called after the scan found every kernel (`gc.freeze` after a full collection:
    only what is alive then is set aside, and garbage made later is collected as before). Unfrozen at exit, so
    the interpreter's last collection still frees it: nanobind (Triton's LLVM bindings) reports every object it
    finds alive at shutdown as a leak on stderr."""
    gc.collect()
    gc.freeze()
    atexit.register(gc.unfreeze)


# The CPU: the resident set's high-water mark ---------------------------------------------------------------------


def _status(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", STATUS.read_text(), re.M)
    if match is None:
        raise OSError(f"{STATUS} has no {field}")
    return int(match.group(1)) * 1024


@contextlib.contextmanager
def rss_peak(threshold: int = MMAP_THRESHOLD) -> Iterator[list[Any]]:
    """`with rss_peak() as reading:` ... then `reading[0]` is how far the resident set rose above where it stood
    on entry (bytes), `reading[1]` how it was read. Raises OSError where the kernel offers no resettable
    high-water mark."""
    reading: list[Any] = [None, "resident-set high-water mark above the start, /proc/self/clear_refs"]
    settle()
    with _fresh_pages(threshold):
        CLEAR_REFS.write_text("5")  # VmHWM := VmRSS
        start = _status("VmRSS")
        yield reading
        reading[0] = max(0, _status("VmHWM") - start)


@contextlib.contextmanager
def _fresh_pages(threshold: int) -> Iterator[None]:
    """glibc serves allocations of `threshold` bytes and more from fresh mappings, returned when freed, while inside,
    and the free pages of its heap are handed back first (`malloc_trim`, after `settle` has freed what waited in
    reference cycles), so that memory freed earlier and served again is faulted in again; outside, the threshold is
    left at the ceiling glibc's own adaptive one reaches (32 MiB), where it usually stands after a few large frees.
    Nothing where the C library is not glibc."""
    libc = _libc()
    if libc is None:
        yield
        return
    libc.mallopt(M_MMAP_THRESHOLD, threshold)
    libc.mallopt(M_TRIM_THRESHOLD, 2 * threshold)
    libc.malloc_trim(0)  # free heap pages back to the system: reused, they are faulted in again, and count
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, GLIBC_MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, 2 * GLIBC_MMAP_MAX)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
GLIBC_MMAP_MAX = 32 * 1024 * 1024


def _libc() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") else None
    except OSError:
        return None


# CUDA: the device's memory in use, every pool released first -------------------------------------------------------


@contextlib.contextmanager
def device_peak(target: Any) -> Iterator[list[Any]]:
    """`reading[0]`: free device memory before (every library's pool released) minus after the block, the
    block's buffers still held; raises OSError where the target cannot say how much is free."""
    reading: list[Any] = [None, "device memory in use above the start, pools released first (cuMemGetInfo)"]
    settle()
    target.synchronize()
    before = target.free_bytes()
    if before is None:
        raise OSError(f"{target.name} cannot say how much memory is free")
    yield reading
    target.synchronize()
    reading[0] = max(0, int(before) - int(target.free_bytes()))


# Verdicts ----------------------------------------------------------------------------------------------------------


def compared(found: Found, scn: Scenario) -> Found:
    """Each candidate's peak against its baseline's (the scenario's first pair whose baseline has a peak on the
    same backend and device) and against its rival's (another backend, same device)."""
    peaks = {(k.backend, k.device, k.variant): s.memory for k, s in found.items() if s.ok and s.memory is not None}
    out = dict(found)
    for key, stages in found.items():
        mine = peaks.get((key.backend, key.device, key.variant))
        if mine is None:
            continue
        base = next(
            (
                peaks[(key.backend, key.device, b)]
                for c, b in scn.pairs
                if c == key.variant and (key.backend, key.device, b) in peaks
            ),
            None,
        )
        wanted = [v for c, v in scn.rivals if c == key.variant]
        rival = next(
            (
                peaks[(b, d, v)]
                for w in wanted
                for b, d, v in sorted(peaks)
                if v == w and d == key.device and b != key.backend
            ),
            None,
        )
        ratio, saved, word, basis = versus(base, mine) if base is not None else (None, None, "", "")
        rival_ratio, _, _, rival_basis = versus(rival, mine) if rival is not None else (None, None, "", "")
        if ratio is None and rival_ratio is None:
            continue
        comparison = MemoryComparison(ratio, saved, word, rival_ratio, basis or rival_basis)
        out[key] = replace(stages, memory_comparison=comparison)
    return out


def versus(base: Memory, mine: Memory) -> tuple[float | None, float | None, str, str]:
    """(base/mine, MiB saved, verdict, basis): measured peaks where both are, else modeled; None where neither."""
    pick: Callable[[Memory], int | None]
    if base.peak_bytes and mine.peak_bytes:
        pick, basis = (lambda m: m.peak_bytes), "measured"
    elif base.peak_bytes_modeled and mine.peak_bytes_modeled:
        pick, basis = (lambda m: m.peak_bytes_modeled), "modeled"
    else:
        return None, None, "", ""
    b, m = float(pick(base) or 0), float(pick(mine) or 0)
    saved = (b - m) / 2**20
    band = max(MEMORY_BAND * b / 2**20, MEMORY_FLOOR_MIB)
    word = "pays" if saved > band else "loses" if -saved > band else "neutral"
    return b / m, saved, word, basis
