"""How the SLURM launcher tells a running job from one that ended without a result, on clusters with and
without accounting.

submitit asks `sacct` for job states. Without accounting (no slurmdbd) sacct only errors, every job reads
UNKNOWN, and a job that was cancelled or killed before writing its result is waited for forever. This watch asks
sacct while it answers and `squeue` otherwise (and for jobs sacct does not list yet). squeue keeps an ended job
for a few minutes (MinJobAge) with how it ended (CANCELLED, FAILED, TIMEOUT, ...); a job it no longer lists at
all (a pending array task that was cancelled vanishes at once) is GONE once two answers some seconds apart agree,
so the wait for it ends. States are polled at 2, 4, 8, ... s after the last submission and then every `delay_s`,
which bounds how long a lost job is waited for.

hydra-submitit-launcher waits for the jobs one after another and stops at the first without a result, while the
others may still run. Before such a sweep is merged, `settle` waits for the rest of its job array (the jobs
still running keep their rows) and writes, for each job that ended without saying how, the SLURM job and its
state into its job.json: its cases become `error` rows that say so, and `resume=true` reruns it.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from submitit.slurm import slurm
from submitit.slurm.slurm import SlurmInfoWatcher

from suite.sweep import jobstate

GONE = "GONE"
"""The state of a job SLURM no longer lists anywhere: it ended, and nothing is left to say how."""
GONE_AFTER_S = 5.0
"""A job is GONE when squeue has not listed it in answers at least this far apart (one missing listing is not
enough: a controller restarting or a job being requeued can drop it for a moment)."""


class SlurmWatch(SlurmInfoWatcher):
    """submitit's sacct watcher, falling back to squeue for jobs sacct cannot tell about (see module doc)."""

    def __init__(
        self, delay_s: int = 30, run: Callable[..., Any] = subprocess.run, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(delay_s)
        self._run = run
        self._clock = clock
        self._sacct_works = True
        self._missing_since: dict[str, float] = {}

    def update(self) -> None:
        """Refresh the state of every registered job that has not ended: sacct first, squeue for the rest."""
        pending = sorted(self._registered - self._finished)
        if not pending:
            return
        self._num_calls += 1
        found = self._from_sacct() if self._sacct_works else {}
        unknown = [j for j in pending if not found.get(j, {}).get("State")]
        if unknown:
            found.update(self._from_squeue(unknown))
        self._info_dict.update(found)
        self._last_status_check = time.time()
        for job_id in pending:
            if self.is_done(job_id, mode="cache"):
                self._finished.add(job_id)

    def _from_sacct(self) -> dict[str, dict[str, str]]:
        command = self._make_command()
        done = self._run(command, capture_output=True, text=True, timeout=60) if command else None
        if done is None or done.returncode != 0:
            self._sacct_works = not (done is not None and "accounting storage is disabled" in done.stderr)
            return {}
        return self.read_info(done.stdout)

    def _from_squeue(self, job_ids: list[str]) -> dict[str, dict[str, str]]:
        done = self._run(
            ["squeue", "--me", "--noheader", "--array", "--states=all", "--format=%i|%T|%N"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            return {}  # the controller did not answer: nothing is known, nothing is decided
        listed = read_squeue(done.stdout)
        now, found = self._clock(), {}
        for job_id in job_ids:
            if job_id in listed:
                self._missing_since.pop(job_id, None)
                found[job_id] = listed[job_id]
                continue
            since = self._missing_since.setdefault(job_id, now)
            if now - since >= GONE_AFTER_S:
                found[job_id] = {"JobID": job_id, "State": GONE, "NodeList": ""}
        return found


def read_squeue(text: str) -> dict[str, dict[str, str]]:
    """`squeue --array --format=%i|%T|%N` lines -> job id (`<array job>_<task>`, or `<job>`) -> its state."""
    found = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 2 and parts[0]:
            found[parts[0]] = {"JobID": parts[0], "State": parts[1], "NodeList": parts[2] if len(parts) > 2 else ""}
    return found


def describe(job_id: str, state: str) -> str:
    """How a job that left no result ended, in words for its rows."""
    if state == GONE:
        return (
            f"SLURM no longer knows SLURM job {job_id} (cancelled before it started, or ended longer ago "
            "than SLURM keeps jobs, with no accounting to ask)"
        )
    return f"SLURM job {job_id} ended {state} without a result"


def install() -> SlurmWatch:
    """Make a SlurmWatch the watcher of every SLURM job submitit creates in this process: submitit shares one
    watcher among all jobs of a class, as the class attribute `SlurmJob.watcher`, and this replaces it."""
    if not isinstance(slurm.SlurmJob.watcher, SlurmWatch):
        slurm.SlurmJob.watcher = SlurmWatch()
    return slurm.SlurmJob.watcher


def array_jobs(sweep: Path, since: float) -> dict[str, int]:
    """SLURM job id -> job number, for the array tasks submitit made for this sweep since `since` (time.time()):
    the folders `<sweep>/.submitit/<array>_<task>`. Hydra's sweeper submits the whole sweep as one array, so
    the task index is the job number."""
    folder = Path(sweep) / ".submitit"
    if not folder.is_dir():
        return {}
    found = [p for p in folder.iterdir() if re.fullmatch(r"\d+_\d+", p.name) and p.stat().st_mtime >= since - 1]
    return {p.name: int(p.name.split("_")[1]) for p in found}


REFUSED = "SLURM refused the submission of the sweep's job array"


def refused(sweep: Path, since: float) -> bool:
    """Whether a submission since `since` was refused: submitit writes the sbatch script into `.submitit` and
    moves it into the job's folder once sbatch gives a job id; a refused one stays where it was written."""
    folder = Path(sweep) / ".submitit"
    return folder.is_dir() and any(p.stat().st_mtime >= since - 1 for p in folder.glob(".submission_file_*.sh"))


def settle(
    sweep: Path,
    since: float,
    overrides: list[list[str]],
    watcher: SlurmWatch | None = None,
    sleep: Callable[[float], None] = time.sleep,
    max_poll_s: float = 30.0,
    say: Callable[[str], None] = print,
) -> dict[int, str]:
    """Wait until every job of the sweep's array submitted since `since` has ended (a result, or an ended state:
    see SlurmWatch), then say in job.json how each job that left no result ended, where the job could not say it
    itself. `overrides`: each job's identity (suite.sweep.identity), for resume. Ctrl-C stops the wait: the jobs
    still queued or running are left to finish, to be merged later. Returns job number -> reason."""
    jobs = array_jobs(sweep, since)
    try:
        lost = _wait(Path(sweep) / ".submitit", jobs, watcher or install(), sleep, max_poll_s, say)
    except KeyboardInterrupt:
        say(f"sweep: not waiting for the jobs still on SLURM; merge them once they end: python -m suite report {sweep}")
        return {}
    if not jobs and refused(sweep, since):
        lost = {num: REFUSED for num in range(len(overrides))}
    said = {}
    for num, why in sorted(lost.items()):
        path = Path(sweep) / str(num)
        state = jobstate.read(path)
        if state is None or state.get("status") == jobstate.RUNNING:
            mine = overrides[num] if num < len(overrides) else []
            jobstate.end(path, state or {"job": num, "overrides": mine}, jobstate.FAILED, why)
            said[num] = why
    return said


def _wait(
    folder: Path,
    jobs: dict[str, int],
    watcher: SlurmWatch,
    sleep: Callable[[float], None],
    max_poll_s: float,
    say: Callable[[str], None],
) -> dict[int, str]:
    """Poll until every job has a result or has ended; job number -> how each that left no result ended."""
    has_result = lambda job_id: any((folder / job_id).glob("*_result.pkl"))
    for job_id in jobs:
        watcher.register_job(job_id)
    poll_s = 1.0
    while True:
        watcher.update()
        running = [j for j in jobs if not has_result(j) and not watcher.is_done(j, mode="cache")]
        if not running:
            break
        if poll_s == 1.0:
            say(
                f"sweep: waiting for {len(running)} jobs of the array still on SLURM ({', '.join(running)}; Ctrl-C "
                "merges what is there now)"
            )
        sleep(poll_s)
        poll_s = min(2 * poll_s, max_poll_s)
    return {num: describe(j, watcher.get_state(j, mode="cache")) for j, num in jobs.items() if not has_result(j)}
