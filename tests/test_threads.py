"""`python -m suite` tells idle OpenBLAS threads to sleep before NumPy loads, and a user's own setting wins."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = "import os, suite.__main__; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))"


def _probe(env: dict[str, str]) -> str:
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_the_entry_point_sets_the_timeout() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    assert _probe(env) == "4"


def test_a_users_setting_wins() -> None:
    assert _probe({**os.environ, "OPENBLAS_THREAD_TIMEOUT": "20"}) == "20"
