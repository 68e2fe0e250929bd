"""`python -m suite compare BASE NEW`: what changed between two finished runs, and a gate for CI.

Users benchmark before and after a change (a new Triton or driver, a kernel edit, another GPU). This command
matches the two runs' rows, prints one line per (case, implementation) with the NEW/BASE time ratio, its 95%
bootstrap interval and a verdict (the rule is in `suite.report.compare_stats` and in the printed footer), flags
rows that broke, got fixed or whose numerics got ten times worse, and writes compare.md and compare.png.

Exit status: 0; 1 with --fail-on-regression when a row is slower, broke, has 10× worse numerics or needs more
memory; 2 with one
line (a ConfigError, printed by suite.cli) on bad input: a missing run, no rows in common, a threshold that is
not a positive number, or timings from different devices without --allow-device-change.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from suite.core.errors import ConfigError
from suite.kit import markdown, store
from suite.report import compare_chart, compare_rows, compare_stats, compare_summary
from suite.report.host import first_job, host_cpu

DEFAULT_THRESHOLD = 5.0
KEY_PACKAGES = ("python", "torch", "triton", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "numpy")
"""The versions provenance shows first; the rest of a row's `versions` follow."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments as one ConfigError line instead of usage text and exit 2."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(
            f"compare: {message}; usage: python -m suite compare BASE NEW [--threshold PCT] "
            "[--fail-on-regression] [--allow-device-change] [--out DIR]"
        )


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m suite compare", description="Compare two fusebench runs: NEW against BASE.")
    p.add_argument("base", metavar="BASE", help="the run compared against: a run directory or its results.csv")
    p.add_argument("new", metavar="NEW", help="the run under test: a run directory or its results.csv")
    p.add_argument(
        "--threshold",
        default=str(DEFAULT_THRESHOLD),
        metavar="PCT",
        help="a change within ±PCT percent is `same` (default 5)",
    )
    p.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a row is slower, broke, has 10x worse numerics or needs more memory",
    )
    p.add_argument(
        "--normalize",
        default="auto",
        choices=compare_stats.NORMALISE,
        help="canary: each row's time relative to the canary timed in its rounds, so that a change of "
        "the machine is not read as a change of the code; none: raw times; auto (default): canary "
        "where both rows timed the same one",
    )
    p.add_argument("--allow-device-change", action="store_true", help="compare timings from different devices")
    p.add_argument("--out", metavar="DIR", help="where compare.md and compare.png go (default NEW/compare_<BASE>/)")
    return p


def threshold(text: str) -> float:
    """The --threshold percentage as a fraction; ConfigError unless it is a positive finite number."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"--threshold must be a positive number of percent (e.g. 5), got '{text}'")
    return value / 100


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    t = threshold(args.threshold)
    base, new = store.load(args.base), store.load(args.new)
    matched, removed, added = compare_rows.match(base.results, new.results)
    if matched.empty:
        raise ConfigError(
            f"no rows in common between {args.base} ({_holds(base)}) and {args.new} ({_holds(new)}); "
            "rows match on scenario, params, dtype, backend, device, variant and phase"
        )
    changes = compare_rows.device_changes(matched)
    if changes and not args.allow_device_change:
        shown = "; ".join(f"'{b}' -> '{n}'" for b, n in changes)
        raise ConfigError(f"the runs timed different devices ({shown}); pass --allow-device-change to compare anyway")
    times = _times(base, new, matched)
    if args.normalize == "canary" and not any(
        compare_stats.normalisable(r._asdict(), times[(r.row_id_base, r.row_id_new)])
        for r in matched.itertuples(index=False)
        if (r.row_id_base, r.row_id_new) in times
    ):
        raise ConfigError("--normalize=canary: no row of the two runs timed the same canary; valid: auto, canary, none")
    lines = compare_stats.compare(matched, times, t, normalise=args.normalize)
    counts = compare_summary.tally(lines, removed=len(removed), added=len(added))
    out = Path(args.out) if args.out else new.path / f"compare_{_name(base)}"
    out.mkdir(parents=True, exist_ok=True)
    title = f"{_name(new)} against {_name(base)}"
    compare_chart.draw(lines, t, f"time ratio, {title}", out / "compare.png")
    (out / "compare.md").write_text(_markdown(lines, counts, base, new, removed, added, t, changes))
    _print(lines, counts, title, t, out, changes)
    failed = counts["slower"] + counts["broke"] + counts["numerics"] + counts["memory"] > 0
    return 1 if args.fail_on_regression and failed else 0


def _holds(run: store.Run) -> str:
    """`12 rows: layernorm float32`: what a run ran, for the message when two runs share nothing."""
    frame = run.results
    if frame.empty:
        return "no rows"
    what = sorted({f"{s} {d}" for s, d in zip(frame["scenario"], frame["dtype"], strict=True)})
    return f"{len(frame)} rows: {', '.join(what[:4])}{', …' if len(what) > 4 else ''}"


def _name(run: store.Run) -> str:
    """The run directory's own name (`results/latest` names the run it points at)."""
    return run.path.resolve().name or run.name


def _times(
    base: store.Run, new: store.Run, matched: pd.DataFrame
) -> dict[tuple[str, str], tuple[compare_stats.Reps, compare_stats.Reps]]:
    """(base row id, new row id) -> both sides' repetitions, for each matched row that has some on both sides."""
    base_reps, new_reps = _by_row(base.reps), _by_row(new.reps)
    out = {}
    for b, n in zip(matched["row_id_base"], matched["row_id_new"], strict=True):
        if b in base_reps and n in new_reps:
            out[(b, n)] = (base_reps[b], new_reps[n])
    return out


def _by_row(reps: pd.DataFrame) -> dict[str, compare_stats.Reps]:
    if reps.empty:
        return {}
    ordered = store.with_rep_columns(reps).sort_values(["row_id", "round"])
    columns = ("time_ms", "block", "canary_ms", "excluded")
    return {
        str(k): compare_stats.Reps.of(*(g[c].to_numpy() for c in columns))
        for k, g in ordered.groupby("row_id", sort=False)
    }


def footer(t: float) -> str:
    return (
        "ratio = NEW/BASE of the time (each run: the median over its blocks of their median repetition), each "
        "repetition relative to the canary timed in its round raised to β, how far the rows follow their canaries "
        f"(fitted across rows; --normalize=canary: β = 1; rows without a common canary flagged `{compare_stats.RAW}`), "
        "then relative to its case's machine factor: the consensus of the case's rows, each implementation's own "
        "change across the family's cases kept out of it, its level across cases set by the canary; machine = "
        "all that was divided out. [lo, hi] = 95% interval: each run's blocks and rounds resampled on their own "
        f"({compare_stats.RESAMPLES} times), widened by the scatter between the runs that no factor explains and by "
        f"the uncertainty of the case's factor. slower: the whole interval above {1 + t:.3g}; faster: the whole "
        f"interval below {1 / (1 + t):.3g} (= 1/(1+{t:.0%})); same otherwise. Rows of a run without "
        "repetitions: ratio of the medians in results.csv, band only (`no interval`). broke: ok -> another "
        "status; fixed: the reverse; numerics: max_rel_err NEW > 10 x max(BASE, dtype epsilon); memory: peak "
        f"bytes NEW above BASE by more than {t:.0%} and {compare_stats.MEMORY_FLOOR_MIB:g} MiB "
        f"({compare_stats.HOST_FLOOR_MIB:g} MiB for a resident set measured on the CPU; measured where "
        "both were, else modeled)."
    )


def _cells(line: Any) -> list[str]:
    interval = f" [{line.lo:.3f}, {line.hi:.3f}]" if np.isfinite(line.lo) else ""
    ratio = f"{line.ratio:.3f}{interval}" if np.isfinite(line.ratio) else "—"
    factor = getattr(line, "factor", line.machine)
    machine = f"{factor:.3f}" if np.isfinite(factor) and factor != 1.0 else "—"
    return [
        line.case,
        line.implementation,
        _ms(line.base_ms),
        _ms(line.new_ms),
        ratio,
        machine,
        line.verdict or "—",
        line.flags,
    ]


def _ms(value: float) -> str:
    return f"{value:.4g}" if np.isfinite(value) else "—"


HEAD = ["case", "implementation", "base ms", "new ms", "ratio [lo, hi]", "machine", "verdict", "flags"]


def _print(lines: pd.DataFrame, counts: dict, title: str, t: float, out: Path, changes: list) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    style = {"slower": "bold red", "faster": "green", "same": ""}
    table = Table(title=f"fusebench compare: {title}", caption=escape(footer(t)), caption_justify="left")
    for column in HEAD:
        table.add_column(escape(column), overflow="fold", justify="right" if column.endswith("ms") else "left")
    quiet = 0
    for line in lines.itertuples(index=False):
        if not line.verdict and not line.flags:  # timed on neither side, nothing changed: compare.md lists it
            quiet += 1
            continue
        table.add_row(*map(escape, _cells(line)), style="bold red" if line.regressed else style.get(line.verdict, ""))
    console = Console()
    if not console.is_terminal:  # a CI log: wide lines rather than every case folded over six
        console = Console(width=200)
    console.print(table)
    if changes:
        console.print("devices differ (--allow-device-change): " + "; ".join(f"{b} -> {n}" for b, n in changes))
    console.print(compare_summary.tally_line(counts))
    for moved in compare_summary.machine_moved(lines):
        console.print(moved)
    if quiet:
        console.print(
            f"{quiet} rows not timed on both sides and unchanged are left out here; compare.md lists every row"
        )
    console.print(f"wrote {out / 'compare.md'} and {out / 'compare.png'}")


def _markdown(
    lines: pd.DataFrame,
    counts: dict[str, int],
    base: store.Run,
    new: store.Run,
    removed: pd.DataFrame,
    added: pd.DataFrame,
    t: float,
    changes: list[tuple[str, str]],
) -> str:
    parts = [f"# fusebench compare: {_name(new)} against {_name(base)}", "", compare_summary.tally_line(counts), ""]
    parts += [*(f"- {moved}" for moved in compare_summary.machine_moved(lines)), ""]
    parts += ["## Runs", "", markdown.table(["", "BASE", "NEW"], _provenance(base, new)), ""]
    if changes:
        parts += [
            f"Devices differ (compared with --allow-device-change): {'; '.join(f'{b} → {n}' for b, n in changes)}",
            "",
        ]
    parts += ["## Rows", "", markdown.table(HEAD, [_cells(line) for line in lines.itertuples(index=False)]), ""]
    parts += [footer(t), "", "![time ratio NEW/BASE per case](compare.png)", ""]
    for label, rows in (("Only in BASE (removed)", removed), ("Only in NEW (added)", added)):
        if not rows.empty:
            body = [
                [
                    compare_rows.case_label(r.scenario, r.params, r.dtype),
                    compare_rows.implementation(r.backend, r.device, r.variant, r.occurrence),
                    str(r.status),
                ]
                for r in rows.itertuples(index=False)
            ]
            parts += [f"## {label}", "", markdown.table(["case", "implementation", "status"], body), ""]
    return "\n".join(parts)


def _provenance(base: store.Run, new: store.Run) -> list[list[str]]:
    sides = [provenance(base), provenance(new)]
    keys = list(dict.fromkeys(k for side in sides for k in side))
    return [[k, sides[0].get(k, "—"), sides[1].get(k, "—")] for k in keys]


def provenance(run: store.Run) -> dict[str, str]:
    """Where a run came from: path, git revision, device names, GPU driver and the key library versions, from
    environment.json where the run has one and from its rows otherwise."""
    env = first_job(run.environment)
    rows = run.results
    found = {"run": str(run.path), "git_rev": str(env.get("git_rev") or _unique(rows, "git_rev"))}
    native = rows[rows["mode"] == "native"] if "mode" in rows else rows
    found["device_name"] = _unique(native, "device_name") or _unique(rows, "device_name")
    gpu = env.get("gpu") or {}
    if isinstance(gpu, dict) and gpu.get("driver"):
        found["gpu driver"] = str(gpu["driver"])
    if cpu := host_cpu(env):
        found["cpu"] = cpu
    versions = _versions(rows, env)
    for name in [*[k for k in KEY_PACKAGES if k in versions], *sorted(k for k in versions if k not in KEY_PACKAGES)]:
        found[name] = versions[name]
    return found


def _unique(rows: pd.DataFrame, column: str) -> str:
    if column not in rows:
        return ""
    values = [str(v) for v in rows[column].dropna().unique() if str(v)]
    return ", ".join(values)


def _versions(rows: pd.DataFrame, env: dict[str, Any]) -> dict[str, str]:
    """Row versions (what the backends are made of), with environment.json's versions of the same packages."""
    found: dict[str, str] = {}
    for text in rows["versions"].dropna().unique() if "versions" in rows else []:
        try:
            found.update({k: str(v) for k, v in json.loads(text).items()})
        except (json.JSONDecodeError, AttributeError):
            continue
    dists = env.get("distributions") or {}
    for name in KEY_PACKAGES:
        if name in dists:
            found[name] = str(dists[name])
    if env.get("python"):
        found["python"] = str(env["python"])
    return found
