"""The index of the committed runs at the top of results/README.md: for each run, the command that made it, the
host its figures come from, the revision it ran at and that revision's date — every cell read from the run's
own files, never typed, so the index cannot claim a host or a revision a run does not record.

    command   .hydra/overrides.yaml (a run) or multirun.yaml (a sweep: `-m`, the sweep's own directory left out)
    host      environment.json, as the report's provenance prints it (`suite.report.host.host_cpu`)
    revision  the rows' `git_rev` (several where rows came from several; `-dirty`: a tree with uncommitted changes)
    date      the revision's commit date, from git (where the revision is in this clone's history)

A directory without rows of its own (a pair of runs, a GPU run's jobs) is indexed by the runs inside it.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pandas as pd
import yaml

from suite.kit.markdown import table
from suite.kit.store import CSV_NAME, ENVIRONMENT
from suite.report.host import host_cpu

NOT_RECORDED = "not recorded"
HIDDEN = ("hydra.sweep.dir", "hydra.run.dir", "hydra.mode")
"""Overrides that say where a run was written, not what it ran."""


def runs(results: Path) -> list[Path]:
    """The run directories under `results` (symbolic links such as `latest` left out), a directory without rows
    standing for the runs one level inside it."""
    found = []
    for top in sorted(p for p in results.iterdir() if p.is_dir() and not p.is_symlink()):
        if (top / CSV_NAME).exists():
            found.append(top)
        else:
            found.extend(sorted(p for p in top.iterdir() if p.is_dir() and (p / CSV_NAME).exists()))
    return found


def _overrides(items: list[str]) -> str:
    return " ".join(shlex.quote(o) for o in items if not o.startswith(HIDDEN))


def command(run: Path) -> str:
    """`python -m suite ...` as the run was started, from what Hydra recorded in the run's directory."""
    sweep, single = run / "multirun.yaml", run / ".hydra" / "overrides.yaml"
    if sweep.exists():
        task = (yaml.safe_load(sweep.read_text()) or {}).get("hydra", {}).get("overrides", {}).get("task", [])
        return f"python -m suite -m {_overrides(task)}".rstrip()
    if single.exists():
        return f"python -m suite {_overrides(yaml.safe_load(single.read_text()) or [])}".rstrip()
    return NOT_RECORDED


def host(run: Path) -> str:
    path = run / ENVIRONMENT
    if not path.exists():
        return NOT_RECORDED
    return host_cpu(json.loads(path.read_text())) or NOT_RECORDED


def revisions(run: Path) -> list[str]:
    """The revisions the run's rows were measured at."""
    rows = pd.read_csv(run / CSV_NAME, usecols=lambda c: c == "git_rev", dtype=str)
    return sorted({r for r in rows.get("git_rev", pd.Series(dtype=str)).dropna() if r})


def revision_date(revision: str, repo: Path) -> str:
    """The commit date (YYYY-MM-DD) of `revision`, "" where git does not know it here."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "show", "-s", "--format=%cs", revision.removesuffix("-dirty")],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def index(results: Path) -> str:
    """The index as a markdown table, a run a line."""
    body = []
    for run in runs(results):
        revs = revisions(run)
        dates = sorted({d for d in (revision_date(r, results) for r in revs) if d})
        body.append(
            [
                f"`{run.relative_to(results).as_posix()}/`",
                f"`{command(run)}`" if command(run) != NOT_RECORDED else NOT_RECORDED,
                host(run),
                ", ".join(f"`{r}`" for r in revs) or NOT_RECORDED,
                " to ".join(dict.fromkeys([dates[0], dates[-1]])) if dates else "",
            ]
        )
    return table(["run", "command", "host (CPU, core, caches)", "revision", "revision's date"], body)
