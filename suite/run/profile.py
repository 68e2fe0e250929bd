"""`profile=ncu`: each CUDA row timed natively is rerun once under Nsight Compute, and the DRAM bytes its kernels
moved are set beside the ledger's model.

The ledger's `bytes_modeled` is what a variant must move; Nsight Compute counts what it did move.
`bytes_measured` is dram__bytes_read.sum + dram__bytes_write.sum over every kernel of one launch of the
variant's launcher (`suite.run.profile_one`, bracketed by cuProfilerStart/cuProfilerStop), and
`ledger_residual` = bytes_measured / bytes_modeled - 1. ncu is told what it does, and the row records it:
`--cache-control all` flushes the caches before each kernel it profiles (as the timing flushes L2 before each
repetition); `--clock-control` is FUSEBENCH_NCU_CLOCK_CONTROL, `base` by default (ncu locks the SM and memory
clocks to their base: counters comparable from run to run) or `none` (the clocks the timing saw);
`--target-processes application-only` profiles the one process ncu starts, never the processes it spawns
(Inductor's compile workers, the AOT helper).

The profiled process rebuilds the implementation, as it must (ncu profiles a process it starts), but not from
cold: it runs beside the worker's caches. Inductor's FX-graph cache is the run's (`<run>/cache/inductor`, the
spec's cache_dir, or the user's TORCHINDUCTOR_CACHE_DIR), and Triton's and CuPy's on-disk kernel caches are the
ones the worker filled (the child inherits their environment), so those kernels load rather than compile;
Numba's CUDA kernels have no on-disk cache here and are compiled again. `extra["ncu"]["build_s"]` is how long
the rebuild took, to show it.

The profiler only observes: where it fails (ncu missing, a nonzero exit, output it cannot read, a timeout) the
row keeps its timing and `extra["ncu"]` is the reason, a string; where it succeeds, `extra["ncu"]` holds the
bytes of every kernel launch it profiled.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from suite.core.row import Row
from suite.core.targets import NATIVE
from suite.gpu import ncu
from suite.gpu.ncu import CLOCK_CONTROLS, CLOCK_VARIABLE, clock_control  # noqa: F401  (read here too)
from suite.run.job import Job
from suite.run.profile_one import spec

ENTRY = "suite.run.profile_one"


class ProfileError(RuntimeError):
    """Why ncu measured nothing for a row; the message is what `extra["ncu"]` records."""


@dataclass(frozen=True)
class Profiler:
    ncu: str | None
    """The ncu executable, None where it is not on PATH."""
    plugins: tuple[str, ...] = ()
    """Modules the profiled process imports, as the worker does (`plugins`)."""
    timeout_s: float = 600.0
    python: str = sys.executable
    clock_control: str = "base"
    """ncu's --clock-control (CLOCK_CONTROLS), recorded in every profiled row."""

    @classmethod
    def of(cls, cfg: DictConfig) -> Profiler:
        return cls(
            shutil.which("ncu"), tuple(cfg.plugins), float(cfg.timing.case_timeout_s), clock_control=clock_control()
        )


def wanted(row: Row) -> bool:
    """Rows worth a profile: CUDA, run natively, correct and timed."""
    return row.device == "cuda" and row.mode == NATIVE and row.status == "ok" and row.time_ms is not None


def measure_rows(rows: list[Row], job: Job, profiler: Profiler) -> list[Row]:
    """The rows of `job`'s case, each CUDA row timed here measured once under ncu; the others as they were."""
    return [measure(row, job, profiler) if wanted(row) else row for row in rows]


def measure(row: Row, job: Job, profiler: Profiler) -> Row:
    """`row` with bytes_measured, ledger_residual and extra["ncu"] filled in, or extra["ncu"] saying why not."""
    try:
        launches, child = run_ncu(row, job, profiler)
        traffic = ncu.total(launches)
    except (ProfileError, ncu.NcuParseError) as exc:
        return replace(row, extra={**row.extra, "ncu": str(exc)})
    found = {
        "dram_read_bytes": traffic.dram_read,
        "dram_write_bytes": traffic.dram_write,
        "lts_bytes": traffic.lts,
        "launches": traffic.launches,
        "processes": len(ncu.by_process(launches)),
        "clock_control": profiler.clock_control,
        "build_s": child.get("build_s"),
        "kernels": [asdict(launch) for launch in launches],
    }
    return replace(
        row,
        bytes_measured=traffic.dram,
        ledger_residual=residual(traffic.dram, row.bytes_modeled),
        extra={**row.extra, "ncu": found},
    )


def residual(measured: int | None, modeled: int | None) -> float | None:
    """measured / modeled - 1: above 0 the kernels moved more than the ledger says, below 0 less; None where
    either is unknown (or the ledger models no traffic)."""
    if measured is None or not modeled:
        return None
    return measured / modeled - 1.0


def command(profiler: Profiler, spec_path: Path, out_path: Path) -> list[str]:
    """ncu around the one-launch entry: only the bracketed launch of the process it starts is profiled, caches
    flushed before each kernel, clocks as `profiler.clock_control` says."""
    assert profiler.ncu is not None
    return [
        profiler.ncu,
        "--profile-from-start",
        "off",
        "--target-processes",
        "application-only",
        "--clock-control",
        profiler.clock_control,
        "--cache-control",
        "all",
        "--csv",
        "--page",
        "raw",
        "--metrics",
        ",".join(ncu.METRICS),
        profiler.python,
        "-m",
        ENTRY,
        str(spec_path),
        str(out_path),
    ]


def run_ncu(row: Row, job: Job, profiler: Profiler) -> tuple[list[ncu.Launch], dict[str, Any]]:
    """Every kernel launch ncu profiled for `row`'s implementation, and what the profiled process reported;
    ProfileError (or NcuParseError) on failure."""
    if profiler.ncu is None:
        raise ProfileError("ncu not found on PATH")
    with tempfile.TemporaryDirectory(prefix="fusebench-ncu-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(spec(job, row, list(profiler.plugins))), encoding="utf-8")
        code, output = _run(command(profiler, spec_path, out_path), profiler.timeout_s)
        child = _read(out_path)
    if "error" in child:
        raise ProfileError(f"the profiled launch failed: {child['error']}")
    if code != 0:
        raise ProfileError(f"ncu exited with status {code}: {_last_words(output)}")
    launches = ncu.parse(output)
    if not launches:
        raise ProfileError("ncu profiled no kernel launch between cuProfilerStart and cuProfilerStop")
    return launches, child


def _run(cmd: list[str], timeout_s: float) -> tuple[int, str]:
    """Exit status and stdout then stderr of `cmd`; on a timeout its whole process group (ncu and the profiled
    Python it started) is killed and ProfileError raised."""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    except OSError as exc:
        raise ProfileError(f"ncu could not be started: {exc}") from None
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise ProfileError(f"timeout: ncu ran past {timeout_s:g} s (timing.case_timeout_s)") from None
    return proc.returncode, out + "\n" + err


def _read(path: Path) -> dict[str, Any]:
    """What the profiled process reported, {} where it wrote nothing (ncu did not start it, or it died)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _last_words(output: str) -> str:
    """ncu's first ==ERROR== line, else the last line of output, else a note that there was none."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("==ERROR==")]
    return (errors or lines[-1:] or ["no output"])[0][:300]
