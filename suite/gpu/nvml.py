"""What NVML says about the GPU a run times on: what it is, how it runs, and whether its clocks are held back.

Two runs on "the same" GPU can differ because one ran at a lower clock: a power cap, a hot card, a power brake.
`snapshot()` records the GPU (driver and CUDA versions, name, UUID) and its state (SM and memory clocks, current
and maximum, power limit and draw, temperature, the clock-throttle reasons) for the run's environment.json;
`throttle_reasons()` is the part a timed row needs, sampled around its timing. The run reads a snapshot as it
starts and, of the same GPU by its UUID, as it ends (suite.run.provenance). NVML's bit mask is decoded to
words (`THROTTLE_BITS`, from nvml.h's nvmlClocksEventReason* / nvmlClocksThrottleReason*); an idle GPU and
clocks limited by the applications-clocks setting are not throttling and are left out.

NVML comes from nvidia-ml-py (module `pynvml`, the `cuda` extra). Without it, without a GPU, or on any NVML
error, everything here returns nothing ({} or ()) and never raises: provenance is best effort, and a run never
fails for want of it. A reading one GPU does not support (power draw on some boards) is None in the snapshot.
The GPU is CUDA's device 0, found in NVML by its PCI bus id: NVML numbers every GPU of the machine, CUDA only
those CUDA_VISIBLE_DEVICES lets it see.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import Any

THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
"""Clock-event bits that mean the clocks run below what the GPU could give (nvml.h)."""
NOT_THROTTLING = {0x1: "gpu_idle", 0x2: "applications_clocks_setting"}
"""Bits NVML sets that are no throttling: nothing runs, or the clocks are where the user set them."""
_REASON_GETTERS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
"""The newer name first (nvidia-ml-py 12.535+), then the older, deprecated one."""
NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0


def decode(mask: int) -> tuple[str, ...]:
    """The throttling reasons in an NVML clock-event mask, in bit order; an unnamed bit as its hex value."""
    bits = [1 << i for i in range(mask.bit_length()) if mask >> i & 1]
    return tuple(THROTTLE_BITS.get(bit, f"0x{bit:x}") for bit in bits if bit not in NOT_THROTTLING)


def union(*reasons: Iterable[str]) -> tuple[str, ...]:
    """Every reason in any of `reasons`, once, in THROTTLE_BITS order (unnamed bits last)."""
    seen = {r for group in reasons for r in group}
    order = list(THROTTLE_BITS.values())
    return tuple(sorted(seen, key=lambda r: (order.index(r) if r in order else len(order), r)))


@functools.cache
def _session() -> tuple[Any, Any] | None:
    """(pynvml, the handle of CUDA's device 0), NVML initialised once per process; None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml, _handle(pynvml)
    except Exception:  # ImportError, NVMLError (no driver, no GPU), or a library too old for a call
        return None


@functools.cache
def _session_of(uuid: str) -> tuple[Any, Any] | None:
    """(pynvml, the handle of the GPU with this UUID), found by NVML alone: a process that opened no CUDA context
    (the worker's parent, reading the run's end) reads the GPU the worker's own reading named; None without it."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByUUID(uuid.encode())
    except Exception:
        return None


def _handle(nvml: Any) -> Any:
    """NVML's handle of the GPU CUDA calls device 0: by PCI bus id, else by what CUDA_VISIBLE_DEVICES names
    first (an index or a UUID), else NVML's device 0: the first of these NVML answers."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    bus = cuda_pci_bus_id()
    ways: list[Callable[[], Any]] = []
    if bus:
        ways.append(lambda: nvml.nvmlDeviceGetHandleByPciBusId(bus.encode()))
    if first.startswith("GPU-"):
        ways.append(lambda: nvml.nvmlDeviceGetHandleByUUID(first.encode()))
    ways.append(lambda: nvml.nvmlDeviceGetHandleByIndex(int(first) if first.isdigit() else 0))
    for way in ways[:-1]:
        handle = _read(way)
        if handle is not None:
            return handle
    return ways[-1]()


def cuda_pci_bus_id() -> str | None:
    """The PCI bus id of CUDA's device 0 (cuDeviceGetPCIBusId), or None where the driver cannot say."""
    try:
        from suite.gpu import driver

        return driver.pci_bus_id() or None
    except Exception:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _read(call: Callable[[], Any]) -> Any:
    """One NVML reading, or None where this GPU or this pynvml does not support it."""
    try:
        return call()
    except Exception:
        return None


def _mask(nvml: Any, handle: Any) -> int | None:
    for name in _REASON_GETTERS:
        getter = getattr(nvml, name, None)
        if getter is not None:
            return _read(lambda getter=getter: int(getter(handle)))
    return None


def throttle_reasons() -> tuple[str, ...]:
    """Why the GPU's clocks are held back right now (`decode`d); () where they are not, or without NVML."""
    found = _session()
    if found is None:
        return ()
    mask = _mask(*found)
    return decode(mask) if mask else ()


def _cuda_version(value: Any) -> str | None:
    """NVML's CUDA driver version (12040) as 12.4."""
    return f"{value // 1000}.{value % 1000 // 10}" if isinstance(value, int) else None


def _watts(milliwatts: Any) -> float | None:
    return round(milliwatts / 1000, 1) if isinstance(milliwatts, int | float) else None


def snapshot(uuid: str | None = None) -> dict[str, Any]:
    """The GPU and its state now: driver_version, cuda_version, name, uuid, sm_clock_mhz, sm_clock_max_mhz,
    mem_clock_mhz, mem_clock_max_mhz, memory_bus_bits, power_limit_w, power_draw_w, temperature_c, throttle_reasons (a list,
    empty where none) and throttle_mask; {} without NVML. `uuid` names the GPU (no CUDA call is made), else
    CUDA's device 0."""
    found = _session() if uuid is None else _session_of(uuid)
    if found is None:
        return {}
    nvml, h = found
    mask = _mask(nvml, h)
    return {
        "driver_version": _read(lambda: _text(nvml.nvmlSystemGetDriverVersion())),
        "cuda_version": _cuda_version(_read(nvml.nvmlSystemGetCudaDriverVersion)),
        "name": _read(lambda: _text(nvml.nvmlDeviceGetName(h))),
        "uuid": _read(lambda: _text(nvml.nvmlDeviceGetUUID(h))),
        "sm_clock_mhz": _read(lambda: nvml.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM)),
        "sm_clock_max_mhz": _read(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, NVML_CLOCK_SM)),
        "mem_clock_mhz": _read(lambda: nvml.nvmlDeviceGetClockInfo(h, NVML_CLOCK_MEM)),
        "mem_clock_max_mhz": _read(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, NVML_CLOCK_MEM)),
        "memory_bus_bits": _read(lambda: nvml.nvmlDeviceGetMemoryBusWidth(h)),
        "power_limit_w": _watts(_read(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h))),
        "power_draw_w": _watts(_read(lambda: nvml.nvmlDeviceGetPowerUsage(h))),
        "temperature_c": _read(lambda: nvml.nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU)),
        "throttle_reasons": list(decode(mask)) if mask else [],
        "throttle_mask": mask,
    }
