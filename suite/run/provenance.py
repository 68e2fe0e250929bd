"""Where a row came from: library versions, device name, git revision, and a command that reproduces it."""

from __future__ import annotations

import json
import platform
import shlex
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from suite.core.backend import BACKENDS

PACKAGES = ("numpy", "hydra-core", "pandas")
"""The suite's own; each registered backend adds the distributions it is made of (`Backend.packages`)."""
ROOT = Path(__file__).resolve().parent.parent


def versions() -> str:
    found = {"python": platform.python_version()}
    for name in dict.fromkeys([*PACKAGES, *(p for b in BACKENDS.values() for p in b.packages)]):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return json.dumps(found, sort_keys=True)


def git_rev() -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{rev}-dirty" if rev and dirty else rev


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _override(key: str, value: Any) -> str:
    if isinstance(value, list | tuple):
        value = "[" + ",".join(_override("", v) if isinstance(v, list | tuple) else str(v) for v in value) + "]"
    return f"{key}={value}" if key else str(value)


def command(scenario: str, params: dict[str, Any], dtype: str, backend: str, device: str, variant: str) -> str:
    """A command line that reruns exactly this (case, implementation)."""
    parts = ["python", "-m", "suite", f"scenario={scenario}"]
    parts += [_override(f"scenario.{k}", v) for k, v in params.items()]
    parts += [f"dtype={dtype}", f"backends=[{backend}]", f"device={device}", f"variants=[{variant}]"]
    return " ".join(shlex.quote(p) for p in parts)
