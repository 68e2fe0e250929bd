"""The SLURM launcher's pieces, tested without SLURM (fakes stand in for sbatch, sacct and squeue): a sweep in
which nothing ran still merges, the command completing a sweep repeats its launcher, quoted for a shell, the
request follows the sweep and is checked before any job is queued, a missing plugin is one line, a job SLURM
cancelled or lost ends the wait and its cases become `error` rows, and a job's Numba threads follow its CPUs.
`tests/test_slurm_cluster.py` runs the same paths against a real SLURM (`nox -s slurm`)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from suite import cli
from suite.sweep import job as sweep_job
from suite.sweep import jobstate
from suite.sweep import merge as sweep
from suite.sweep.cluster import request, watch
from tests.conftest import make_config
from tests.test_harness import FAKE

JOB = [*FAKE, "variants=[good]"]


def test_a_sweep_in_which_nothing_ran_still_writes_its_error_rows_report_and_resume_command(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    (root / ".submitit").mkdir(parents=True)  # sbatch refused the array: submitit's script stayed where it was written
    (root / ".submitit" / ".submission_file_0123.sh").write_text("#!/bin/bash\n")
    jobs = [[*JOB, f"seed={n}"] for n in range(2)]
    assert watch.settle(root, since=0.0, overrides=jobs, watcher=watch.SlurmWatch(run=None), say=print) == {
        0: watch.REFUSED,
        1: watch.REFUSED,
    }
    said: list[str] = []
    frame = sweep.merge(root, [*JOB, "seed=0,1"], say=said.append, hydra_overrides=[]).table
    assert len(frame) == 4 and (frame["status"] == "error").all()  # two cases of each of the two jobs
    assert frame["reason"].str.endswith(f"did not finish: it failed: {watch.REFUSED}").all()
    assert len(pd.read_csv(root / "results.csv")) == 4
    assert list(pd.read_csv(root / "reps.csv").columns)[:2] == ["row_id", "variant"]
    assert (root / "report.md").exists()
    assert said[-1].startswith("sweep: 2 of 2 jobs did not finish") and "resume=true" in said[-1]


def test_the_resume_command_repeats_the_launcher_and_its_settings_quoted_for_a_shell(tmp_path: Path) -> None:
    task = ["scenario.ops=[scale,gelu]", "scenario.n=4096,65536", "resume=true"]
    launcher = ["hydra/launcher=slurm", "hydra.launcher.partition=debug", "hydra.mode=MULTIRUN",
                "hydra.sweep.dir=/old/place"]  # fmt: skip
    command = sweep.resume_command(tmp_path / "my sweep", task, launcher)
    assert shlex.split(command) == ["python", "-m", "suite", "-m", "scenario.ops=[scale,gelu]",
                                    "scenario.n=4096,65536", "hydra/launcher=slurm", "hydra.launcher.partition=debug",
                                    f"hydra.sweep.dir={tmp_path / 'my sweep'}", "resume=true"]  # fmt: skip
    assert "'scenario.ops=[scale,gelu]'" in command  # unquoted, a shell would glob the brackets
    saved = {"hydra": {"overrides": {"task": task, "hydra": launcher}}}
    OmegaConf.save(OmegaConf.create(saved), tmp_path / "multirun.yaml")
    assert sweep.saved_hydra_overrides(tmp_path) == launcher  # `python -m suite report SWEEP` finds them there


def test_a_launcher_with_no_hydra_plugin_installed_at_all_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def find_spec(name: str) -> None:  # what importlib does when the parent package is missing too
        raise ModuleNotFoundError(f"No module named '{name.split('.')[0]}'")

    monkeypatch.setattr(cli.importlib.util, "find_spec", find_spec)
    assert cli.launcher_problem(["-m", "hydra/launcher=submitit_local"]) == (
        "hydra/launcher=submitit_local needs hydra-submitit-launcher: pip install -e '.[slurm]'"
    )


def _launcher(*overrides: str) -> dict:
    from hydra import compose, initialize_config_dir

    make_config()  # registers the config groups
    with initialize_config_dir(config_dir=str(cli.CONF), version_base=None):
        cfg = compose(config_name="config", overrides=["hydra/launcher=slurm", *overrides], return_hydra_config=True)
    return request.launcher_params(cfg)


def test_the_slurm_request_asks_for_a_gpu_only_where_the_sweep_runs_on_cuda() -> None:
    assert _launcher("device=cpu")["gpus_per_node"] is None
    assert _launcher("device=cuda")["gpus_per_node"] == 1 and _launcher()["gpus_per_node"] == 1  # device=all
    assert _launcher("device=cpu", "hydra.launcher.gpus_per_node=2")["gpus_per_node"] == 2


def _sbatch(returncode: int, stderr: str, seen: list[str]):
    """A fake `subprocess.run` for sbatch --test-only (keeping the script it was shown) and sinfo."""

    def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
        if command[0] == "sinfo":
            return subprocess.CompletedProcess(command, 0, "2|24105|(null)\n", "")
        seen.append(Path(command[-1]).read_text())
        return subprocess.CompletedProcess(command, returncode, "", stderr)

    return run


def test_a_request_slurm_would_refuse_is_one_line_naming_what_was_asked_and_what_the_nodes_have(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")  # submitit looks for srun too
    seen: list[str] = []
    refused = "sbatch: error: Invalid generic resource (gres) specification\n"
    line = request.problem(_launcher(), 2, run=_sbatch(1, refused, seen))
    assert line == ("hydra/launcher=slurm: SLURM would refuse 8 CPUs, 64 GB and 1 GPU per job in the default "
                    "partition (Invalid generic resource (gres) specification); its nodes have at most 2 CPUs, 24 GB "
                    f"and no GPU; set {request.FIELDS_HINT} (device=cpu asks for none)")  # fmt: skip
    script = seen[0]  # the job array as submitit will submit it
    assert "#SBATCH --array=0-1%2" in script and "#SBATCH --gpus-per-node=1" in script
    assert "#SBATCH --cpus-per-task=8" in script and "#SBATCH --mem=64GB" in script
    small = _launcher("device=cpu", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1")
    assert request.problem(small, 2, run=_sbatch(0, "", seen)) is None
    assert "gpus" not in seen[1] and "#SBATCH --cpus-per-task=1" in seen[1]


def _runner(answers: dict[str, subprocess.CompletedProcess], calls: list[str]):
    def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
        calls.append(command[0])
        return answers[command[0]]

    return run


NO_ACCOUNTING = subprocess.CompletedProcess(["sacct"], 1, "", "Slurm accounting storage is disabled\n")


def test_without_accounting_a_cancelled_job_ends_the_wait_and_a_vanished_one_does_after_a_second_look() -> None:
    now = [0.0]
    calls: list[str] = []
    squeue = subprocess.CompletedProcess(["squeue"], 0, "7_0|RUNNING|vm\n7_1|CANCELLED|vm\n", "")
    answers = {"sacct": NO_ACCOUNTING, "squeue": squeue}
    watcher = watch.SlurmWatch(run=_runner(answers, calls), clock=lambda: now[0])
    for job in ("7_0", "7_1", "7_2"):
        watcher.register_job(job)
    watcher.update()
    assert watcher.get_state("7_0", mode="cache") == "RUNNING" and not watcher.is_done("7_0", mode="cache")
    assert watcher.is_done("7_1", mode="cache") and watcher.get_state("7_1", mode="cache") == "CANCELLED"
    assert not watcher.is_done("7_2", mode="cache")  # missing once: maybe the controller blinked
    now[0] = watch.GONE_AFTER_S
    watcher.update()
    assert watcher.get_state("7_2", mode="cache") == watch.GONE and watcher.is_done("7_2", mode="cache")
    assert calls == ["sacct", "squeue", "squeue"]  # sacct is not asked again once it said there is no accounting
    answers["squeue"] = subprocess.CompletedProcess(["squeue"], 1, "", "Unable to contact slurm controller")
    watcher.update()  # no answer: nothing is decided
    assert watcher.get_state("7_0", mode="cache") == "RUNNING"


def test_with_accounting_sacct_says_how_a_job_ended() -> None:
    sacct = subprocess.CompletedProcess(["sacct"], 0, "JobID|State|NodeList\n7_0|COMPLETED|vm\n7_1|TIMEOUT|vm\n", "")
    calls: list[str] = []
    watcher = watch.SlurmWatch(run=_runner({"sacct": sacct}, calls))
    for job in ("7_0", "7_1"):
        watcher.register_job(job)
    watcher.update()
    assert watcher.get_state("7_1", mode="cache") == "TIMEOUT" and calls == ["sacct"]


def _array_task(root: Path, job_id: str, result: bool) -> None:
    folder = root / ".submitit" / job_id
    folder.mkdir(parents=True)
    if result:
        (folder / f"{job_id}_0_result.pkl").write_bytes(b"")


def test_a_lost_job_is_waited_for_no_longer_than_slurm_takes_to_say_so_and_its_cases_become_error_rows(
    tmp_path: Path,
) -> None:
    from tests.test_sweep_merge import _job

    root = tmp_path / "sweep"
    jobs = [[*JOB, f"seed={n}"] for n in range(3)]
    _job(root, 0, jobs[0], jobstate.DONE)
    _job(root, 1, jobs[1], jobstate.RUNNING)  # scancel'ed while it ran
    for job_id, result in (("9_0", True), ("9_1", False), ("9_2", False)):  # 9_2: cancelled while queued
        _array_task(root, job_id, result)
    squeue = subprocess.CompletedProcess(["squeue"], 0, "9_1|CANCELLED|vm\n", "")
    now, slept = [0.0], []
    watcher = watch.SlurmWatch(run=_runner({"sacct": NO_ACCOUNTING, "squeue": squeue}, []), clock=lambda: now[0])

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    said = watch.settle(root, since=0.0, overrides=jobs, watcher=watcher, sleep=sleep, say=lambda _: None)
    assert said == {1: "SLURM job 9_1 ended CANCELLED without a result", 2: watch.describe("9_2", watch.GONE)}
    assert sum(slept) < 2 * watch.GONE_AFTER_S
    assert json.loads((root / "2" / "job.json").read_text())["overrides"] == jobs[2]
    assert not jobstate.finished(root / "2", 2, jobs[2])  # resume=true reruns it
    frame = sweep.merge(root, [*JOB, "seed=0,1,2"], say=lambda _: None, hydra_overrides=[]).table
    lost = frame[frame["status"] == "error"]
    assert len(lost) == 4 and len(frame[frame["status"] == "ok"]) == 2
    assert set(lost["reason"].str.split(": ", n=1).str[1]) == {
        f"it failed on {json.loads((root / '1' / 'job.json').read_text())['host']}: {said[1]}",
        f"it failed: {said[2]}",
    }


def test_under_slurm_numba_threads_follow_the_cpus_the_job_was_given() -> None:
    env = {"SLURM_JOB_ID": "12", "SLURM_ARRAY_JOB_ID": "11", "SLURM_ARRAY_TASK_ID": "1",
           "SLURM_CPUS_PER_TASK": "1", "NUMBA_NUM_THREADS": "8"}  # fmt: skip
    said = sweep_job._slurm_cpus(env)
    assert env["NUMBA_NUM_THREADS"] == "1" and said["numba_threads"] == 1 and said["slurm_job"] == "11_1"
    assert said["usable_cpus"] >= 1
    assert sweep_job._slurm_cpus({"NUMBA_NUM_THREADS": "8"}) == {}  # not under SLURM: left as it is


def test_ctrl_c_while_the_array_is_waited_for_leaves_the_running_jobs_alone(tmp_path: Path) -> None:
    _array_task(tmp_path, "9_0", result=False)
    squeue = subprocess.CompletedProcess(["squeue"], 0, "9_0|RUNNING|vm\n", "")
    watcher = watch.SlurmWatch(run=_runner({"sacct": NO_ACCOUNTING, "squeue": squeue}, []))
    said: list[str] = []

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    assert watch.settle(tmp_path, 0.0, [["seed=0"]], watcher=watcher, sleep=interrupt, say=said.append) == {}
    assert said[0].startswith("sweep: waiting for 1 jobs of the array still on SLURM (9_0;")
    assert said[-1].endswith(f"python -m suite report {tmp_path}") and jobstate.read(tmp_path / "0") is None
