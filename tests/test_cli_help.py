"""`python -m suite --help` and `-h` name fusebench's subcommands and common overrides before Hydra's own help, and
the list of subcommands is the one the command line dispatches."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from suite import usage

ROOT = Path(__file__).resolve().parent.parent


def dispatched() -> set[str]:
    """The first arguments suite.cli and suite.__main__ treat as commands, read from their source."""
    source = (ROOT / "suite" / "cli.py").read_text() + (ROOT / "suite" / "__main__.py").read_text()
    found = set(re.findall(r'\[1:2\] == \["([\w-]+)"\]', source))
    found |= set(re.findall(r'args\[:1\] != \["([\w-]+)"\]', source))
    for listed in re.findall(r"args\[:1\] (?:==|in) (.*?):\n", source):
        found |= set(re.findall(r'\["([\w-]+)"\]', listed))
    return found


def test_every_dispatched_command_has_its_line() -> None:
    commands = {key.split()[0] for key in usage.COMMANDS}
    assert {"list", "compare", "report", "noise", "headline", "gpu-check", "training"} <= dispatched()
    assert commands == dispatched()


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_commands_and_overrides_before_hydras(flag) -> None:
    proc = subprocess.run([sys.executable, "-m", "suite", flag], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ours, _, hydras = proc.stdout.partition("Hydra's own help follows.")
    assert "== Configuration groups ==" in hydras
    for key in usage.COMMANDS:
        assert re.search(rf"^  {re.escape(key)} +\S", ours, flags=re.M), key
    for key in ("scenario=", "preset=", "dtype=", "device=", "backends=", "variants=", "phase=", "experiment=",
                "model="):  # fmt: skip
        assert re.search(rf"^  {re.escape(key)}", ours, flags=re.M), key
