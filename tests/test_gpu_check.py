"""`python -m suite gpu-check` on a machine without a GPU: the stack report and skip-not-abort, the plan's case
count and estimate, the per-test time limit, and the dry run that prints what a GPU would run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from suite.cli import compose_jobs
from suite.core import registry, scenario
from suite.core.targets import TARGETS, Availability
from suite.gpu_check import estimate, jobs, main, plan, stack, tests_step
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
    line, warnings = stack.compile_paths("13.0", {"nvrtc": "13.5", "nvvm": "13.5", "nvjitlink": ""})
    found = stack.Stack(gpu, {"torch": "2.11.0", "torch_cuda": "13.0", "numpy": "2.5.0"},
                        {"triton": ["native", "ok"], "numba": ["unavailable", "numba.cuda failed"]}, [], line,
                        warnings)  # fmt: skip
    text = "\n".join(stack.lines(found))
    assert "NVIDIA H200 (sm_90), 132 SMs, L2 60 MiB" in text and "driver    580.65, CUDA 13.0" in text
    assert "run natively: triton" in text and "skipped   numba: numba.cuda failed" in text
    assert "compile   CuPy SASS from NVRTC 13.5, Triton SASS from its own ptxas, numba-cuda PTX from NVVM 13.5" in text
    (warning,) = [line for line in text.splitlines() if line.startswith("warning")]
    assert warning.startswith("warning   numba: numba-cuda's PTX from NVVM 13.5 is newer than the driver's CUDA 13.0")
    assert "nvidia-nvjitlink>=13.5" in warning


@pytest.mark.parametrize(
    ("driver", "toolkit", "risky"),
    [("13.0", {"nvrtc": "13.5", "nvvm": "13.5", "nvjitlink": "13.5"}, set()),  # SASS: a newer minor loads
     ("13.0", {"nvrtc": "13.0", "nvvm": "13.0", "nvjitlink": ""}, set()),  # PTX of the driver's own version
     ("13.0", {"nvrtc": "13.5", "nvvm": "12.8", "nvjitlink": "", "cupy_ptx": "1"}, {"cupy"}),
     ("12.8", {"nvrtc": "13.0", "nvvm": "13.0", "nvjitlink": "13.0"}, {"cupy", "numba"})],  # a newer major
    ids=["sass-minor-newer", "ptx-same", "cupy-ptx-newer", "major-newer"],
)  # fmt: skip
def test_no_kernel_is_left_to_the_driver_jit_compiling_newer_ptx(driver: str, toolkit: dict, risky: set) -> None:
    line, warnings = stack.compile_paths(driver, toolkit)
    assert set(warnings) == risky, warnings
    assert line.endswith(f"driver CUDA {driver}") and line.count("numba-cuda") == 1


IN_TREE = sorted(n for n in scenario.discover() if n not in scenario.plug_ins() and n not in jobs.sitting_out())
GPU_TESTS = [f"{plan.AWKWARD_TEST}{f}]" for f in IN_TREE]
GPU_TESTS += [f"tests/test_gpu_launch_limits.py::test_light_{i}" for i in range(12)]
"""The shape of the default check's gpu tests: one per family that sweeps it, twelve that measure one thing."""


def test_the_plan_counts_every_case_and_fits_its_budget() -> None:
    """Every family's forward kept, what was cut said, within the budget (with whatever plug-ins other tests
    registered in this process: the plan takes them in too)."""
    the_plan = plan.make(quick=False, tests=GPU_TESTS)
    plans = [validate.plan(estimate.job_config(e.job)) for e in the_plan.work]
    assert the_plan.cases == sum(len(p.cases) * len(p.dtypes) for p in plans) and the_plan.cases > 0
    assert set(IN_TREE) <= set(the_plan.families)  # every family present, whatever was cut
    assert [s.name for s in the_plan.steps] == ["tests", "sweep", "report"]
    left_out = [a for a in the_plan.test_args if a.startswith(plan.AWKWARD_TEST)]
    assert the_plan.tests == len(GPU_TESTS) - len(left_out) and the_plan.family_tests == len(IN_TREE) - len(left_out)
    assert len([d for d in the_plan.dropped if d.startswith("dropped   gpu test")]) == len(left_out)
    assert the_plan.steps[0].seconds == pytest.approx(
        plan.STARTUP_S / 2 + the_plan.family_tests * plan.FAMILY_TEST_S + 12 * plan.TEST_S
    )
    assert the_plan.implementations >= the_plan.cases * 2
    assert not the_plan.over_budget and the_plan.seconds <= the_plan.budget_s, the_plan.lines()
    quick = plan.make(quick=True, tests=GPU_TESTS[:1] + GPU_TESTS[-2:])
    assert set(IN_TREE) <= set(quick.families) and not quick.over_budget, quick.lines()
    assert all(e.cases <= len(e.dtypes) for e in quick.work if e.job.family in IN_TREE)  # at its summary case
    assert "estimate  ≈" in "\n".join(quick.lines()) and "within the 7 min budget" in quick.lines()[-1]


def test_torch_compile_is_built_at_each_summary_case_and_skipped_with_a_reason_elsewhere(tmp_path: Path) -> None:
    from suite.gpu_check.sweep_step import narrowed
    from suite.run import runner

    (job,) = [j for j in jobs.family_jobs(quick=False) if (j.family, j.phase) == ("matmul", "forward")]
    (cfg,) = compose_jobs(job.overrides)
    p = validate.plan(cfg)
    summary = estimate.summary_case(p.scenario, p.cases, p.dtypes)
    assert summary[1] == "float16" and '"epilogue": "bias_gelu"' in summary[0]  # the case with a fused pair
    seen = {}
    for one in runner.jobs(cfg, p, tmp_path, set()):
        kept, rows = narrowed(one, estimate.rare_skip(one.params, one.dtype, summary))
        seen[one.params["epilogue"]] = ({v for _b, _d, v in kept.impls()}, [(r.variant, r.status) for r in rows])
    assert "compiled" in seen["bias_gelu"][0] and seen["bias_gelu"][1] == []
    assert "compiled" not in seen["none"][0] and seen["none"][1] == [("compiled", "skipped")]


def test_a_plan_over_its_budget_does_not_start_without_over_budget(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setitem(plan.BUDGET_S, "quick", 10.0)
    monkeypatch.setattr(plan, "collect_tests", lambda args: GPU_TESTS[:3])  # no pytest collection three times
    monkeypatch.setattr(main.stack, "probe_child", lambda: stack.Stack(gpu={"name": "NVIDIA H200"}))
    started = []
    monkeypatch.setattr(main, "run", lambda *args: started.append(args) or 0)
    out = Path("/tmp/never-written-over-budget")
    assert main.main(["--quick", "--out", str(out)]) == 2 and not started
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "over its 0 min budget; pass --over-budget" in err
    assert main.main(["--quick", "--out", str(out), "--over-budget"]) == 0 and len(started) == 1
    assert main.main(["--quick", "--dry-run"]) == 0  # a dry run says so and still prints what would run
    assert "over its 0 min budget" in capsys.readouterr().err


def test_the_estimate_grows_with_the_work() -> None:
    """Compile once per shape-generic kernel, per case for the others; rounds bounded by max_budget_s."""
    timing = {"budget_s": 0.05, "min_reps": 5, "min_blocks": 3, "max_budget_s": 0.15, "graphs": True,
              "energy_s": 0.02, "warmup": 2}  # fmt: skip
    fresh = estimate.implementation_seconds("torch", "compiled", timing, 1e-4, built=False)
    assert fresh - estimate.implementation_seconds("torch", "compiled", timing, 1e-4, built=True) == pytest.approx(
        estimate.COMPILE_S["torch/compiled"]
    )
    slow = estimate.implementation_seconds("cupy", "unfused", timing, 1.0, built=True)
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


def test_the_bundle_is_named_for_its_gpu_and_time() -> None:
    from datetime import datetime

    from suite.gpu_check.main import bundle_name

    when = datetime(2026, 12, 5, 14, 2, 11)
    assert bundle_name("NVIDIA H200", when) == "h200_2026-12-05_14-02-11"
    assert bundle_name("NVIDIA H100 80GB HBM3", when) == "h100_80gb_hbm3_2026-12-05_14-02-11"
    assert bundle_name("", when) == "gpu_check_2026-12-05_14-02-11"


def test_a_family_with_only_rivals_on_cuda_sits_out_said_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A family whose CUDA kernels are all torch's rivals (decoder_layer's, its compositions taken out of the
    registry here, as before it composed on a CUDA backend) has nothing of the suite's to measure: the check leaves
    it out and says why; every family with a kernel of its own stays in, decoder_layer too once it composes."""
    assert "decoder_layer" not in jobs.sitting_out() and "decoder_layer" in IN_TREE
    assert "decoder_layer" in plan.make(quick=True, tests=GPU_TESTS[:1]).families
    for key in registry.REGISTRY.keys(scenario="decoder_layer", device="cuda"):
        if key.variant not in jobs.RIVAL_VARIANTS:
            monkeypatch.delitem(registry.REGISTRY.kernels, key)
    out = jobs.sitting_out()
    assert list(out) == ["decoder_layer"]
    the_plan = plan.make(quick=True, tests=GPU_TESTS[:1])
    assert "decoder_layer" not in the_plan.families
    assert any(
        line.startswith("left out  decoder_layer: no CUDA kernel of the suite's own") for line in the_plan.dropped
    )
