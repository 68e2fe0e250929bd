"""A row of a family that `plugins=[...]` registered reproduces: its command repeats the plugins it needs."""

from __future__ import annotations

import shlex
from pathlib import Path

from suite.run.runner import run
from tests.conftest import make_config


def test_the_command_of_a_plugin_row_names_its_plugins_and_runs_again(tmp_path: Path) -> None:
    cfg = make_config("plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]",
                      "variants=[good]", "device=cpu", "dtype=float32", "timing=quick", "isolate=false")  # fmt: skip
    first = run(cfg, tmp_path / "first", show_progress=False).table.iloc[0]
    words = shlex.split(first["command"])
    assert words[3] == "plugins=[tests.fakes]", words
    again = run(make_config(*words[3:], "timing=quick", "isolate=false"), tmp_path / "again", show_progress=False).table
    assert again.iloc[0]["status"] == first["status"] == "ok"
    assert again.iloc[0]["params"] == first["params"]
