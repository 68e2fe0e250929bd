"""One job of a sweep, as whichever launcher runs it: its own GPU and its turn on a shared machine, what it says
about itself (job.json), and `resume=true` skipping it once it has finished.

Hydra's serial launcher runs the jobs one after another in this process, with a progress bar over the whole
sweep. The other launchers run them elsewhere (a pool of local processes, submitit's local executor, SLURM), where
a live bar would be garbled or land in a log file: each job prints one line when it ends instead.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from suite.core.errors import ConfigError
from suite.run import progress
from suite.sweep import jobstate, placement
from suite.sweep.merge import identity

SERIAL_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


def run_job(cfg: DictConfig, hydra_cfg: Any) -> None:
    """Run job `hydra_cfg.job.num` of the sweep into its own directory; exit 2 on a config it cannot run, 130 on
    Ctrl-C, with job.json saying how it ended in every case (a killed job leaves it `running`)."""
    from suite.run.runner import run

    num, outdir = int(hydra_cfg.job.num), Path(hydra_cfg.runtime.output_dir)
    sweep_dir = Path(str(hydra_cfg.sweep.dir))
    overrides = identity([str(o) for o in hydra_cfg.overrides.task])
    launcher = str(hydra_cfg.launcher.get("_target_", ""))
    serial = launcher == SERIAL_LAUNCHER
    state: dict[str, Any] | None = None
    started = time.monotonic()
    try:
        if cfg.resume and jobstate.finished(outdir, num, overrides):
            print(f"job {num}: finished in an earlier run of this sweep; skipped")
            return
        gpu, turn = _placement(cfg, launcher, sweep_dir, num)
        with turn:  # the job starts once it has its turn: job.json's start and end bound when it held the machine
            state = {**jobstate.begin(outdir, num, overrides, gpu), **_slurm_cpus()}
            plan = progress.Sweep.read(sweep_dir)  # the command line's count of every job's cases
            frame = run(cfg, outdir, show_progress=serial, run_id=f"{sweep_dir.name}/{num}", job=num, sweep=plan).table
            jobstate.end(outdir, state, jobstate.DONE, rows=len(frame))  # before the next job's turn begins
    except ConfigError as exc:
        if state is not None:
            jobstate.end(outdir, state, jobstate.FAILED, str(exc))
        print(f"fusebench: error: job {num}: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        jobstate.end(outdir, state or {}, jobstate.INTERRUPTED, "Ctrl-C")
        print(
            f"\ninterrupted: job {num}'s rows are kept in {outdir}; rerun the sweep with resume=true", file=sys.stderr
        )
        sys.exit(130)
    except BaseException as exc:
        if state is not None:
            jobstate.end(outdir, state, jobstate.FAILED, f"{type(exc).__name__}: {exc}")
        raise
    if not serial:
        tally = ", ".join(f"{k} {v}" for k, v in sorted(Counter(frame["status"]).items())) or "none"
        print(f"job {num}: {len(frame)} rows ({tally}) in {time.monotonic() - started:.0f} s, {outdir}", flush=True)


def _slurm_cpus(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Under SLURM, Numba's threads are the CPUs the job was given, whatever the node has: SLURM binds the job
    to them (task/affinity), and a NUMBA_NUM_THREADS carried over from the submitting shell must not ask for
    more, or two jobs sharing a node time each other. Set before the worker processes start; what it set and
    the job's SLURM id go to job.json."""
    env = os.environ if environ is None else environ
    if "SLURM_JOB_ID" not in env:
        return {}
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    given = int(env["SLURM_CPUS_PER_TASK"]) if env.get("SLURM_CPUS_PER_TASK", "").isdigit() else usable
    threads = min(
        usable, given, *([int(env["NUMBA_NUM_THREADS"])] if env.get("NUMBA_NUM_THREADS", "").isdigit() else [])
    )
    env["NUMBA_NUM_THREADS"] = str(max(1, threads))
    array = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    slurm_job = f"{array[0]}_{array[1]}" if all(array) else env["SLURM_JOB_ID"]
    return {"slurm_job": slurm_job, "usable_cpus": usable, "numba_threads": int(env["NUMBA_NUM_THREADS"])}


def _placement(cfg: DictConfig, launcher: str, sweep_dir: Path, num: int) -> tuple[str | None, Any]:
    """Where the job runs on a machine it shares with other jobs (see suite.sweep.placement): it is bound to its
    GPU before its worker process starts, and takes its turn through the sweep's locks."""
    if not placement.shares_machine(launcher):
        return None, contextlib.nullcontext()
    gpus = placement.visible_gpus()
    gpu = placement.gpu_for(num, gpus)
    if gpu is not None:
        if not cfg.isolate:
            raise ConfigError(
                "isolate=false runs every job's kernels in the launcher's own process, bound to the "
                "first GPU it touched; a launcher sharing this machine needs isolate=true"
            )
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    alone = not placement.gpu_only([str(d) for d in cfg.device.targets], gpus)
    say = lambda text: print(text, flush=True)
    return gpu, placement.turn(sweep_dir, num, gpu, alone, say)
