"""results/README.md's index of committed runs: every cell read from the run's own files (Hydra's record of its
command, environment.json's host, the rows' revision), "not recorded" where a run lacks one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from suite.report import run_index


def _run(path: Path, revs: list[str], environment: dict | None = None) -> Path:
    path.mkdir(parents=True)
    pd.DataFrame({"scenario": ["softmax"] * len(revs), "git_rev": revs}).to_csv(path / "results.csv", index=False)
    if environment is not None:
        (path / "environment.json").write_text(json.dumps(environment))
    return path


def test_each_cell_comes_from_the_runs_files(tmp_path: Path) -> None:
    env = {
        "cpu": {
            "model": "Intel(R) Xeon(R) Processor",
            "microarchitecture": "emeraldrapids",
            "caches": {"L3": 300 << 20},
        }
    }
    one = _run(tmp_path / "one", ["abc123", "abc123"], env)
    (one / ".hydra").mkdir()
    (one / ".hydra" / "overrides.yaml").write_text(
        "- scenario=softmax\n- 'backends=[numba,torch]'\n- hydra.run.dir=x\n"
    )
    sweep = _run(tmp_path / "sweep", ["def456", "abc123-dirty"], env)
    (sweep / "multirun.yaml").write_text(
        "hydra:\n  overrides:\n    task:\n    - experiment=train_rmsnorm,train_layernorm\n    - device=cpu\n"
    )
    _run(tmp_path / "pair" / "a", ["abc123"])  # a directory without rows of its own: indexed by the runs in it
    (tmp_path / "latest").symlink_to(one)
    lines = run_index.index(tmp_path).splitlines()[2:]
    assert [line.split(" | ")[0] for line in lines] == ["| `one/`", "| `pair/a/`", "| `sweep/`"]
    one_line, pair_line, sweep_line = lines
    assert "`python -m suite scenario=softmax 'backends=[numba,torch]'`" in one_line  # the output directory left out
    assert "Intel(R) Xeon(R) Processor, emeraldrapids; caches L3 300 MiB" in one_line
    assert "`abc123`" in one_line and "dirty" not in one_line
    assert "`python -m suite -m experiment=train_rmsnorm,train_layernorm device=cpu`" in sweep_line
    assert "`abc123-dirty`, `def456`" in sweep_line
    assert pair_line.count(run_index.NOT_RECORDED) == 2  # neither its command nor its host


def test_a_revision_in_this_history_has_its_date() -> None:
    root = Path(__file__).resolve().parent.parent
    head = __import__("subprocess").run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return
    date = run_index.revision_date(head.stdout.strip()[:12] + "-dirty", root)
    assert len(date) == 10 and date[4] == "-" and date[7] == "-"
    assert run_index.revision_date("0" * 12, root) == ""
