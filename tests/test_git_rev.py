"""The revision a run records: `-dirty` for changed code, not for the run directories under results/ that a run
rewrites when it regenerates a committed run in place."""

from __future__ import annotations

import subprocess
from pathlib import Path

from suite.run.provenance import git_rev


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_a_rewritten_committed_run_is_not_dirty_but_changed_code_is(tmp_path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "suite.py").write_text("x = 1\n")
    (tmp_path / "results" / "run").mkdir(parents=True)
    (tmp_path / "results" / "run" / "results.csv").write_text("a\n1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    (tmp_path / "suite").mkdir()
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "kernel.py").write_text("y = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "two")
    clean = git_rev(tmp_path / "suite")  # as the suite asks: from its own package directory
    assert clean and not clean.endswith("-dirty")

    (tmp_path / "results" / "run" / "results.csv").write_text("a\n2\n")  # the run regenerated in place
    assert git_rev(tmp_path / "suite") == clean

    (tmp_path / "backends" / "kernel.py").write_text("y = 2\n")  # the code it measured changed, elsewhere
    assert git_rev(tmp_path / "suite") == f"{clean}-dirty"
