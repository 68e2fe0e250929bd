"""`python -m suite gpu-check` on a machine without a GPU: the stack report and skip-not-abort, the plan's case
count and estimate, the per-test time limit, and the dry run that prints what a GPU would run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from suite.cli import compose_jobs
from suite.core.targets import TARGETS, Availability
from suite.gpu_check import main, plan, stack, tests_step
from suite.run import validate


class BrokenTarget:
    """A CUDA target whose library fails as numba-cuda does under NumPy 2.5: at first use, not at import."""

    backend, device = "brokenlib", "cuda"

    def probe(self) -> Availability:
        raise AttributeError("module 'numpy' has no attribute 'row_stack'")


def test_a_backend_that_cannot_load_is_skipped_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(TARGETS, ("brokenlib", "cuda"), BrokenTarget())
    found = stack.Stack(gpu={"error": "none"}, backends=stack._backends())
    mode, why = found.backends["brokenlib"]
    assert mode == "unavailable" and "row_stack" in why
    assert "brokenlib" in found.skipped and "brokenlib" not in found.native
    assert any(line.startswith("skipped   brokenlib: probe failed: AttributeError") for line in stack.lines(found))


def test_the_stack_report_names_the_gpu_and_a_toolkit_newer_than_the_driver() -> None:
    gpu = {"name": "NVIDIA H200", "compute_capability": "9.0", "sms": 132, "l2_bytes": 60 * 2**20,
           "cuda_version": "13.0", "driver_version": "580.65", "sm_clock_mhz": 1980, "sm_clock_max_mhz": 1980}  # fmt: skip
    found = stack.Stack(gpu, {"torch": "2.11.0", "torch_cuda": "13.0", "numpy": "2.5.0"},
                        {"triton": ["native", "ok"], "numba": ["unavailable", "numba.cuda failed"]},
                        [stack.newer_than_driver("numba-cuda's NVVM", "13.5", "13.0")])  # fmt: skip
    text = "\n".join(stack.lines(found))
    assert "NVIDIA H200 (sm_90), 132 SMs, L2 60 MiB" in text and "driver    580.65, CUDA 13.0" in text
    assert "run natively: triton" in text and "skipped   numba: numba.cuda failed" in text
    assert "numba-cuda's NVVM 13.5 is newer than the driver's CUDA 13.0" in text


def test_the_plan_counts_every_case_and_estimates_within_reason() -> None:
    the_plan = plan.make(quick=False, tests=26)
    expected = sum(len(p.cases) * len(p.dtypes) for job in the_plan.jobs for p in map(validate.plan, compose_jobs(job)))
    assert the_plan.cases == expected and the_plan.cases > 0
    assert {p.scenario.name for job in the_plan.jobs for p in map(validate.plan, compose_jobs(job))} == set(
        plan.FAMILIES
    )
    assert [s.name for s in the_plan.steps] == ["tests", "sweep", "report"]
    assert the_plan.implementations >= the_plan.cases * 4  # triton, cupy, numba and torch each: at least one variant
    quick = plan.make(quick=True, tests=12)
    assert quick.cases == len(plan.FAMILIES) and quick.seconds < the_plan.seconds
    assert "estimate  ≈" in "\n".join(quick.lines())


def test_the_estimate_grows_with_the_work() -> None:
    """Compile once per shape-generic kernel, per case for the others; rounds bounded by max_budget_s."""
    timing = {"budget_s": 0.05, "min_reps": 5, "min_blocks": 3, "max_budget_s": 0.15, "graphs": True,
              "energy_s": 0.02, "warmup": 2}  # fmt: skip
    fresh = plan.implementation_seconds("torch", "compiled", timing, 1e-4, built=False)
    assert fresh - plan.implementation_seconds("torch", "compiled", timing, 1e-4, built=True) == pytest.approx(
        plan.COMPILE_S["torch/compiled"]
    )
    slow = plan.implementation_seconds("cupy", "unfused", timing, 1.0, built=True)
    assert slow >= timing["max_budget_s"] + 3.0  # one-second kernels: warm-up and check calls counted


def test_each_test_has_a_limit_and_a_timeout_does_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        textwrap.dedent("""
        import time
        def test_slow():
            time.sleep(30)
        def test_fails():
            assert 1 == 2, "wrong"
        def test_fine():
            pass
    """)
    )
    with (tmp_path / "check.log").open("w") as log:
        found = tests_step.run_tests([str(tmp_path / "test_sample.py")], tmp_path / "ledger.jsonl", log, timeout_s=1.0)
    outcomes = {node.split("::")[-1]: e["outcome"] for node, e in found.outcomes.items()}
    assert outcomes == {"test_slow": "timeout", "test_fails": "failed", "test_fine": "passed"}
    assert found.seconds < 25
    assert "1 passed, 1 failed, 1 timed out" in found.lines()[0]


def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main.parse(["--fast"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--fast" in err and "--quick" in err


def test_the_dry_run_prints_the_stack_the_plan_and_what_a_gpu_would_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["--dry-run", "--quick", "--out", "/tmp/never-written"]) == 0
    text = capsys.readouterr().out
    assert text.index("GPU ") < text.index("plan      --quick") < text.index("estimate  ≈") < text.index("dry run")
    assert "experiment=gpu_attention" in text and "pytest -p suite.gpu_check.pytest_limits" in text
    assert not Path("/tmp/never-written").exists()
