"""`nox -s gpu` exists (nox -l lists it) and its sweep composes and plans: every family, on the GPU only. The
noxfile is read as source (the test environment has no nox to import it with)."""

from __future__ import annotations

import ast
from pathlib import Path

from suite.cli import compose_jobs
from suite.run import validate

NOXFILE = Path(__file__).resolve().parent.parent / "noxfile.py"


def test_the_gpu_session_is_declared_and_its_sweep_plans() -> None:
    tree = ast.parse(NOXFILE.read_text(encoding="utf-8"))
    sessions = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        for d in node.decorator_list
        if "nox.session" in ast.unparse(d)
    }
    assert "gpu" in sessions
    (sweep,) = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "GPU_SWEEP" for t in n.targets)]  # fmt: skip
    plans = [validate.plan(cfg) for cfg in compose_jobs(sweep)]
    families = {p.scenario.name for p in plans}
    assert families == {"elementwise_chain", "layernorm", "rmsnorm", "softmax", "attention", "matmul"}
    assert all(p.targets == ["cuda"] for p in plans)
