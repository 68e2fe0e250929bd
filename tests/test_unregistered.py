"""A combination no kernel is registered for has no row, whether the variants were named or not, and the report
names every such combination in one line; `unsupported` is left to a registered kernel refusing a case."""

from __future__ import annotations

import pandas as pd
import pytest

from suite.report import report, unregistered
from suite.run.runner import jobs, run
from suite.run.validate import prepare
from tests.conftest import make_config

TINY = ("scenario=swiglu", "scenario.rows=3", "scenario.cols=67", "backends=[numba,torch]", "device=cpu",
        "timing=quick", "dtype=float32", "isolate=false", "strict=false")  # fmt: skip
NOT_REGISTERED = "numba/cpu swiglu eager; torch/cpu swiglu fused, unfused"
"""numba registers swiglu's fused and unfused kernels, torch its eager one (and compiled, left out: it compiles)."""


@pytest.mark.parametrize("variants", [[], ["variants=[fused,unfused,compiled]"]], ids=["default", "named"])
def test_the_plan_leaves_out_what_no_kernel_is_registered_for(variants: list[str], tmp_path) -> None:
    cfg = make_config(*TINY, *variants)
    planned = {impl for job in jobs(cfg, prepare(cfg), tmp_path, set()) for impl in job.impls()}
    assert ("numba", "cpu", "fused") in planned and ("torch", "cpu", "compiled") in planned
    assert not planned & {("numba", "cpu", "compiled"), ("torch", "cpu", "fused"), ("torch", "cpu", "unfused")}


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, str]:
    where = tmp_path_factory.mktemp("named")
    table = run(make_config(*TINY, "variants=[fused,unfused,eager]"), where, show_progress=False).table
    return table, "\n\n".join(report.sections(table, [], where))


def test_no_row_for_a_combination_nothing_registered(ran: tuple[pd.DataFrame, str]) -> None:
    table, _ = ran
    have = set(zip(table["backend"] + "/" + table["device"], table["variant"], strict=True))
    assert have == {("numba/cpu", "fused"), ("numba/cpu", "unfused"), ("torch/cpu", "eager")}
    assert (table["status"] == "ok").all(), table[["backend", "variant", "status", "reason"]]


def test_the_report_names_them_in_one_line(ran: tuple[pd.DataFrame, str]) -> None:
    _, text = ran
    said = [line for line in text.splitlines() if line.startswith("**Not registered**")]
    assert said == [f"**Not registered** (no kernel for these, so no row): {NOT_REGISTERED}."]
    assert "unsupported" not in text


def test_rows_an_older_run_wrote_for_them_leave_the_tables_for_the_line() -> None:
    rows = pd.DataFrame(
        {
            "scenario": ["rope"] * 3,
            "phase": ["forward", "forward", "backward"],
            "impl": ["numba/cpu", "torch/cpu", "torch/cpu"],
            "backend": ["numba", "torch", "torch"],
            "device": ["cpu"] * 3,
            "variant": ["fused", "fused", "fused"],
            "status": ["ok", "unsupported", "unsupported"],
            "reason": ["", "no torch/cpu kernel for rope fused", "float16: no half tanh"],
        }
    )
    kept, names = unregistered.split(rows)
    assert names == [("torch/cpu rope", "fused")]
    assert list(kept["reason"]) == ["", "float16: no half tanh"]  # a registered kernel refusing a case stays
