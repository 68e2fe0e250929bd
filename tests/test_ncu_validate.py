"""profile=ncu is checked before any work: ncu on PATH and a clock-control setting ncu accepts."""

from __future__ import annotations

import pytest

from suite.core.errors import ConfigError
from suite.run import validate


def test_an_unknown_clock_control_is_refused_before_any_work(monkeypatch: pytest.MonkeyPatch, config) -> None:
    monkeypatch.setattr(validate.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setenv("FUSEBENCH_NCU_CLOCK_CONTROL", "turbo")
    cfg = config("profile=ncu", "preset=S", "backends=[numba]", "device=cpu")
    with pytest.raises(ConfigError, match=r"FUSEBENCH_NCU_CLOCK_CONTROL must be one of .*base"):
        validate.plan(cfg)
    monkeypatch.setenv("FUSEBENCH_NCU_CLOCK_CONTROL", "none")
    assert validate.plan(cfg).cases
