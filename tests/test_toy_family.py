"""A family the suite has never heard of runs end to end: discovered through a plugin, composed from its own
structured config, run in the worker, measured against its ledger, drawn by the generic charts and given its
own section in the report, while no file under suite/ names it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tests.toy_family as toy
from suite.core.ledger import STORE_MODEL
from suite.report.plots import make_charts
from suite.report.report import write_report
from suite.run.runner import run
from tests.conftest import make_config

SUITE = Path(__file__).resolve().parent.parent / "suite"


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    out = tmp_path_factory.mktemp("toy")
    cfg = make_config("plugins=[tests.toy_family]", f"scenario=base_{toy.NAME}", "preset=S", "backends=[toy]",
                      "device=cpu", "timing=quick", "dtype=float32")  # fmt: skip
    frame = run(cfg, out, show_progress=False).table
    charts = make_charts(frame, out / "charts")
    return frame, charts, write_report(frame, charts, out).read_text(encoding="utf-8")


def test_the_family_runs_in_the_worker_with_ok_timed_rows(ran: tuple) -> None:
    frame, _, _ = ran
    assert len(frame) == 4  # two sizes × fused, unfused
    assert set(frame["status"]) == {"ok"} and set(frame["mode"]) == {"native"}
    assert set(frame["scenario"]) == {toy.NAME} and set(frame["variant"]) == {"fused", "unfused"}
    assert frame["time_ms"].gt(0).all() and frame["max_rel_err"].lt(1e-4).all()


def test_rows_carry_the_familys_ledger(ran: tuple) -> None:
    frame, _, _ = ran
    model = STORE_MODEL["cpu"]
    for row in frame.itertuples():
        n = int(row.size)
        ledger = toy.AxPlusB().ledger({"n": n}, "float32")[row.variant]
        assert row.bytes_modeled == ledger.bytes_moved(model)
        assert row.launches == (2 if row.variant == "unfused" else 1)
    fused = frame[frame["variant"] == "fused"]
    assert (fused["bytes_saved"] == 2 * fused["size"] * np.dtype("float32").itemsize).all()


def test_generic_charts_and_the_familys_section(ran: tuple) -> None:
    _, charts, text = ran
    names = {p.name for p in charts}
    assert {f"{kind}_{toy.NAME}.png" for kind in ("time_vs_size", "speedup", "bandwidth")} <= names
    assert all(p.is_file() and p.stat().st_size > 10_000 for p in charts)
    assert f"## {toy.NAME}" in text and f"](charts/speedup_{toy.NAME}.png)" in text
    assert f"{toy.SECTION}\n\n4 of 4 rows ok" in text
    assert "| case | n | dtype |" in text


def test_no_file_of_the_suite_names_the_family() -> None:
    for path in SUITE.rglob("*.py"):
        assert toy.NAME not in path.read_text(encoding="utf-8"), path


def test_entry_point_families_load_once_and_a_broken_one_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A third party's family comes through the entry-point group; one that fails to import is recorded and named
    when a scenario is not found, and the others still load. The scan runs once per process."""
    from importlib.metadata import EntryPoint

    from suite.core import scenario
    from suite.core.errors import ConfigError

    scans = []

    def entry_points(group: str) -> list[EntryPoint]:
        scans.append(group)
        return [
            EntryPoint("broken", "tests.no_such_family", group),
            EntryPoint("toy", "tests.toy_family:AxPlusB", group),
        ]

    monkeypatch.setattr(scenario, "entry_points", entry_points)
    monkeypatch.setattr(scenario, "_discovered", False)
    monkeypatch.setattr(scenario, "SCENARIOS", {})
    monkeypatch.setattr(scenario, "LOAD_ERRORS", {})
    found = scenario.discover()
    assert isinstance(found[toy.NAME], toy.AxPlusB)
    assert scenario.LOAD_ERRORS["broken"].startswith("ModuleNotFoundError")
    assert scenario.discover() is found and scans == ["fusebench.scenarios"]
    with pytest.raises(ConfigError, match="broken failed to load"):
        scenario.get("nope")


def test_the_family_is_listed_joins_the_model_tour_and_the_gpu_checks_plan(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the suite derives from the registry takes the plug-in in: `suite list`, the model tour (it declares
    `model_tour` and stores that experiment) and the GPU check's plan."""
    from suite import cli, listing
    from suite.core import scenario
    from suite.gpu_check import estimate, jobs
    from suite.run import validate

    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe, one row a line (a parallel test worker may set it)
    listing.list_kernels()
    rows = [[cell.strip() for cell in line.split("│")][1:5] for line in capsys.readouterr().out.splitlines()]
    assert [toy.NAME, "toy", "cpu", "native"] in rows

    assert toy.NAME in scenario.plug_ins() and "layernorm" not in scenario.plug_ins()
    tour = cli.with_model_tour(["model=gpt2", "tokens=64", "plugins=[tests.toy_family]"])
    assert f"model_{toy.NAME}" in tour[-1].removeprefix("experiment=").split(",")
    assert set(tour[-1].removeprefix("experiment=").split(",")) == set(scenario.model_experiments())
    frame = run(make_config("model=gpt2", "tokens=64", f"experiment=model_{toy.NAME}", "backends=[toy]",
                            "device=cpu", "timing=quick", "isolate=false"), tmp_path, show_progress=False).table  # fmt: skip
    assert set(frame["status"]) == {"ok"} and set(frame["size"]) == {64 * 768}
    assert set(frame["model"]) == {"gpt2"} and set(frame["layer"]) == {"a·x + b over tokens × hidden"}

    (job,) = [job for job in jobs.family_jobs(quick=True) if job.family == toy.NAME]
    (cfg,) = cli.compose_jobs(job.overrides)
    assert validate.plan(cfg).scenario.name == toy.NAME and list(cfg.device.targets) == ["cuda"]
    found = estimate.job_estimate(job)
    cases, implementations = found.cases, found.implementations
    assert cases == 2 and implementations == 0  # preset S in float32; the toy backend has no CUDA kernel
