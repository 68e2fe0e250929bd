"""Deciding what changed between two runs' paired rows: the statistics of `python -m suite compare`, without I/O.

Rows are paired (`compare_rows`) before they get here, and what the verdicts come to is counted apart
(`compare_summary`).

The time ratio is NEW/BASE of each run's typical repetition: the median over blocks (buffer sets) of the
blocks' median times. Two runs differ by the machine as well as by the code: the bandwidth a shared host gives,
its clock, its neighbours. So each row's repetitions carry the canary's time in the same round (a copy timed
beside the case, `suite.run.ceiling.canaries`) and, normalised (the default where both rows have the same canary),
a repetition counts as its time over the canary's: a machine that slowed everything by 2× moves the canary by 2×
and leaves the ratio at 1, while one kernel made 20% slower still reads 1.2. The canary's own NEW/BASE is the
row's `machine`, printed beside: how much the machine moved. The 95% interval comes from a two-level bootstrap of
each run on its own (blocks, then rounds inside them: `suite.core.resample`; the runs were not interleaved, so
there are no pairs to keep) and the difference of the two. The verdict, with the threshold t (5% by default):

- `slower` when the whole interval lies above 1+t: a change a user cares about, and surely that large;
- `faster` when the whole interval lies below 1/(1+t) (symmetric on the log axis, so comparing NEW with BASE
  calls faster exactly what comparing BASE with NEW calls slower);
- `same` otherwise.

A row of an older run that kept no repetitions has no interval: its ratio is that of the two medians in
results.csv, its verdict comes from the band alone and says so (`no interval`).

Flags beside the verdict: `broke` (ok in BASE, another status in NEW), `fixed` (the reverse), `numerics`
(max_rel_err of NEW above 10 × max(BASE's, the dtype's machine epsilon)), `memory` (NEW's peak memory above
BASE's by more than the threshold and a floor (`memory_floor`: 4 MiB for a CPU's resident set, 1 MiB else): measured peaks where both runs measured one,
else modeled ones; a memory regression fails the gate as a slower row does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from suite.core import dtypes, resample
from suite.core.row import KEY
from suite.report import between_runs
from suite.report.compare_rows import OCCURRENCE, case_label, implementation

CONFIDENCE = 0.95
RESAMPLES = 2000
NUMERICS_FACTOR = 10.0
VERDICTS = ("slower", "same", "faster")
NO_INTERVAL = "no interval"
"""The flag of a ratio of two medians, from a run that kept no repetitions."""
RAW = "raw times"
"""The flag of a row compared by raw times where normalising was asked: the two rows share no canary."""


@dataclass(frozen=True)
class Ratio:
    ratio: float
    lo: float
    hi: float
    """Bootstrap interval of `ratio`; NaN where either side has no repetitions."""
    machine: float = float("nan")
    """NEW/BASE of the canary: how much the machine itself moved (NaN without canaries on both sides)."""
    normalised: bool = False
    """Whether each repetition was taken relative to its round's canary."""


@dataclass(frozen=True)
class Reps:
    """One row's repetitions in round order: times, their blocks and the canary's time in each round (NaN where
    none was timed), and whether each was left out (taken while the GPU was throttled)."""

    times: np.ndarray
    blocks: np.ndarray
    canary: np.ndarray
    excluded: np.ndarray

    @classmethod
    def of(
        cls,
        times: Sequence[float],
        blocks: Sequence[int] | None = None,
        canary: Sequence[float] | None = None,
        excluded: Sequence[bool] | None = None,
    ) -> Reps:
        t = np.asarray(times, dtype=float)
        fill = lambda values, default, kind: (
            np.asarray(values, dtype=kind)
            if values is not None and len(values) == len(t)
            else np.full(len(t), default, dtype=kind)
        )
        return cls(t, fill(blocks, 0, np.int64), fill(canary, np.nan, float), fill(excluded, False, bool))

    def __len__(self) -> int:
        return len(self.times)

    @property
    def has_canary(self) -> bool:
        kept = ~self.excluded
        return bool(kept.any() and np.all(np.isfinite(self.canary[kept]) & (self.canary[kept] > 0)))

    def canary_logs(self) -> tuple[np.ndarray, np.ndarray]:
        """(log canary times of the rounds kept; their blocks)."""
        keep = ~self.excluded & np.isfinite(self.canary) & (self.canary > 0)
        return np.log(self.canary[keep]), self.blocks[keep]

    def logs(self, follow: float) -> tuple[np.ndarray, np.ndarray]:
        """(log time less `follow` × log of the round's canary (0: raw times); their blocks), for the repetitions
        kept."""
        keep = ~self.excluded & np.isfinite(self.times) & (self.times > 0)
        values = np.log(self.times[keep])
        if follow:
            values = values - follow * np.log(self.canary[keep])
        return values, self.blocks[keep]


def ratio(
    base_ms: Sequence[float] | np.ndarray | Reps,
    new_ms: Sequence[float] | np.ndarray | Reps,
    seed: int = 0,
    normalise: bool | float = False,
) -> Ratio:
    """NEW/BASE with its interval, each side a two-level bootstrap (blocks, rounds) on its own; `normalise`:
    each repetition relative to its round's canary raised to that power (True: 1; both sides must have one)."""
    base = base_ms if isinstance(base_ms, Reps) else Reps.of(base_ms)
    new = new_ms if isinstance(new_ms, Reps) else Reps.of(new_ms)
    sides = [r.logs(float(normalise)) for r in (base, new)]
    if any(len(values) == 0 for values, _ in sides):
        raise ValueError("no repetitions to compare")
    b = resample.draws(*sides[0], seed=seed, resamples=RESAMPLES)
    n = resample.draws(*sides[1], seed=seed + 1, resamples=RESAMPLES)
    est = resample.difference(b, n)
    machine = float("nan")
    if base.has_canary and new.has_canary:
        machine = float(
            np.exp(np.median(np.log(new.canary[~new.excluded])) - np.median(np.log(base.canary[~base.excluded])))
        )
    return Ratio(float(np.exp(est.value)), float(np.exp(est.lo)), float(np.exp(est.hi)), machine, bool(normalise))


def verdict(value: float, lo: float, hi: float, threshold: float) -> str:
    """slower / faster where the whole interval lies beyond the band of ±`threshold` (a fraction), as a fusion
    verdict needs its interval to clear its band: a change must be both large enough to matter and surely so;
    without an interval (NaN), the ratio and the band alone decide; same otherwise; empty where there is no ratio."""
    if not np.isfinite(value):
        return ""
    interval = np.isfinite(lo) and np.isfinite(hi)
    if value > 1 + threshold and (not interval or lo > 1 + threshold):
        return "slower"
    if value < 1 / (1 + threshold) and (not interval or hi < 1 / (1 + threshold)):
        return "faster"
    return "same"


def epsilon(dtype: str) -> float:
    """Machine epsilon of a dtype by name (float32, float16, bfloat16…); that of float32 for a name NumPy does not
    know."""
    try:
        return dtypes.eps(dtype)
    except (TypeError, ValueError):
        return float(np.finfo(np.float32).eps)


def status_flag(base_status: str, new_status: str) -> str:
    if base_status == new_status:
        return ""
    if base_status == "ok":
        return f"broke (ok→{new_status})"
    if new_status == "ok":
        return f"fixed ({base_status}→ok)"
    return f"status {base_status}→{new_status}"


def numerics_worse(base_err: float, new_err: float, dtype: str) -> bool:
    """NEW's error more than ten times BASE's, or than the dtype's epsilon where BASE's is smaller."""
    if not (np.isfinite(new_err) and np.isfinite(base_err)):
        return False
    return bool(new_err > NUMERICS_FACTOR * max(base_err, epsilon(dtype)))


NORMALISE = ("auto", "canary", "none")
"""--normalize: `auto` (canary where both rows timed the same canary, raw times elsewhere), `canary`, `none`."""


def compare(
    matched: pd.DataFrame,
    times: dict[tuple[str, str], tuple[Reps, Reps]],
    threshold: float,
    seed: int = 0,
    normalise: str = "auto",
) -> pd.DataFrame:
    """One line per matched row: case, implementation, base_ms, new_ms, ratio, lo, hi, machine, verdict, flags
    and the booleans `regressed` (slower, broke or numerics), `interval` and `normalised`. `times` maps (base
    row_id, new row_id) to the two runs' repetitions (lists of times, or `Reps`); a pair missing from it (or with
    none kept) gets the ratio of the medians. `auto` takes each row relative to its canary as far as the rows
    follow their canaries (`between_runs.follow`). The frame's `attrs` keep that β (`follow`) and the drift
    between the runs beyond the rows' own intervals (`drift`, said beside the table, not applied: see `drift`)."""
    rows = [row._asdict() for row in matched.itertuples(index=False)]
    reps = [_reps(times.get((r["row_id_base"], r["row_id_new"]))) for r in rows]
    follow = {"none": 0.0, "canary": 1.0}.get(normalise)
    if follow is None:
        usable = [_raw_point(r, p) for r, p in zip(rows, reps, strict=True)]
        usable = [u for u in usable if u is not None]
        follow = between_runs.follow(*map(np.asarray, zip(*usable, strict=True))) if usable else 1.0
    lines = [
        _line(r, p, threshold, seed + i, normalise, follow) for i, (r, p) in enumerate(zip(rows, reps, strict=True))
    ]
    columns = [
        "case",
        "implementation",
        "base_ms",
        "new_ms",
        "ratio",
        "lo",
        "hi",
        "machine",
        "verdict",
        "flags",
        "regressed",
    ]
    out = pd.DataFrame(lines, columns=[*columns, "interval", "normalised", "broke", "numerics", "memory"])
    for column in (*KEY, OCCURRENCE, "device_name_base", "device_name_new", "mode_base", "mode_new"):
        if column in matched:
            out[column] = matched[column].to_numpy()
    out.attrs["follow"] = follow
    return by_case(out, threshold, machine=normalise != "none")


def by_case(lines: pd.DataFrame, threshold: float, machine: bool = True) -> pd.DataFrame:
    """Each timed line relative to its case's machine factor (`between_runs.case_factors`), its interval widened
    by the scatter between the runs and the factor's own uncertainty, and its verdict decided again on that.
    `factor` is what was taken as the machine's (the canary's part and the case's together); `attrs` gain
    `drift` (σ), `anchor` and `smallest` (per line, the smallest change the pair could tell: (1+t)·e^(1.96·w)).
    With `machine` False (raw times asked for) no factor is taken out and the intervals stay each run's own."""
    out = lines.copy()
    out["factor"] = np.where(out["normalised"], out["machine"].astype(float) ** out.attrs["follow"], 1.0)
    out["smallest"] = np.nan
    timed = out["interval"].astype(bool) & np.isfinite(out["ratio"].astype(float)) & (out["ratio"] > 0)
    if not timed.any():
        out.attrs.update(drift=0.0, anchor="")
        return out
    sub = out[timed]
    z = np.log(sub["ratio"].to_numpy(float))
    s = (np.log(sub["hi"].to_numpy(float)) - np.log(sub["lo"].to_numpy(float))) / (2 * between_runs.Z95)
    left = np.where(sub["normalised"], 1.0 - out.attrs["follow"], 1.0)  # the share of the canary z still holds
    canary = left * np.log(sub["machine"].to_numpy(float))
    keys = [c for c in ("scenario", "params", "dtype", "device", "phase") if c in sub] or ["case"]
    case = sub[keys].astype(str).agg("|".join, axis=1).to_numpy()
    impl = (sub[[k for k in ("scenario", "phase") if k in sub] or ["case"]].astype(str).agg("|".join, axis=1)
            + "|" + sub["implementation"].astype(str)).to_numpy()  # fmt: skip
    if machine:
        fit = between_runs.case_factors(z, s, case, impl, canary)
    else:
        fit = between_runs.CaseFit(np.zeros(len(z)), np.zeros(len(z)), 0.0, "")
    w = np.sqrt(s**2 + fit.spread**2 + fit.error**2)
    r = z - fit.factor
    z95 = between_runs.Z95
    out.loc[timed, "ratio"], out.loc[timed, "lo"], out.loc[timed, "hi"] = (
        np.exp(r),
        np.exp(r - z95 * w),
        np.exp(r + z95 * w),
    )
    out.loc[timed, "factor"] = out.loc[timed, "factor"].to_numpy(float) * np.exp(fit.factor)
    out.loc[timed, "smallest"] = (1 + threshold) * np.exp(z95 * w) - 1
    out.loc[timed, "verdict"] = [
        verdict(v, lo, hi, threshold) for v, lo, hi in out.loc[timed, ["ratio", "lo", "hi"]].to_numpy(float)
    ]
    out["regressed"] = (out["verdict"] == "slower") | out["broke"] | out["numerics"] | out["memory"]
    out.attrs.update(drift=fit.spread, anchor=fit.anchor)
    return out


def _raw_point(row: dict, reps: tuple[Reps, Reps] | None) -> tuple[float, float] | None:
    """(log raw time ratio, log canary ratio) of a row both runs timed beside the same canary: the points β is
    fitted to (no interval needed, so none is drawn)."""
    if not reps or not len(reps[0]) or not len(reps[1]) or not normalisable(row, reps):
        return None
    if not (_number(row.get("time_ms_base")) > 0 and _number(row.get("time_ms_new")) > 0):
        return None
    (b, bb), (n, nb) = reps[0].logs(0.0), reps[1].logs(0.0)
    (cb, _), (cn, _) = reps[0].canary_logs(), reps[1].canary_logs()
    if not (len(b) and len(n) and len(cb) and len(cn)):
        return None
    return resample.point(n, nb) - resample.point(b, bb), float(np.median(cn) - np.median(cb))


def _reps(found: tuple | None) -> tuple[Reps, Reps] | None:
    return tuple(r if isinstance(r, Reps) else Reps.of(r) for r in found) if found is not None else None  # type: ignore[return-value]


def drift(lines: pd.DataFrame) -> float:
    """How far identical kernels moved between the runs beyond their own intervals (`between_runs.spread`), from
    each timed line's log ratio about the median of its implementation's lines (a change usually moves one
    implementation across its cases: centring per implementation keeps it out of the estimate)."""
    has = lines["interval"].astype(bool) & np.isfinite(lines["ratio"].astype(float))
    timed = lines[has]
    if timed.empty:
        return 0.0
    z = np.log(timed["ratio"].astype(float))
    centred = (z - z.groupby(timed["implementation"]).transform("median")).to_numpy()
    half = (np.log(timed["hi"].astype(float)) - np.log(timed["lo"].astype(float))).to_numpy() / 2
    return between_runs.spread(centred, half / between_runs.Z95)


def normalisable(row: dict, reps: tuple[Reps, Reps]) -> bool:
    """Whether both sides timed a canary in every kept round, and the same one (by name)."""
    same = str(row.get("canary_base") or "") == str(row.get("canary_new") or "") != ""
    return same and reps[0].has_canary and reps[1].has_canary


def _line(
    row: dict, reps: tuple[Reps, Reps] | None, threshold: float, seed: int, normalise: str = "auto", follow: float = 1.0
) -> dict:
    base_ms, new_ms = _number(row.get("time_ms_base")), _number(row.get("time_ms_new"))
    timed = bool(base_ms > 0 and new_ms > 0)  # NaN compares False: a side not timed has no ratio
    result = Ratio(np.nan, np.nan, np.nan)
    if timed and reps and len(reps[0]) and len(reps[1]):
        relative = normalise != "none" and normalisable(row, reps)
        result = ratio(reps[0], reps[1], seed, follow if relative else 0.0)
        result = Ratio(result.ratio, result.lo, result.hi, result.machine, relative)
        base_ms, new_ms = float(np.median(reps[0].times)), float(np.median(reps[1].times))
    elif timed:
        result = Ratio(new_ms / base_ms, np.nan, np.nan)
    flags = []
    status = status_flag(str(row.get("status_base", "")), str(row.get("status_new", "")))
    if status:
        flags.append(status)
    worse = numerics_worse(_number(row.get("max_rel_err_base")), _number(row.get("max_rel_err_new")), row["dtype"])
    if worse:
        flags.append(f"numerics {_number(row.get('max_rel_err_base')):.2g}→{_number(row.get('max_rel_err_new')):.2g}")
    more = memory_grew(row, threshold)
    if more:
        flags.append(more)
    interval = bool(np.isfinite(result.lo))
    if np.isfinite(result.ratio) and not interval:
        flags.append(NO_INTERVAL)
    elif interval and normalise != "none" and not result.normalised:
        flags.append(RAW)
    decided = verdict(result.ratio, result.lo, result.hi, threshold)
    broke = status.startswith("broke")
    return {
        "case": case_label(row["scenario"], row["params"], row["dtype"]),
        "implementation": implementation(row["backend"], row["device"], row["variant"], row[OCCURRENCE]),
        "base_ms": base_ms if timed else np.nan,
        "new_ms": new_ms if timed else np.nan,
        "ratio": result.ratio,
        "lo": result.lo,
        "hi": result.hi,
        "machine": result.machine,
        "verdict": decided,
        "flags": ", ".join(flags),
        "regressed": decided == "slower" or broke or worse or bool(more),
        "interval": interval,
        "normalised": result.normalised,
        "broke": broke,
        "numerics": worse,
        "memory": bool(more),
    }


MEMORY_FLOOR_MIB = 1.0
"""A memory flag needs the growth beyond 1 MiB as well as beyond the threshold (see suite.run.peak_memory)."""
HOST_FLOOR_MIB = 4.0
"""The floor for peaks measured on the CPU, a resident set's high-water mark: between identical runs on a shared
2-core Xeon it moved by up to 3.4 MiB (150 rows, three pairs; none grew by more than 2 MiB and 5%), which a 1 MiB
floor read as memory regressions."""


def memory_floor(row: dict, basis: str) -> float:
    """MiB a peak must grow by besides the threshold: HOST_FLOOR_MIB for one measured on the CPU, else 1 MiB."""
    return HOST_FLOOR_MIB if basis == "measured" and str(row.get("device", "")) == "cpu" else MEMORY_FLOOR_MIB


def memory_grew(row: dict, threshold: float) -> str:
    """`memory 64→128 MiB (measured)` where NEW's peak exceeds BASE's by more than `threshold` and the floor,
    measured where both runs measured it, else modeled; '' otherwise."""
    for column, basis in (("peak_bytes", "measured"), ("peak_bytes_modeled", "modeled")):
        base, new = _number(row.get(f"{column}_base")), _number(row.get(f"{column}_new"))
        if base > 0 and new > 0:
            grown = new > base * (1 + threshold) and (new - base) / 2**20 > memory_floor(row, basis)
            return f"memory {base / 2**20:,.1f}→{new / 2**20:,.1f} MiB ({basis})" if grown else ""
    return ""


def _number(value: object) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")
    return out
