"""The host-memory guard: a case whose buffers would not fit in this machine's memory is refused before any work.

Families call it from `check` with what their inputs, float64 reference and its temporaries need; the plan calls it
with each case's smallest modeled peak. One message for all: what, how much, and what this machine has.
"""

from __future__ import annotations

import os

from suite.core.errors import ConfigError

GIB = 2**30


def physical_bytes() -> int:
    """This machine's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def guard(need: int, what: str, why: str = "") -> None:
    """Raise ConfigError '<what> needs about N GiB<why>; this machine has M GiB' where `need` bytes exceed it."""
    total = physical_bytes()
    if need > total:
        raise ConfigError(f"{what} needs about {need / GIB:.1f} GiB{why}; this machine has {total / GIB:.1f} GiB")
