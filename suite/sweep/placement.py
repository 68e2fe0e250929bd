"""Where a job of a sweep runs when several jobs share one machine: its own GPU, and the machine to itself while
it times on the CPU.

Hydra's serial launcher runs one job at a time, and SLURM gives each job the GPUs it asked for (it sets
CUDA_VISIBLE_DEVICES). The local parallel launchers (joblib's pool, submitit's local executor) start several
jobs at once on one machine, so here each job is bound to one GPU, picked by its job number from the GPUs
visible, before its worker process is spawned (the worker inherits the binding). Jobs bound to the same GPU, and
every job timing on the CPU, would time each other's load: they are serialised through file locks in the sweep
directory. A job that times on the CPU (or runs CUDA kernels in emulation, which is CPU work) takes the machine
exclusively; jobs timing only on their own GPU share it with each other and exclude those.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from suite.core import targets

SHARED_MACHINE_LAUNCHERS = (
    "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
    "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
)
"""Launchers that run several jobs of a sweep at once on this machine (`hydra/launcher=pool`, `submitit_local`)."""
LOCKS = ".locks"
"""The folder of the sweep directory holding the locks its jobs take."""


def shares_machine(launcher_target: str) -> bool:
    """Whether the launcher (its `_target_`) runs jobs side by side on this machine."""
    return launcher_target in SHARED_MACHINE_LAUNCHERS


def visible_gpus(environ: Mapping[str, str] | None = None, count: Callable[[], int] | None = None) -> list[str]:
    """The GPUs a job may be bound to: CUDA_VISIBLE_DEVICES where set (its entries, indices or UUIDs), else
    the driver's device indices."""
    environ = os.environ if environ is None else environ
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip() and not g.strip().startswith("-")]
    return [str(i) for i in range((count or targets.cuda_device_count)())]


def gpu_for(job: int, gpus: Sequence[str]) -> str | None:
    """Job `job`'s GPU: round robin over the visible ones (None without a GPU)."""
    return gpus[job % len(gpus)] if gpus else None


def gpu_only(devices: Sequence[str], gpus: Sequence[str]) -> bool:
    """A job that times on its GPU alone (device=cuda on a machine with one): it may run beside others."""
    return bool(gpus) and set(devices) == {"cuda"}


@contextlib.contextmanager
def turn(sweep_dir: Path, job: int, gpu: str | None, alone: bool, say: Callable[[str], None] = print) -> Iterator[None]:
    """Hold the locks job `job` needs while it runs: the machine exclusively when `alone` (it times on the CPU),
    else shared, and its GPU exclusively. Waiting is said once, with what the job waits for."""
    folder = Path(sweep_dir) / LOCKS
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        machine = "the machine to itself (it times on the CPU)" if alone else "jobs timing on the CPU to finish"
        held.enter_context(_lock(folder / "cpu.lock", exclusive=alone, say=say, what=f"job {job} waits for {machine}"))
        if gpu is not None and not alone:
            held.enter_context(
                _lock(
                    folder / f"gpu{gpu}.lock",
                    exclusive=True,
                    say=say,
                    what=f"job {job} waits for GPU {gpu}, which another job of the sweep holds",
                )
            )
        yield


@contextlib.contextmanager
def _lock(path: Path, exclusive: bool, say: Callable[[str], None], what: str) -> Iterator[None]:
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            say(what)
            fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
