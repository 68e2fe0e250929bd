"""A plug-in author's path through the command line: a family from the entry-point group selected by its name, a
family and a backend that fail to import named with their errors (in `suite list` and in a run), the exit status
a run's rows decide, and a row's reproduce command that repeats the backend options it ran with."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from suite.run import outcome
from suite.run.runner import run
from tests.conftest import make_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """A distribution declaring the toy family, a family and a backend whose modules do not exist."""
    site = tmp_path_factory.mktemp("site")
    dist = site / "fusebench_mine-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fusebench-mine\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[fusebench.scenarios]\ntoy = tests.toy_family:AxPlusB\nbroken_family = tests.no_such_family\n\n"
        "[fusebench.backends]\nbroken_backend = tests.no_such_backend\n"
    )
    paths = [str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]
    found = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    found.pop("COLUMNS", None)
    return found


def suite(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip


def test_list_names_what_failed_to_load_and_does_not_wrap(env) -> None:
    result = suite(env, "list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("toy_axpb" in line and "toy" in line and "native" in line for line in lines), result.stdout
    for name in ("broken_family", "broken_backend"):
        assert any(name in line and "ModuleNotFoundError" in line for line in lines), result.stdout
    assert len(lines) < 150


def test_a_broken_family_asked_for_by_name_is_named_with_its_error(env) -> None:
    result = suite(env, "scenario=broken_family")
    assert result.returncode == 2
    assert result.stderr.strip().startswith("fusebench: error: scenario 'broken_family' failed to load: Module")
    result = suite(env, "scenario=nope")
    assert result.returncode == 2 and "toy_axpb" in result.stderr and "broken_family failed to load" in result.stderr


def test_a_plugin_family_runs_by_its_name_and_a_broken_backend_says_why(env, tmp_path) -> None:
    out = tmp_path / "run"
    result = suite(env, "scenario=toy_axpb", "preset=S", "backends=[toy,broken_backend]", "device=cpu",
                   "timing=quick", "dtype=float32", "scenario.n=4096", f"hydra.run.dir={out}")  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = pd.read_csv(out / "results.csv").set_index("backend")
    assert set(rows.loc["toy", "status"]) == {"ok"}
    assert rows.loc["toy", "command"].str.startswith("python -m suite scenario=toy_axpb ").all()
    broken = rows.loc[["broken_backend"]]
    assert set(broken["status"]) == {"skipped"} and broken["reason"].str.contains("ModuleNotFoundError").all()


def test_a_mismatch_row_exits_three_unless_not_strict(tmp_path) -> None:
    args = ["plugins=[tests.fakes]", "scenario=fake_double", "preset=S", "backends=[fake]", "device=cpu",
            "timing=quick", "dtype=float32", "variants=[good,wrong]", "scenario.n=7", "isolate=false"]  # fmt: skip
    result = suite(dict(os.environ), *args, f"hydra.run.dir={tmp_path / 'a'}")
    assert result.returncode == outcome.FAILED == 3, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith("fusebench: 1 row(s) mismatch or error: exit 3")
    frame = pd.read_csv(tmp_path / "a" / "results.csv")
    assert outcome.status(strict=False, frame=frame) == 0
    assert outcome.status(strict=True, frame=frame[frame["status"] == "ok"]) == 0


def test_the_reproduce_command_repeats_the_options_and_gives_the_same_launch(tmp_path) -> None:
    """A Numba CUDA row (in the simulator here) measured with backend_options.numba.block=64: its command, run
    again, launches the same way."""
    cfg = make_config("scenario=elementwise_chain", "scenario.n=4096", "scenario.ops=[scale,gelu]", "preset=S",
                      "backends=[numba]", "device=cuda", "variants=[fused]", "dtype=float32", "timing=quick",
                      "isolate=false", "++backend_options.numba.block=64")  # fmt: skip
    first = run(cfg, tmp_path / "first", show_progress=False).table.iloc[0]
    assert first["status"] == "ok", first["reason"]
    assert json.loads(first["backend_options"])["block"] == 64
    words = shlex.split(first["command"])
    assert "backend_options.numba.block=64" in words
    overrides = [("++" + w if w.startswith("backend_options.") else w) for w in words[3:]]
    again = run(make_config(*overrides, "timing=quick", "isolate=false"), tmp_path / "again", show_progress=False).table
    launch = json.loads(first["extra"])["launch"]
    assert launch["block"] == 64 or 64 in launch.values(), launch
    assert json.loads(again.iloc[0]["extra"])["launch"] == launch
