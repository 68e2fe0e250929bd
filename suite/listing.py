"""`python -m suite list`: every scenario × backend × device the registry holds, how it runs here, the phases it
has kernels for, what failed to load, and every backend's options."""

from __future__ import annotations

import os
import sys
from typing import Any

from suite.core import scenario as scenarios


def list_kernels() -> None:
    """Print, per scenario, backend and device, the variants it has kernels for and how they run here; then
    every backend module and family that failed to load, with its error; then the backends' options. Without a
    terminal (a pipe, a file, CI) the lines are not wrapped, one row a line. Every cell is printed as written:
    Rich would otherwise read `[liger]` in `pip install -e '.[liger]'` as markup and drop it."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from suite.core import registry, targets

    targets.configure_emulation(True)
    reg = registry.discover()
    table = Table(title="fusebench kernels on this machine (variants without a kernel are not listed)")
    for col in ("scenario", "backend", "device", "mode", "variants", "phases", "reason"):
        table.add_column(col)
    for name, scn in sorted(scenarios.discover().items()):
        for backend in reg.backends():
            for device in sorted(d for b, d in targets.TARGETS if b == backend):
                has = [v for v in scn.variants if reg.get(registry.KernelKey(name, backend, v, device)) is not None]
                if has:
                    avail = targets.TARGETS[(backend, device)].probe()
                    staged = _phases(reg, name, backend, device, scn.variants)
                    table.add_row(name, backend, device, avail.mode, ", ".join(has), staged, escape(avail.reason))
    console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 1000)
    console.print(table)
    failed = Table(title="failed to load (left out of every run; a run that names one says why)")
    for col in ("kind", "name", "error"):
        failed.add_column(col)
    for kind, errors in (("backend", reg.load_errors), ("scenario", scenarios.LOAD_ERRORS)):
        for what, why in sorted(errors.items()):
            failed.add_row(kind, what, escape(why))
    if failed.row_count:
        console.print(failed)
    console.print(options_table())


def _phases(reg: Any, name: str, backend: str, device: str, variants: tuple[str, ...]) -> str:
    """The phases the backend has kernels for on `device`, each with the variants it lacks there, if any:
    'forward, backward (no library), train (no library)'."""
    from suite.core import phases, registry

    out = []
    for phase in phases.PHASES:
        has = [v for v in variants if reg.get(registry.KernelKey(name, backend, v, device, phase)) is not None]
        forward = [v for v in variants if reg.get(registry.KernelKey(name, backend, v, device)) is not None]
        if has:
            lacking = [v for v in forward if v not in has]
            out.append(phase + (f" (no {', '.join(lacking)})" if lacking else ""))
    return ", ".join(out)


def options_table() -> Any:
    """Every registered backend's options: `backend_options.<backend>.<option>`, valid values, default, meaning."""
    from rich.markup import escape
    from rich.table import Table

    from suite.core.backend import BACKENDS

    table = Table(title="backend_options (python -m suite backend_options.<backend>.<option>=<value>)")
    for col in ("backend", "option", "valid", "default", "meaning"):
        table.add_column(col)
    for name, backend in sorted(BACKENDS.items()):
        for option in backend.schema():
            default = "per kernel" if option.default is None else str(option.default)
            table.add_row(name, option.name, escape(option.describe()), escape(default), escape(option.help))
    return table
