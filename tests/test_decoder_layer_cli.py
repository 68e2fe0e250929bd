"""decoder_layer's bad input from the command line, as a user types it: a model's layer at a `tokens=` this machine
cannot hold, a model that does not exist, a layer variant that does not exist. Each is one line on stderr naming
the problem (the memory it would need and the machine's; the valid choices), exit status 2, and no run folder."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from suite import cli
from suite.core.scenario import get

MODELS = sorted(p.stem for p in (Path(cli.CONF) / "model").glob("*.yaml"))
TOKENS = 1_048_576
"""A million tokens of Llama-3-8B's layer: about 980 GiB of buffers and float64 reference, more than any host the
suite runs on, and within every op's element limits, so the memory is what refuses it."""


def _refused(tmp_path: Path, *overrides: str) -> str:
    """The one line a refused command prints; asserts exit status 2, nothing on stdout, no traceback, no run."""
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "suite", *overrides, "device=cpu", f"hydra.run.dir={run_dir}"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout.strip() == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert not run_dir.exists()  # refused before Hydra made the run's folder: no results
    return lines[0]


def test_a_models_layer_too_large_for_the_machine_names_both_sizes(tmp_path: Path) -> None:
    line = _refused(tmp_path, "model=llama3_8b", f"tokens={TOKENS}", "experiment=model_decoder_layer")
    found = re.fullmatch(rf".*decoder_layer at {TOKENS} tokens needs about ([\d.]+) GiB; this machine has ([\d.]+) GiB",
                         line)  # fmt: skip
    assert found is not None, line
    assert float(found[1]) > float(found[2]) > 0


def test_an_unknown_model_names_every_shipped_one(tmp_path: Path) -> None:
    line = _refused(tmp_path, "model=nosuchmodel", "tokens=64", "experiment=model_decoder_layer")
    assert "unknown model 'nosuchmodel'; valid: " in line
    assert line.split("valid: ")[1].split(", ") == MODELS


def test_an_unknown_layer_variant_names_every_variant_of_the_layer(tmp_path: Path) -> None:
    line = _refused(tmp_path, "scenario=decoder_layer", "preset=S", "variants=[fused_nosuchop]")
    assert "unknown variant 'fused_nosuchop'; valid: " in line
    assert set(line.split("valid: ")[1].split(", ")) == set(get("decoder_layer").variants)
