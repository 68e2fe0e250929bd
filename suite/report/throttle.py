"""The report's warning that some CUDA rows were timed while the GPU's clocks were held back.

A row timed under a power cap or a thermal slowdown is slower than the GPU is, and a fused/unfused pair timed
while it came and went may disagree for that reason alone. The `throttled` column holds the reasons NVML
reported around a row's timing (`suite.gpu.nvml`); this says, in one line, how many rows have any and which.
`over_the_run` sets NVML's readings of the GPU as the run started and ended (environment.json) side by side: a
card that warmed up or lost clock during the sweep timed its last cases on a slower GPU than its first.
"""

from __future__ import annotations

from typing import Any

import pandas as pd


def flagged(data: pd.DataFrame) -> list[str]:
    """One line naming how many rows were timed while throttled, and why, and how many repetitions were left out
    for it; one on the energy fusion saved; [] where neither applies (no GPU, no NVML)."""
    return [*_throttled(data), *_excluded(data), *energy(data)]


def _excluded(data: pd.DataFrame) -> list[str]:
    reps = pd.to_numeric(data.get("throttled_reps"), errors="coerce") if "throttled_reps" in data else None
    if reps is None or not (reps > 0).any():
        return []
    hit = data[reps > 0]
    total = pd.to_numeric(hit["reps"], errors="coerce").sum()
    whole = int((reps >= pd.to_numeric(data["reps"], errors="coerce")).sum())
    return [
        f"**Throttled repetitions left out:** {int(reps.sum())} of {int(total)} repetitions of {len(hit)} rows were "
        "taken while NVML sampled the clocks held back (sampled every 2 ms during the rounds); times and "
        f"verdicts use the others. {whole} rows were throttled throughout and have no verdict."
    ]


def energy(data: pd.DataFrame) -> list[str]:
    """One line on energy per call: the fused-over-unfused energy ratios beside the speedups, where measured."""
    if "energy_ratio" not in data:
        return []
    pairs = data[pd.to_numeric(data["energy_ratio"], errors="coerce").notna()]
    if pairs.empty:
        return []
    ratio, speed = pairs["energy_ratio"].astype(float), pd.to_numeric(pairs["speedup"], errors="coerce")
    return [
        f"**Energy (NVML's counter, joules per call in `energy_j`):** over {len(pairs)} candidate/baseline "
        f"pairs, the baseline spent {ratio.median():.2f}× the candidate's energy per call (range "
        f"{ratio.min():.2f}–{ratio.max():.2f}) where it took {speed.median():.2f}× its time: fewer bytes "
        "moved, less energy, by its own factor (column `energy_ratio`)."
    ]


def _throttled(data: pd.DataFrame) -> list[str]:
    if "throttled" not in data:
        return []
    reasons = data["throttled"].fillna("").astype(str).str.strip()
    hit = reasons[reasons != ""]
    if hit.empty:
        return []
    counts = hit.str.split(",").explode().str.strip().value_counts()
    why = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    timed = int(data["time_ms"].notna().sum()) if "time_ms" in data else len(data)
    return [
        f"**Clock throttling:** {len(hit)} of {timed} timed rows ran while NVML reported the GPU's clocks held "
        f"back ({why}; see the `throttled` column): their times may be slower than the GPU is."
    ]


READINGS = (
    ("sm_clock_mhz", "SM clock", " MHz", "sm_clock_max_mhz", "max"),
    ("mem_clock_mhz", "memory clock", " MHz", "mem_clock_max_mhz", "max"),
    ("temperature_c", "temperature", " °C", None, ""),
    ("power_draw_w", "power draw", " W", "power_limit_w", "limit"),
)
"""(reading, name, unit, its bound or None, the bound's name): what `over_the_run` sets side by side, start → end."""


def over_the_run(environment: dict[str, Any]) -> str | None:
    """'NVIDIA H200 `GPU-…`, driver 580.95.05, CUDA 13.0: SM clock 1980 → 1755 MHz (max 1980 MHz), …, throttling at
    the start: none, at the end: sw_thermal_slowdown'; None without both readings (no GPU, no NVML, a run from
    before the end was read, or a report over several runs, whose environment.json holds each run's)."""
    nvml = environment.get("nvml") if isinstance(environment, dict) else None
    start, end = (nvml.get("start"), nvml.get("end")) if isinstance(nvml, dict) else (None, None)
    if not start or not end:
        return None
    about = [str(end.get("name") or "GPU") + (f" `{end['uuid']}`" if end.get("uuid") else "")]
    about += [
        f"{word} {end[key]}" for key, word in (("driver_version", "driver"), ("cuda_version", "CUDA")) if end.get(key)
    ]
    changes = [_change(start, end, *reading) for reading in READINGS]
    said = [c for c in changes if c]
    why = f"throttling at the start: {_reasons(start)}, at the end: {_reasons(end)}"
    return ", ".join(about) + ": " + ", ".join([*said, why])


def _change(
    start: dict[str, Any], end: dict[str, Any], key: str, label: str, unit: str, bound: str | None, word: str
) -> str:
    """'SM clock 1980 → 1755 MHz (max 1980 MHz)'; '' where neither reading has it."""
    a, b = start.get(key), end.get(key)
    if a is None and b is None:
        return ""
    of = f" ({word} {end[bound]:g}{unit})" if bound and end.get(bound) is not None else ""
    return f"{label} {_value(a)} → {_value(b)}{unit}{of}"


def _value(value: Any) -> str:
    return "?" if value is None else f"{value:g}"


def _reasons(reading: dict[str, Any]) -> str:
    reasons = reading.get("throttle_reasons")
    if reasons is None or reading.get("throttle_mask") is None:
        return "unknown"
    return ", ".join(reasons) or "none"
