"""The GPU check's plan comes from the registry: the dry run lists every family with what it would run (Liger's
rows marked as needing their extra, both dtypes for the transformer families) within the 9-minute budget; a
family a plug-in registers joins it in every phase it registers; each family's summary case is in it."""

from __future__ import annotations

import re

import pytest

from suite.core import phases, scenario
from suite.core.row import params_json
from suite.gpu_check import estimate, jobs, main, plan, stack
from suite.run import validate
from tests import toy_training

TWELVE = ["add_rmsnorm", "attention", "cross_entropy", "decoder_layer", "elementwise_chain", "layernorm",
          "linear_cross_entropy", "matmul", "rmsnorm", "rope", "softmax", "swiglu"]  # fmt: skip
"""What the dry run must show here (the suite itself names no family: this list is the test's expectation)."""
TRANSFORMER = ["add_rmsnorm", "swiglu", "rope", "cross_entropy", "linear_cross_entropy"]
GPU_TESTS = [f"{plan.AWKWARD_TEST}{f}]" for f in TWELVE] + [f"tests/test_gpu_device.py::test_{i}" for i in range(12)]


@pytest.fixture(scope="module")
def dry_run() -> str:
    """The dry run's output, with the gpu tests given rather than collected (collection is a pytest of its own)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan, "collect_tests", lambda args: GPU_TESTS)
        mp.setattr(stack, "probe_child", lambda: stack.Stack(gpu={"error": "no CUDA device (a test)"}))
        lines: list[str] = []
        mp.setattr(main, "say", lambda found, log=None: lines.extend(found))
        assert main.main(["--dry-run", "--out", "/tmp/never-written-dry-run"]) == 0
    return "\n".join(lines)


def family_line(text: str, label: str) -> str:
    (line,) = [line for line in text.splitlines() if re.match(rf"    {re.escape(label)} +(float|bfloat)", line)]
    return line


def test_the_dry_run_lists_all_twelve_families_within_nine_minutes(dry_run: str) -> None:
    for family in TWELVE:
        line = family_line(dry_run, family)
        assert "triton fused/unfused" in line and "torch " in line and "cupy " in line, line
        if family in TRANSFORMER:
            assert "float16,bfloat16" in line and "liger library [needs fusebench[liger]]" in line, line
        else:
            assert "liger" not in line
    (minutes,) = re.findall(r"estimate  ≈ ([0-9.]+) min \(within the 9 min budget", dry_run)
    assert float(minutes) <= 9.0
    assert re.search(r"of 1[2-9] families", dry_run)  # twelve and any plug-in the session registered


def test_a_plug_in_family_joins_the_plan_in_every_phase_it_registers() -> None:
    found = [j for j in jobs.family_jobs(quick=False) if j.family == toy_training.NAME]
    assert [j.phase for j in found] == list(phases.PHASES)  # it has a backward pass: forward, backward, train
    assert [j.narrow for j in found] == [False, True, True]  # the further phases at its summary case
    for job in found:
        p = validate.plan(estimate.job_config(job))
        assert p.scenario.name == toy_training.NAME and p.phase == job.phase and list(p.targets) == ["cuda"]
    assert any(f"scenario={toy_training.NAME}" in " ".join(j) for j in plan.make(quick=True, tests=[]).jobs)


def test_unmeasured_families_come_first() -> None:
    order = [j.family for j in jobs.family_jobs(quick=True, measured={"matmul", "attention"})]
    assert order[-2:] == ["attention", "matmul"] and not {"attention", "matmul"} & set(order[:-2])


@pytest.mark.parametrize("family", TWELVE)
def test_each_familys_summary_case_is_in_the_plan_at_the_size_its_report_leads_with(family: str) -> None:
    scn = scenario.get(family)
    (job,) = [j for j in jobs.family_jobs(quick=False) if (j.family, j.phase) == (family, phases.FORWARD)]
    p = validate.plan(estimate.job_config(job))
    leading = [c for c in p.cases if all(c[k] == v for k, v in scn.summary.items())]
    assert scn.summary and len(leading) == 1, (scn.summary, p.cases)
    assert estimate.summary_case(p.scenario, p.cases, p.dtypes) == (params_json(leading[0]), "float16")
    narrowed = estimate.job_estimate(job.__class__(job.family, job.phase, job.base, True, job.dtypes))
    assert set(narrowed.case_seconds) == {(params_json(leading[0]), d) for d in p.dtypes}  # what a cut keeps


def test_the_gpu_tests_awkward_shapes_cover_every_family_in_the_tree() -> None:
    """tests/test_gpu_device.py's AWKWARD: one entry per family under scenarios/ with a hand-written CUDA kernel
    (a family with torch's rivals alone would be the GPU check's sweep's to check), each a valid plan of small
    cases."""
    from suite.core import registry
    from tests.conftest import make_config
    from tests.test_gpu_device import AWKWARD, HAND_WRITTEN

    ours = HAND_WRITTEN.split("=", 1)[1].strip("[]").split(",")
    cuda = {key.scenario for key in registry.discover().keys(device="cuda") if key.backend in ours}
    in_tree = {name for name in scenario.discover() if name not in scenario.plug_ins() and name in cuda}
    assert set(AWKWARD) == in_tree
    for family, shapes in AWKWARD.items():
        p = validate.plan(make_config(f"scenario={family}", "preset=S", *shapes, HAND_WRITTEN, "device=cuda"))
        assert p.cases and all(p.scenario.size(c) < 2**22 for c in p.cases), family
