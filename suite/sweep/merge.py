"""A sweep's jobs brought back together: whichever launcher ran them (Hydra's serial one, a local pool, SLURM), the
rows of every job merged into one table, one set of charts and one report at the top of the sweep directory.

A job that did not finish (killed, out of memory, past its time limit, never started) keeps the rows it wrote,
and each case it did not get to becomes an `error` row naming the job and how it ended (`suite.sweep.jobstate`),
so the merged table says what is missing and why. `resume=true` with the same sweep arguments and
`hydra.sweep.dir` skips the finished jobs and completes the others. Where the jobs timed on different devices
(a SLURM sweep over partitions with different GPUs), the report labels every row with its device and sets the
verdicts side by side, as `python -m suite report` does for separate runs: no verdict pairs rows of two devices.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from suite.core.row import COLUMNS, KEY, Row
from suite.kit import store
from suite.run.result import CHARTS, Result
from suite.sweep import jobstate
from suite.sweep.cluster import request  # noqa: F401  (registers the resolver the SLURM launcher's config uses)

CONF = Path(__file__).resolve().parents[2] / "conf"
MULTIRUN_FLAGS = ("-m", "--multirun")
NOT_JOB_OVERRIDES = ("resume=", "+resume=", "++resume=")
"""Overrides that say how to run a job, not which job it is: resuming a sweep adds `resume=true`."""
NOT_RESUME_OVERRIDES = ("hydra.mode=", "hydra.sweep.dir=")
"""Hydra overrides the resume command sets itself (`-m`, the sweep's directory)."""


def job_overrides(args: list[str]) -> list[list[str]]:
    """The override list of every job the command would run, in Hydra's job order (a sweep expands to several)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = [a for a in args if not a.startswith("-") and not a.startswith("hydra")]
    if not any(a in MULTIRUN_FLAGS for a in args):
        return [overrides]
    parsed = OverridesParser.create().parse_overrides(overrides)
    return [job for batch in BasicSweeper.split_arguments(parsed, max_batch_size=None) for job in batch]


def sweep_config(args: list[str]) -> DictConfig:
    """The config of the sweep as a whole, `hydra` node included, composed as Hydra composes it: from the
    overrides that are not swept. Its `hydra.sweep.dir` read here is the sweep's directory (`${now:...}` resolved
    once: the command line passes it on to Hydra, and knows where the merged table will be)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given = [a for a in args if not a.startswith("-")]
    fixed = [o.input_line for o in OverridesParser.create().parse_overrides(given) if not o.is_sweep_override()]
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose(config_name="config", overrides=fixed, return_hydra_config=True)


def sweep_dir(args: list[str]) -> Path | None:
    """The directory of the sweep `args` launch, as `sweep_config` reads it; None where the sweep's config does
    not compose (a `hydra...` override Hydra will refuse, saying why)."""
    try:
        return Path(str(sweep_config(args).hydra.sweep.dir))
    except Exception:
        return None


def quoted(path: Path) -> str:
    """`path` as the value of a Hydra override: quoted where it holds a character the override grammar reads."""
    text = str(path)
    if re.fullmatch(r"[\w./~+:-]+", text):
        return text
    return f"'{text}'" if "'" not in text else f'"{text}"'


def identity(overrides: list[str]) -> list[str]:
    """A job's overrides without those that only say how to run it (its identity across a resume)."""
    return [o for o in overrides if not o.startswith(NOT_JOB_OVERRIDES)]


def finalize(result: Result, runs: list[store.Run] | None = None) -> Result:
    """Charts, report and the `latest` link for a finished (or interrupted) run or sweep; `result` with the files
    they wrote. With `runs` that timed on different devices, one report over them with the device as the facet
    (suite.report.merged)."""
    from suite.report import facets, merged, report
    from suite.run import progress

    frame, outdir = result.table, result.outdir
    if runs and len(runs) > 1 and facets.choose(runs, "auto")[0] == "device":
        path = merged.merge(runs, outdir, "device")
        written = [*sorted((outdir / CHARTS).rglob("*.png")), path]
    else:
        written = report.write(frame, outdir)
    if outdir.parent.name == "results":
        latest = outdir.parent / "latest"
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(outdir.name, target_is_directory=True)
    progress.summary(frame, str(outdir))
    return result.with_paths(*written)


def job_dirs(sweep: Path) -> dict[int, Path]:
    """Job number -> directory, for every job directory of the sweep (named by job.json, else by its number)."""
    found: dict[int, Path] = {}
    for path in sorted(p for p in Path(sweep).iterdir() if p.is_dir() and not p.name.startswith(".")):
        state = jobstate.read(path)
        if state is not None and isinstance(state.get("job"), int):
            found[state["job"]] = path
        elif path.name.isdigit() and (path / store.CSV_NAME).exists():
            found.setdefault(int(path.name), path)
    return found


def merge(sweep: Path, task_overrides: list[str], say: Any = print, hydra_overrides: list[str] | None = None) -> Result:
    """Merge every job of the sweep launched with `task_overrides` into `sweep`; say which jobs did not finish
    and how to complete them, with the launcher they ran through (`hydra_overrides`, else those the sweep saved
    in its multirun.yaml). Return the sweep's Result: the merged table and every file written at its top."""
    from suite.run.results import aggregate

    sweep = Path(sweep)
    expected = [identity(o) for o in job_overrides(["-m", *task_overrides])]
    dirs = job_dirs(sweep)
    runs, failures, unfinished = [], [], []
    for num in sorted(set(range(len(expected))) | set(dirs)):
        path = dirs.get(num, sweep / str(num))
        state = jobstate.read(path)
        overrides = expected[num] if num < len(expected) else list((state or {}).get("overrides", []))
        written = (path / store.CSV_NAME).exists()
        run = store.load(path) if written else store.Run(path, pd.DataFrame(), pd.DataFrame())
        rows = run.results
        if state is None and not rows.empty:
            state = {"status": jobstate.DONE}  # a job of a sweep made before jobs said how they ended
        if state is None or state.get("status") != jobstate.DONE:
            why = jobstate.why_unfinished(state)
            unfinished.append(f"job {num} ({' '.join(overrides) or 'no overrides'}): {why}")
            lost = failure_rows(sweep, num, overrides, path, rows, why)
            failures += lost
            rows = pd.concat([rows, _frame(lost)], ignore_index=True) if lost else rows
        if written or not rows.empty:
            runs.append(replace(run, results=rows))
    tables = [dirs[n] / store.CSV_NAME for n in sorted(dirs) if (dirs[n] / store.CSV_NAME).exists()]
    frame = aggregate(tables, sweep / store.CSV_NAME, extra=failures)
    store.merge_environments([dirs[n] for n in sorted(dirs)], sweep)
    store.write_parquet(sweep)
    names = [store.CSV_NAME, store.REPS_NAME, store.ENVIRONMENT, store.RESULTS_PARQUET, store.REPS_PARQUET]
    result = finalize(Result(frame, sweep, tuple(sweep / n for n in names if (sweep / n).exists())), runs)
    for line in unfinished:
        say(f"sweep: {line}")
    if unfinished:
        hydra_overrides = saved_hydra_overrides(sweep) if hydra_overrides is None else hydra_overrides
        say(
            f"sweep: {len(unfinished)} of {len(expected)} jobs did not finish; their rows are kept in {sweep}. "
            f"Complete it with: {resume_command(sweep, task_overrides, hydra_overrides)}"
        )
    return result


def resume_command(sweep: Path, task_overrides: list[str], hydra_overrides: list[str]) -> str:
    """The command that completes the sweep, quoted for a POSIX shell: its own arguments, its launcher and the
    launcher's settings (`hydra/launcher=slurm hydra.launcher.partition=...`: without them it would finish the
    sweep here, with the default launcher), its directory and `resume=true`."""
    kept = [o for o in hydra_overrides if not o.startswith(NOT_RESUME_OVERRIDES)]
    args = ["python", "-m", "suite", "-m", *identity(task_overrides), *kept, f"hydra.sweep.dir={sweep}", "resume=true"]
    return " ".join(shlex.quote(a) for a in args)


def saved_hydra_overrides(sweep: Path) -> list[str]:
    """The `hydra...` overrides the sweep was launched with, from the multirun.yaml Hydra saved at its start."""
    saved = Path(sweep) / "multirun.yaml"
    if not saved.exists():
        return []
    return [str(o) for o in OmegaConf.load(saved).hydra.overrides.get("hydra", [])]


def _frame(rows: list[Row]) -> pd.DataFrame:
    return pd.DataFrame([r.as_record() for r in rows], columns=COLUMNS)


def failure_rows(sweep: Path, num: int, overrides: list[str], path: Path, written: pd.DataFrame, why: str) -> list[Row]:
    """An `error` row for each (case, implementation) job `num` did not write, naming the job and how it ended.
    The job's config says what it was to run (`_job_config`); where it cannot, one row for all of it."""
    from suite.run import result_rows, validate
    from suite.run.runner import jobs

    run_id = f"{sweep.name}/{num}"
    reason = f"job {num} ({' '.join(overrides) or 'no overrides'}) did not finish: {why}"
    try:
        cfg = _job_config(path, overrides)
        done = {tuple(str(v) for v in r) for r in written[list(KEY)].itertuples(index=False)} if len(written) else set()
        todo = jobs(cfg, validate.prepare(cfg), path, done, run_id)
        rows = [row for job in todo if job.keys() for row in result_rows.lost(job, reason)]
        for i, row in enumerate(rows):
            row.row_id = f"{run_id}#failed{i}"
        return rows
    except Exception as exc:  # the config no longer composes or plans (a plugin gone): one row says what happened
        reason += f" (its cases could not be listed: {exc})"
    scenario = next((o.split("=", 1)[1] for o in overrides if o.startswith("scenario=")), "")
    return [
        Row(
            scenario=scenario,
            params="{}",
            dtype="",
            backend="",
            device="",
            variant="",
            status="error",
            reason=reason,
            run_id=run_id,
            row_id=f"{run_id}#failed0",
        )
    ]


def _job_config(path: Path, overrides: list[str]) -> DictConfig:
    """What job `path` was to run: its own config (`.hydra/config.yaml`, saved before it started), or, for a job
    that never started (refused, or cancelled while queued), its overrides composed as Hydra would have."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    saved = path / ".hydra" / "config.yaml"
    if saved.exists():
        return OmegaConf.load(saved)
    if GlobalHydra.instance().is_initialized():  # the process that ran the sweep: Hydra's own config search path
        return compose(config_name="config", overrides=list(overrides))
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose(config_name="config", overrides=list(overrides))
