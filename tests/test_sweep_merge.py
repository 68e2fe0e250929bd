"""The pieces of a sweep spread over launchers, tested in-process: which GPU a job gets and whose turn it is on a
shared machine, what a job says about how it ended, and the merge of a sweep whose jobs did not all finish or ran
on different devices."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from suite import cli
from suite.core.errors import ConfigError
from suite.report import facets
from suite.run.runner import run
from suite.sweep import jobstate, placement
from suite.sweep import merge as sweep
from tests.conftest import make_config
from tests.test_harness import FAKE


def test_each_job_gets_its_own_gpu_from_those_visible() -> None:
    assert placement.visible_gpus({"CUDA_VISIBLE_DEVICES": "2, 3"}) == ["2", "3"]
    assert placement.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert placement.visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert placement.visible_gpus({}, count=lambda: 2) == ["0", "1"]
    assert [placement.gpu_for(job, ["2", "3"]) for job in range(5)] == ["2", "3", "2", "3", "2"]
    assert placement.gpu_for(4, []) is None
    assert placement.gpu_only(["cuda"], ["0"]) and not placement.gpu_only(["cpu", "cuda"], ["0"])
    assert not placement.gpu_only(["cuda"], [])  # no GPU: CUDA kernels run in emulation, CPU work
    assert placement.shares_machine("hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher")
    assert not placement.shares_machine("hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher")


def _waits(tmp_path: Path, first: dict, second: dict) -> tuple[bool, list[str]]:
    """Whether a job taking the turn `second` waits while another holds `first`; what it said."""
    said: list[str] = []
    held, entered = threading.Event(), threading.Event()

    def hold() -> None:
        with placement.turn(tmp_path, 0, say=said.append, **first):
            held.set()
            time.sleep(0.5)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    start = time.monotonic()
    with placement.turn(tmp_path, 1, say=said.append, **second):
        entered.set()
        waited = time.monotonic() - start > 0.3
    holder.join()
    return waited, said


def test_a_job_timing_on_the_cpu_has_the_machine_to_itself(tmp_path: Path) -> None:
    cpu, gpu0, gpu1 = {"gpu": None, "alone": True}, {"gpu": "0", "alone": False}, {"gpu": "1", "alone": False}
    waited, said = _waits(tmp_path, cpu, gpu0)
    assert waited and said == ["job 1 waits for jobs timing on the CPU to finish"]
    waited, said = _waits(tmp_path, gpu0, cpu)
    assert waited and said == ["job 1 waits for the machine to itself (it times on the CPU)"]
    waited, said = _waits(tmp_path, gpu0, gpu0)
    assert waited and said == ["job 1 waits for GPU 0, which another job of the sweep holds"]
    waited, said = _waits(tmp_path, gpu0, gpu1)  # two GPUs: side by side
    assert not waited and said == []


def test_a_job_says_how_it_ended_and_resume_skips_only_the_same_finished_job(tmp_path: Path) -> None:
    assert not jobstate.finished(tmp_path, 0, ["dtype=float32"])
    assert "never started" in jobstate.why_unfinished(jobstate.read(tmp_path))
    state = jobstate.begin(tmp_path, 0, ["dtype=float32"])
    assert not jobstate.finished(tmp_path, 0, ["dtype=float32"])
    assert "ended without saying how" in jobstate.why_unfinished(jobstate.read(tmp_path))
    jobstate.end(tmp_path, state, jobstate.FAILED, "RuntimeError: boom", rows=3)
    assert jobstate.why_unfinished(jobstate.read(tmp_path)).endswith(
        "failed on " + state["host"] + ": RuntimeError: boom"
    )
    jobstate.end(tmp_path, state, jobstate.DONE, rows=3)
    assert jobstate.finished(tmp_path, 0, ["dtype=float32"])
    with pytest.raises(ConfigError, match="holds job 0 of another sweep"):
        jobstate.finished(tmp_path, 0, ["dtype=float16"])
    assert sweep.identity(["dtype=float32", "resume=true", "++resume=true"]) == ["dtype=float32"]


def _job(root: Path, num: int, overrides: list[str], status: str | None) -> Path:
    """A job directory as a launcher leaves it: Hydra's saved config, and the rows of a finished job."""
    path = root / str(num)
    cfg = make_config(*FAKE, "variants=[good]")
    (path / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, path / ".hydra" / "config.yaml")
    if status == jobstate.DONE:
        run(cfg, path, show_progress=False, run_id=f"{root.name}/{num}")
    if status is not None:
        state = jobstate.begin(path, num, overrides)
        if status != jobstate.RUNNING:
            jobstate.end(path, state, status)
    return path


JOB = [*FAKE, "variants=[good]"]
"""The overrides every job of the sweeps below shares (`_job` runs them); the jobs differ by seed."""


def test_a_sweep_with_unfinished_jobs_is_merged_with_a_row_for_every_case_not_written(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    task = [*JOB, "seed=0,1,2"]
    _job(root, 0, [*JOB, "seed=0"], jobstate.DONE)
    _job(root, 1, [*JOB, "seed=1"], jobstate.RUNNING)  # killed before its first row
    said: list[str] = []
    frame = sweep.merge(root, task, say=said.append).table  # job 2 never started: no directory at all
    done = frame[frame["run_id"] == "sweep/0"]
    assert len(done) == 2 and (done["status"] == "ok").all()
    killed = frame[frame["run_id"] == "sweep/1"]
    assert sorted(killed["params"]) == sorted(done["params"]) and (killed["status"] == "error").all()
    assert killed["reason"].str.startswith(f"job 1 ({' '.join(JOB)} seed=1) did not finish: its process on ").all()
    never = frame[frame["run_id"] == "sweep/2"]  # its cases composed from its overrides, as Hydra would have
    assert sorted(never["params"]) == sorted(done["params"]) and (never["status"] == "error").all()
    assert never["reason"].str.endswith("seed=2) did not finish: it never started (no job.json)").all()
    assert frame["row_id"].is_unique
    assert said[-1].startswith("sweep: 2 of 3 jobs did not finish") and "seed=0,1,2" in said[-1]
    assert "resume=true" in said[-1] and f"hydra.sweep.dir={root}" in said[-1]
    assert "job 2" in (root / "report.md").read_text(encoding="utf-8")  # the report lists the error rows


def test_jobs_on_different_devices_are_reported_side_by_side(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    for num, device in enumerate(("AMD EPYC", "NVIDIA H200")):
        path = _job(root, num, [f"seed={num}"], jobstate.DONE)
        rows = pd.read_csv(path / "results.csv")
        rows.loc[rows["mode"] == "native", "device_name"] = device  # as if the job landed on another node
        rows.to_csv(path / "results.csv", index=False)
    frame = sweep.merge(root, ["seed=0,1"], say=lambda _: None).table
    assert len(frame) == 4
    table = pd.read_csv(root / "results.csv")
    assert set(table[facets.FACET]) == {"AMD EPYC", "NVIDIA H200"}
    assert "## Verdicts side by side" in (root / "report.md").read_text(encoding="utf-8")


def test_report_of_a_sweep_directory_merges_its_jobs_again(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "sweep"
    _job(root, 0, ["seed=0"], jobstate.DONE)
    OmegaConf.save(OmegaConf.create({"hydra": {"overrides": {"task": ["seed=0"]}}}), root / "multirun.yaml")
    with pytest.raises(SystemExit) as stop:
        cli.main(["report", str(root)])
    assert stop.value.code == 0 and len(pd.read_csv(root / "results.csv")) == 2
    assert f"report: {root / 'report.md'}" in capsys.readouterr().out


def test_a_launcher_whose_plugin_is_missing_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    assert cli.launcher_problem(["-m", "hydra/launcher=pool"]) == (
        "hydra/launcher=pool needs hydra-joblib-launcher: pip install -e '.[pool]'"
    )
    assert cli.launcher_problem(["hydra/launcher=slurm"]).endswith("pip install -e '.[slurm]'")
    assert cli.launcher_problem(["hydra/launcher=basic"]) is None
