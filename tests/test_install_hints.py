"""Every install hint fusebench prints names an extra pyproject.toml declares, and reaches the user whole: `list`
prints it through Rich, which would read `[liger]` as markup and drop it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from suite import cli
from suite.core.install import CUDA_STACK, hint

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
EXTRAS = set(re.findall(r"^([\w-]+) = \[", OPTIONAL, flags=re.M))
"""The extras pyproject.toml declares (read without tomllib, which Python 3.10 lacks)."""
NAMED = re.compile(r"(?:'\.|fusebench)\[([\w,-]+)\]")
"""An extra as a hint names it: `pip install -e '.[liger]'`, `fusebench[liger]`."""


def test_the_extras_are_read() -> None:
    assert {"cpu", "cuda", "liger", "slurm", "pool", "test", "lint"} <= EXTRAS


def extras_named(text: str) -> set[str]:
    return {name for group in NAMED.findall(text) for name in group.split(",")}


def hints_in_source() -> list[tuple[str, str]]:
    """(file, line) of every line of the suite, the backends, the families and the documentation that tells a user
    to pip install."""
    paths = [path for folder in ("suite", "backends", "scenarios") for path in sorted((ROOT / folder).rglob("*.py"))]
    paths += [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "pip install" in line and "--no-index" not in line:  # gpu-check's wheel folder, not an extra
                found.append((str(path.relative_to(ROOT)), line))
    return found


def test_every_extra_named_in_the_source_exists() -> None:
    named = [(where, name) for where, line in hints_in_source() for name in extras_named(line)]
    assert named, "no install hint found: the pattern no longer matches how hints are written"
    assert [(where, name) for where, name in named if name not in EXTRAS] == []


def test_the_hints_printed_name_existing_extras(monkeypatch) -> None:
    from backends.liger import INSTALL

    monkeypatch.setattr(cli, "_installed", lambda module: False)
    launchers = [cli.launcher_problem([f"hydra/launcher={name}"]) for name in cli.LAUNCHERS]
    for text in [INSTALL, CUDA_STACK, *launchers]:
        assert extras_named(text) and extras_named(text) <= EXTRAS, text
    with pytest.raises(AssertionError):  # the check itself can fail
        assert extras_named(hint("nonesuch")) <= EXTRAS


def _without(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))


def test_a_missing_library_names_its_extra(monkeypatch) -> None:
    from backends.liger import TARGET as LIGER
    from backends.numba import NumbaCUDA

    _without("liger_kernel", monkeypatch)
    _without("numba_cuda", monkeypatch)
    for target, extra in ((LIGER, "liger"), (NumbaCUDA(), "cuda")):
        reason = target.probe().reason
        assert extra in extras_named(reason) and extras_named(reason) <= EXTRAS, reason


def test_list_prints_the_hint_whole(monkeypatch, capsys) -> None:
    from suite.listing import list_kernels

    _without("liger_kernel", monkeypatch)
    monkeypatch.setenv("COLUMNS", "400")
    list_kernels()
    out = capsys.readouterr().out
    assert "pip install -e '.[liger]'" in out
