"""`nox -s gpu` is a thin wrapper: it runs `python -m suite gpu-check` with no virtual environment of its own (so a
GPU image's torch and CUDA libraries are the ones used), passing its arguments on. The noxfile is read as source
(the test environment has no nox to import it with)."""

from __future__ import annotations

import ast
from pathlib import Path

NOXFILE = Path(__file__).resolve().parent.parent / "noxfile.py"


def _session(name: str) -> ast.FunctionDef:
    tree = ast.parse(NOXFILE.read_text(encoding="utf-8"))
    (found,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found


def test_the_gpu_session_runs_the_check_in_the_environment_at_hand() -> None:
    gpu = _session("gpu")
    (decorator,) = [ast.unparse(d) for d in gpu.decorator_list if "nox.session" in ast.unparse(d)]
    assert "venv_backend='none'" in decorator
    body = ast.unparse(gpu)
    assert "session.run('python', '-m', 'suite', 'gpu-check', *session.posargs" in body
    assert "session.install" not in body
