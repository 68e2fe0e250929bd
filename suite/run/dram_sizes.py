"""`preset=DRAM`: the size axis chosen at plan time, from this host's last-level cache, so that every case is
measured at the DRAM boundary the ledger counts rather than inside the cache.

The ledger counts the bytes that cross the outer-memory boundary. On a host whose last-level cache is large (an
Emerald Rapids holds 300 MiB of L3) a case whose buffers fit in it is timed at the cache: unfused variants then read
above the copy ceiling, and what fusion saves is understated. STREAM's rule sizes a memory benchmark so that its
arrays take at least four times the last-level cache; this preset applies the rule to a memory-bound family's
`size_axis`, the axis its charts plot against, with every other axis from preset L unless the user sets it.

The working set is the case's inputs and output (`footprint.inputs_and_output`): what the fused variant holds, and
the smallest of any variant's (an unfused one adds its intermediates), so the rule on it puts every variant past
the cache. The size axis takes powers of two. The smallest is the first at which every case of the plan (each value
of the other axes, in each of the run's dtypes) holds CACHE_MULTIPLE times the cache; the preset has it and the next
SIZES − 1 powers of two. A larger size the plan's checks or memory guards refuse is left out with those past it, and
said so in one line; a smallest size they refuse stops the plan. A size axis the user sets wins, as with every preset.

The cache is the one sysfs reports (`provenance.cpu_caches`, the largest level); where it reports none, the 8 MiB
`timing.last_level_cache_bytes` assumes. What was chosen, and from which cache, goes into environment.json.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from suite.core import scenario as scenarios
from suite.core.errors import ConfigError
from suite.core.scenario import Params, Scenario
from suite.run.footprint import fmt_bytes, inputs_and_output
from suite.run.provenance import cpu_caches
from suite.run.timing import last_level_cache_bytes

DRAM = "DRAM"
BASE = "L"
"""The preset the other axes come from."""
CACHE_MULTIPLE = 4
"""STREAM's rule: the working set at least this many times the last-level cache."""
SIZES = 3
"""Sizes per family: the smallest that keeps the rule, and twice and four times it."""
MAX_DOUBLINGS = 62


@dataclass(frozen=True)
class Sizing:
    """What `preset=DRAM` chose for a plan, and why: recorded in environment.json and printed as the plan starts."""

    family: str
    axis: str
    sizes: list[int]
    cache: str
    """The level the rule was applied to ('L3'), or 'assumed' where sysfs reports no cache."""
    cache_bytes: int
    overridden: bool = False
    """The user set the size axis: the sizes are theirs, and the rule was not applied."""
    left_out: str = ""
    """Why sizes past the smallest were left out (this host's memory), '' where none were."""

    def record(self) -> dict[str, Any]:
        return {
            "preset": DRAM,
            "family": self.family,
            "axis": self.axis,
            "sizes": self.sizes,
            "last_level_cache": {"level": self.cache, "bytes": self.cache_bytes},
            "rule": f"inputs and output of every case >= {CACHE_MULTIPLE} x the last-level cache",
            "overridden": self.overridden,
            "left_out": self.left_out,
        }

    def line(self) -> str:
        cache = f"{fmt_bytes(self.cache_bytes)} {self.cache}"
        if self.overridden:
            return f"preset={DRAM}: {self.family}'s {self.axis}={self.sizes} as set ({cache} not applied)"
        said = (
            f"preset={DRAM}: {self.family}'s {self.axis}={self.sizes}, from the first power of two at which every "
            f"case's inputs and output take >= {CACHE_MULTIPLE} x the {cache}"
        )
        return f"{said}; {self.left_out}" if self.left_out else said


def last_level_cache() -> tuple[str, int]:
    """This host's last-level cache as sysfs reports it: (its level, its bytes); ('assumed', 8 MiB) where it
    reports none."""
    caches = cpu_caches()
    if not caches:
        return "assumed", last_level_cache_bytes()
    level = max(caches, key=lambda name: caches[name])
    return level, caches[level]


def supporting() -> list[str]:
    """The registered families `preset=DRAM` can size."""
    return sorted(name for name, scn in scenarios.SCENARIOS.items() if scn.memory_bound)


def base_axes(scn: Scenario) -> dict[str, list[Any]]:
    """Preset L's value lists with the size axis left empty (to be chosen), or ConfigError where `scn` is not
    memory-bound, naming the families that are."""
    if not scn.memory_bound:
        raise ConfigError(
            f"preset={DRAM} sizes memory-bound families past the last-level cache; {scn.name} is compute-bound "
            f"(use preset=L); families: {', '.join(supporting())}"
        )
    return {**scn.presets[BASE], scn.size_axis: []}


def working_set(scn: Scenario, axes: dict[str, list[Any]], size: int, dtypes: list[str]) -> int:
    """The smallest inputs-and-output bytes of any case the axes make with `size` on the size axis, in any dtype."""
    names = list(axes)
    values = [[size] if name == scn.size_axis else axes[name] for name in names]
    found = []
    for combo in itertools.product(*values):
        params: Params = dict(zip(names, combo, strict=True))
        for dtype in dtypes:
            found.append(inputs_and_output(scn, params, dtype))
    if not found or any(f is None for f in found):
        raise ConfigError(f"preset={DRAM}: {scn.name} cannot say its inputs' shapes; set scenario.{scn.size_axis}")
    return min(f for f in found if f is not None)


def smallest(scn: Scenario, axes: dict[str, list[Any]], dtypes: list[str], cache_bytes: int) -> int:
    """The first power of two on the size axis at which every case holds CACHE_MULTIPLE × `cache_bytes`."""
    for doubling in range(MAX_DOUBLINGS):
        if working_set(scn, axes, 2**doubling, dtypes) >= CACHE_MULTIPLE * cache_bytes:
            return 2**doubling
    raise ConfigError(f"preset={DRAM}: no {scn.name} {scn.size_axis} up to 2**{MAX_DOUBLINGS} holds the cache")


def sized(
    scn: Scenario,
    axes: dict[str, list[Any]],
    dtypes: list[str],
    fits: Callable[[dict[str, list[Any]]], None],
) -> tuple[dict[str, list[Any]], Sizing]:
    """`axes` (from `base_axes`, with the user's values) with the size axis chosen where it is empty, and what
    was chosen. `fits(axes)` raises ConfigError where the plan's memory guards refuse those axes' cases: a
    refused smallest size stops the plan, a refused larger one is left out with those past it."""
    level, cache_bytes = last_level_cache()
    axis = scn.size_axis
    if axes[axis]:
        return axes, Sizing(scn.name, axis, list(axes[axis]), level, cache_bytes, overridden=True)
    first = smallest(scn, axes, dtypes, cache_bytes)
    sizes: list[int] = []
    left_out = ""
    for size in (first * 2**k for k in range(SIZES)):
        try:
            fits({**axes, axis: [size]})
        except ConfigError as exc:
            if not sizes:
                raise ConfigError(f"preset={DRAM}: {scn.name} at {axis}={size}: {exc}") from None
            left_out = f"{axis}={size} and up left out: {exc}"
            break
        sizes.append(size)
    return {**axes, axis: sizes}, Sizing(scn.name, axis, sizes, level, cache_bytes, left_out=left_out)
