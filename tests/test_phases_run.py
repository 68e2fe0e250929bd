"""The phase axis end to end, on a plug-in family with a backward pass (tests/toy_training.py): each variant's
backward gets what its own forward saved, every output of a backward is judged against its own reference, the
phase is in every row and in the key rows are matched on, and a bad phase is one line naming the valid ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tests.toy_training as toy
from suite.core.errors import ConfigError
from suite.core.row import KEY
from suite.kit.tidy import tidy
from suite.run.runner import run
from suite.run.validate import prepare
from tests.conftest import make_config

ARGS = ("plugins=[tests.toy_training]", f"scenario=base_{toy.NAME}", "preset=S", "backends=[toy]", "device=cpu",
        "timing=quick", "dtype=float32", "strict=false")  # fmt: skip


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = {}
    for phase in ("backward", "train"):
        where = tmp_path_factory.mktemp(phase)
        out[phase] = run(make_config(*ARGS, f"phase={phase}"), where, show_progress=False).table
    return out


@pytest.mark.parametrize("phase", ["backward", "train"])
def test_each_variant_runs_its_phase_with_what_its_own_forward_saved(ran: dict, phase: str) -> None:
    rows = ran[phase].set_index("variant")
    assert set(rows["phase"]) == {phase}
    assert rows.loc["fused", "status"] == rows.loc["unfused", "status"] == "ok"
    n, b = 1001, 1001 * 4
    assert rows.loc["unfused", "saved_bytes"] == 3 * b and rows.loc["fused", "saved_bytes"] == 2 * b
    assert rows.loc["unfused", "saved_bytes_modeled"] == 3 * b and rows.loc["fused", "saved_bytes_modeled"] == 2 * b
    outputs = json.loads(rows.loc["fused", "extra"])["outputs"]
    assert set(outputs) == ({"dx", "dw"} if phase == "backward" else {"y", "dx", "dw"})
    assert rows.loc["fused", "time_ms"] > 0 and n


@pytest.mark.parametrize("phase", ["backward", "train"])
def test_one_wrong_gradient_is_a_mismatch_that_names_it(ran: dict, phase: str) -> None:
    wrong = ran[phase].set_index("variant").loc["wrong"]
    assert wrong["status"] == "mismatch"
    assert wrong["reason"].startswith("dw: max relative error") and "dx" not in wrong["reason"]


def test_the_train_ledger_is_the_forward_then_the_backward(ran: dict) -> None:
    rows = {p: ran[p].set_index("variant") for p in ran}
    b = 1001 * 4
    assert rows["backward"].loc["unfused", "bytes_read"] == 5 * b  # t, dy; w, dy, x
    assert rows["train"].loc["unfused", "bytes_read"] == 5 * b + 3 * b  # the forward's x; t, w
    assert rows["train"].loc["fused", "launches"] == 2


def test_the_phase_is_part_of_every_key(ran: dict) -> None:
    both = tidy(__import__("pandas").concat([ran["backward"], ran["train"]], ignore_index=True))
    assert "phase" in KEY
    assert not both.duplicated(list(KEY)).any()
    assert both["series"].str.startswith(("backward: ", "train: ")).all()


def test_a_bad_phase_is_one_line_naming_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"^unknown phase 'backwards'; valid: forward, backward, train$"):
        prepare(make_config(*ARGS, "phase=backwards"))


def test_a_family_without_a_backward_sits_out_with_one_line(tmp_path: Path) -> None:
    plan = prepare(make_config(*ARGS[:1], "plugins=[tests.toy_family]", "scenario=base_toy_axpb", "phase=train"))
    assert plan.cases == [] and plan.left_out.startswith("toy_axpb has no backward pass")


def test_the_report_has_a_line_per_phase_and_says_what_fusion_stops_keeping(ran: dict, tmp_path: Path) -> None:
    from suite.report.report import write_report

    both = __import__("pandas").concat([ran["backward"], ran["train"]], ignore_index=True)
    text = write_report(both, [], tmp_path).read_text(encoding="utf-8")
    glance = text.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    assert "| phase |" in glance and "| backward |" in glance and "| train |" in glance
    assert "### Kept for the backward pass" in text
    assert "fused stops keeping t (0.01 → 0.01 MiB)" in text


def test_compare_matches_a_table_from_before_phases_as_forward_and_never_a_backward_with_a_forward(
    ran: dict, tmp_path: Path
) -> None:
    from suite.kit import store
    from suite.report import compare_rows

    backward = ran["backward"]
    as_forward = backward.assign(phase="forward")
    old = as_forward.drop(columns=["phase"])  # a table written before the phase column
    for name, frame in (("old", old), ("forward", as_forward), ("backward", backward)):
        (tmp_path / name).mkdir()
        frame.to_csv(tmp_path / name / "results.csv", index=False)
    load = lambda name: store.load(tmp_path / name).results
    matched, removed, added = compare_rows.match(load("old"), load("forward"))
    assert len(matched) == len(backward) and removed.empty and added.empty
    matched, removed, added = compare_rows.match(load("forward"), load("backward"))
    assert matched.empty and len(removed) == len(added) == len(backward)


def test_the_training_tour_plans_every_family_with_a_backward_in_the_train_phase(capsys) -> None:
    from suite.cli import precheck, with_training_tour
    from suite.core import phases
    from suite.core import scenario as scenarios

    families = [s for s in scenarios.discover().values() if phases.BACKWARD in phases.phases_of(s)]
    assert {s.name for s in families} >= {"elementwise_chain", "rmsnorm", "cross_entropy", "linear_cross_entropy"}
    assert all(s.train_tour for s in families if not s.name.startswith("toy"))
    args = with_training_tour(["training"])
    assert args[0] == "-m" and args[1] == "experiment=" + ",".join(scenarios.training_experiments())
    checked = precheck(args)
    assert len(checked.cases) == len(scenarios.training_experiments()) and all(checked.cases)
    assert "no backward pass" not in capsys.readouterr().err


def test_peers_compare_each_output_against_its_own_tolerance() -> None:
    """A dweight that differs between two kernels by 8e-4, within its tolerance of 4e-3 but above dx's of 2e-4,
    is no disagreement; the same difference in dx is one, and says which output."""
    import numpy as np

    from suite.run.measure import peers
    from suite.run.stages import Availability, Check, Stages

    def found(dw_off: float, dx_off: float) -> dict:
        outs = {"dx": np.linspace(1, 2, 64), "dw": np.linspace(1, 2, 64)}
        notes = {"outputs": {"dx": {"tolerance": 2e-4}, "dw": {"tolerance": 4e-3}}}
        other = {"dx": outs["dx"] * (1 + dx_off), "dw": outs["dw"] * (1 + dw_off)}
        make = lambda out: Stages(Availability("native"), check=Check("ok", out=out, tolerance=2e-4, notes=notes))
        return {"a": make(outs), "b": make(other)}

    calm = peers(found(8e-4, 0.0))
    assert all(s.peer.status == "" for s in calm.values()) and calm["a"].peer.peer_err > 7e-4
    off = peers(found(0.0, 8e-4))
    assert off["a"].peer.status == "mismatch" and off["a"].peer.reason.startswith("dx differs")


def test_the_list_names_each_backends_phases(capsys, monkeypatch) -> None:
    from suite import listing

    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe, one row a line (a parallel test worker may set it)
    listing.list_kernels()
    lines = capsys.readouterr().out.splitlines()
    row = lambda family, backend: next(
        ln for ln in lines if f" {family} " in ln and f" {backend} " in ln and " cpu " in ln
    )
    assert "forward, backward, train" in row("rmsnorm", "numba")
    assert "forward" in row("attention", "numba") and "backward" not in row("attention", "numba")
