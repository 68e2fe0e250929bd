"""Loading the plug-ins a run names (`plugins=[module,...]`): the one place a process imports them.

A plug-in module registers families, backends or kernels on import (into `suite.core`'s registries). Each
process that plans or runs kernels loads them once, before it needs them: the command line before it composes
any config (so a family a plug-in registers is selected by its name), a Hydra job before it plans, a worker
before it runs a case. Importing is idempotent, so a process that is two of these at once (the command line
running its one job) loads them twice at no cost.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from suite.core.errors import ConfigError


def load_plugins(modules: Iterable[str]) -> None:
    """Import every module named; ConfigError (one line, naming the module and why) on the first that fails."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(f"plugin '{module}' cannot be imported: {exc}") from None


def named(args: list[str]) -> list[str]:
    """The modules a command line's `plugins=[a,b]` override names (`+plugins=`, `++plugins=` too)."""
    found: list[str] = []
    for arg in args:
        if arg.lstrip("+").startswith("plugins="):
            found += [m.strip() for m in arg.split("=", 1)[1].strip("[]").split(",") if m.strip()]
    return found
