"""The noise floor of this machine, from an A/A: two identical runs, read as `compare` and the verdicts read them.

Nothing changed between the two runs, so every row `compare` flags and every verdict that differs is noise. This
says how much: the rows flagged at the threshold given, the threshold each row would need to stay quiet (and so
the one that keeps 95% and all of them quiet: what `--threshold` should be here), how many fusion and rival
verdicts agree, whether any went from pays to loses or back, and whether the plain effects (2× or more in the
first run) stayed decided, so that quiet is not bought by calling everything neutral. No I/O beyond the two runs
read and the markdown returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from suite.core.row import KEY
from suite.kit import store
from suite.report import compare_rows, compare_stats, compare_summary

PLAIN = 2.0
"""A speedup this large in the first run is an effect any honest rerun must still call `pays`."""
VERDICTS = (("verdict", "speedup", "fused vs unfused (and every scenario pair)"),
            ("rival_verdict", "rival_speedup", "hand-written vs its rival (torch.compile, the library)"))  # fmt: skip


@dataclass
class Agreement:
    """How one kind of verdict fared between the runs."""

    what: str
    cases: int = 0
    agree: int = 0
    flips: list[str] = field(default_factory=list)
    """Cases that went from pays to loses or back."""
    changed: list[str] = field(default_factory=list)
    plain: int = 0
    """Cases of PLAIN× or more in the first run."""
    plain_kept: int = 0


@dataclass
class Noise:
    lines: pd.DataFrame
    threshold: float
    flagged: int
    timed: int
    needed: np.ndarray
    """Per timed row, the smallest threshold (a fraction) under which `compare` calls it `same`."""
    agreements: list[Agreement]

    def quiet_at(self, share: float) -> float:
        """The smallest threshold that keeps `share` of the timed rows quiet."""
        return float(np.quantile(self.needed, share)) if len(self.needed) else 0.0


def needed(lines: pd.DataFrame) -> np.ndarray:
    """The threshold each timed line would need to be `same`: how far its interval's near end lies past 1 (the
    verdict flags only an interval wholly beyond the band), 0 where the interval holds 1; without an interval,
    the ratio's own distance from 1."""
    out = []
    for line in lines.itertuples(index=False):
        if not np.isfinite(line.ratio):
            continue
        interval = np.isfinite(line.lo) and np.isfinite(line.hi)
        lo, hi = (line.lo, line.hi) if interval else (line.ratio, line.ratio)
        out.append(max(0.0, lo - 1, 1 / hi - 1))
    return np.asarray(out, dtype=float)


def agreement(a: pd.DataFrame, b: pd.DataFrame, column: str, speed: str, what: str) -> Agreement:
    """Verdicts of `column` in both runs, matched on the row key."""
    found = Agreement(what)
    keep = [*KEY, column, speed]
    if column not in a or column not in b:
        return found
    both = a[keep].merge(b[keep], on=list(KEY), suffixes=("_a", "_b"))
    for row in both.itertuples(index=False):
        first, second = getattr(row, f"{column}_a"), getattr(row, f"{column}_b")
        if not isinstance(first, str) or not isinstance(second, str) or not first or not second:
            continue
        name = (
            f"{compare_rows.case_label(row.scenario, row.params, row.dtype)} "
            f"{compare_rows.implementation(row.backend, row.device, row.variant)}"
        )
        found.cases += 1
        found.agree += first == second
        if first != second:
            found.changed.append(
                f"{name}: {first} → {second} ({getattr(row, f'{speed}_a'):.2f}× → {getattr(row, f'{speed}_b'):.2f}×)"
            )
        if {first, second} == {"pays", "loses"}:
            found.flips.append(name)
        if getattr(row, f"{speed}_a") >= PLAIN:
            found.plain += 1
            found.plain_kept += first == second == "pays"
    return found


def measure(a: store.Run, b: store.Run, threshold: float) -> Noise:
    """Compare B with A as `suite compare` does (canary-normalised where it can) and read the verdicts of both."""
    from suite.report.compare import _times

    matched, _, _ = compare_rows.match(a.results, b.results)
    lines = compare_stats.compare(matched, _times(a, b, matched), threshold)
    timed = lines[np.isfinite(lines["ratio"].astype(float))]
    flagged = int(timed["verdict"].isin(["slower", "faster"]).sum())
    agreements = [agreement(a.results, b.results, c, s, w) for c, s, w in VERDICTS]
    return Noise(lines, threshold, flagged, len(timed), needed(timed), agreements)


def smallest_by_family(lines: pd.DataFrame) -> dict[str, float]:
    """Per family (scenario, and phase where not forward), the median over its timed rows of the smallest change
    `compare` could tell there (`compare_stats.by_case`)."""
    if "smallest" not in lines or "scenario" not in lines:
        return {}
    timed = lines[np.isfinite(lines["smallest"].astype(float))]
    if timed.empty:
        return {}
    phase = timed["phase"].astype(str) if "phase" in timed else pd.Series("forward", index=timed.index)
    family = timed["scenario"].astype(str).where(phase == "forward", timed["scenario"].astype(str) + " " + phase)
    return {str(k): float(v) for k, v in timed["smallest"].astype(float).groupby(family).median().items()}


def markdown(noise: Noise, a: str, b: str) -> str:
    """noise.md: the counts, the threshold to use here, and every verdict that changed."""
    t = noise.threshold
    share = noise.flagged / noise.timed if noise.timed else 0.0
    parts = [f"# fusebench noise: {b} against {a} (an A/A: nothing changed)", ""]
    parts += [
        f"- `compare` at ±{t:.0%}: {noise.flagged} of {noise.timed} timed rows flagged ({share:.1%}).",
        f"- Threshold that keeps 95% of rows quiet here: {noise.quiet_at(0.95):.1%}; every row: "
        f"{noise.quiet_at(1.0):.1%}. Pick `--threshold` at or above it on this machine.",
        *(f"- {m}" for m in compare_summary.machine_moved(noise.lines)),
    ]
    if smallest := smallest_by_family(noise.lines):
        told = ", ".join(f"{family} {value:.1%}" for family, value in smallest.items())
        parts.append(
            f"- Smallest change this pair can tell, per family (median over its rows: the threshold widened by the "
            f"interval's half width): {told}. A CI gate at ±{t:.0%} holds only for families at or under it."
        )
    for found in noise.agreements:
        if not found.cases:
            continue
        parts.append(
            f"- Verdicts, {found.what}: {found.agree} of {found.cases} agree "
            f"({found.agree / found.cases:.0%}); pays ↔ loses: {len(found.flips)}; "
            f"effects of {PLAIN:g}× or more in the first run still `pays`: {found.plain_kept} of "
            f"{found.plain}."
        )
    for found in noise.agreements:
        if found.changed:
            parts += ["", f"## Verdicts that changed: {found.what}", "", *(f"- {c}" for c in found.changed)]
    return "\n".join(parts) + "\n"
