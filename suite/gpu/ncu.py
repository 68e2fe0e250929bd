"""Nsight Compute's raw CSV page, read: the DRAM and L2 bytes of every kernel launch it profiled.

The ledger models the bytes a variant must move; `ncu` counts the bytes it did move. Run as `ncu --csv --page raw
--metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum <app>`, it prints, after whatever the
application and ncu itself (`==PROF==`, `==WARNING==` lines) wrote first, one CSV table: a header row of column
names ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", ..., then one column per metric), a row
of units ("" under the identity columns; "byte", "Kbyte", "Mbyte", "Gbyte" under byte counts, ncu scaling each
value to its magnitude in powers of 1000), then one row per profiled kernel launch, every field quoted. Values
may carry thousands separators ("1,234,567") or decimals ("12.34"). Everything returned here is in bytes.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from dataclasses import dataclass

from suite.core.errors import ConfigError

DRAM_READ, DRAM_WRITE, LTS = "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum"
METRICS = (DRAM_READ, DRAM_WRITE, LTS)
"""What `suite.run.profile` asks ncu for: DRAM bytes read and written, and every byte through L2."""
IDENTITY = ("ID", "Process ID", "Process Name", "Kernel Name")
"""Columns of the raw page's header this reader needs besides the metrics."""

BYTE_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "kbyte": 10**3, "kb": 10**3, "mbyte": 10**6, "mb": 10**6, "gbyte": 10**9, "gb": 10**9, "tbyte": 10**12,
    "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip
"""Unit (lower case) -> bytes. ncu's own spellings are decimal (Kbyte = 1000 bytes), and so are the KB/MB style;
the binary KiB/MiB style is read as binary. An empty unit is a plain count."""
MISSING = ("", "n/a", "N/A")


class NcuParseError(ValueError):
    """ncu's output could not be read as its raw CSV page; the message says what is missing or wrong."""


@dataclass(frozen=True)
class Launch:
    """One profiled kernel launch: its identity and its bytes (None where ncu reported no value, `n/a`)."""

    id: str
    process_id: str
    process_name: str
    kernel: str
    dram_read: int | None
    dram_write: int | None
    lts: int | None


@dataclass(frozen=True)
class Traffic:
    """Bytes summed over launches (one process's, or a whole run's)."""

    dram_read: int
    dram_write: int
    lts: int | None
    launches: int

    @property
    def dram(self) -> int:
        return self.dram_read + self.dram_write


def parse(text: str) -> list[Launch]:
    """Every launch of the raw page in `text` (noise before and after the table skipped), in bytes.

    Raises NcuParseError when there is no table, when the header lacks a needed column (named in the message),
    or when a row or value cannot be read."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _cells(line)[:1] == ["ID"]), None)
    if start is None:
        raise NcuParseError(_no_table(lines))
    header = _cells(lines[start])
    missing = [c for c in (*IDENTITY, *METRICS) if c not in header]
    if missing:
        raise NcuParseError(f"ncu CSV header lacks column(s) {', '.join(missing)} (has: {', '.join(header)})")
    col = {name: header.index(name) for name in header}
    units: list[str] | None = None
    out = []
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if not line.startswith('"'):  # program output, ncu's ==PROF== lines, blank lines
            continue
        cells = _cells(line)
        if cells == header:
            continue  # a second process's table repeats the header
        if len(cells) != len(header):
            raise NcuParseError(f"ncu CSV line {number} has {len(cells)} fields, its header {len(header)}")
        if not cells[col["ID"]]:
            units = cells  # the units row: no ID
            continue
        kernel = cells[col["Kernel Name"]]
        read, write, lts = (_bytes(cells[col[m]], units[col[m]] if units else "", m, kernel) for m in METRICS)
        out.append(
            Launch(cells[col["ID"]], cells[col["Process ID"]], cells[col["Process Name"]], kernel, read, write, lts)
        )
    return out


def total(launches: Iterable[Launch]) -> Traffic:
    """DRAM bytes read and written, and L2 bytes, summed over `launches`. A launch without a DRAM value makes
    the sum meaningless: NcuParseError names it. L2 bytes are None when no launch reported them."""
    launches = list(launches)
    for launch in launches:
        for name, value in ((DRAM_READ, launch.dram_read), (DRAM_WRITE, launch.dram_write)):
            if value is None:
                raise NcuParseError(f"ncu reported no value for {name} of launch {launch.id} ({launch.kernel})")
    lts = [launch.lts for launch in launches if launch.lts is not None]
    return Traffic(
        sum(launch.dram_read or 0 for launch in launches),
        sum(launch.dram_write or 0 for launch in launches),
        sum(lts) if lts else None,
        len(launches),
    )


def by_process(launches: Iterable[Launch]) -> dict[str, Traffic]:
    """`total` per profiled process (its ID), in the order processes first appear."""
    groups: dict[str, list[Launch]] = {}
    for launch in launches:
        groups.setdefault(launch.process_id, []).append(launch)
    return {pid: total(group) for pid, group in groups.items()}


def _cells(line: str) -> list[str]:
    return next(csv.reader([line]), [])


def _bytes(text: str, unit: str, metric: str, kernel: str) -> int | None:
    """'1,234.5' in `unit` -> bytes; None for a value ncu left empty or `n/a`."""
    text = text.strip()
    if text in MISSING:
        return None
    scale = BYTE_UNITS.get(unit.strip().lower())
    if scale is None:
        raise NcuParseError(f"unknown unit '{unit}' for {metric}; known: byte, Kbyte, Mbyte, Gbyte, KB, MB, GB")
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        raise NcuParseError(f"{metric} of kernel {kernel} is '{text}', not a number") from None
    return round(value * scale)


def _no_table(lines: list[str]) -> str:
    """Why there is no table: ncu's first error line where it printed one."""
    errors = [line.strip() for line in lines if line.startswith("==ERROR==")]
    why = f"; ncu said: {errors[0]}" if errors else ""
    return f'no ncu CSV table in the output (no header row starting with "ID"; was ncu run with --csv --page raw?){why}'


CLOCK_CONTROLS = ("base", "none")
"""ncu's --clock-control choices for profiling (its `reset` only resets clocks and exits)."""
CLOCK_VARIABLE = "FUSEBENCH_NCU_CLOCK_CONTROL"


def clock_control(environ: dict[str, str] | None = None) -> str:
    """The --clock-control ncu is given: $FUSEBENCH_NCU_CLOCK_CONTROL, else `base`; ConfigError names the
    choices."""
    value = (os.environ if environ is None else environ).get(CLOCK_VARIABLE, "") or "base"
    if value not in CLOCK_CONTROLS:
        raise ConfigError(f"{CLOCK_VARIABLE} must be one of {', '.join(CLOCK_CONTROLS)} (got '{value}')")
    return value
