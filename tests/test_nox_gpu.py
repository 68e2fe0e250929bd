"""`nox -s gpu` exists (nox -l lists it) and its sweep composes and plans: every family, on the GPU only."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from suite.cli import compose_jobs
from suite.run import validate

ROOT = Path(__file__).resolve().parent.parent


def test_the_gpu_session_is_declared_and_its_sweep_plans() -> None:
    nox = pytest.importorskip("nox")
    spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)
    assert "gpu" in nox.registry.get()
    plans = [validate.plan(cfg) for cfg in compose_jobs(noxfile.GPU_SWEEP)]
    families = {p.scenario.name for p in plans}
    assert families == {"elementwise_chain", "layernorm", "rmsnorm", "softmax", "attention", "matmul"}
    assert all(p.targets == ["cuda"] for p in plans)
