"""What a job of a sweep says about itself in its directory (`job.json`): which job it is, where it ran, and how it
ended. The sweep's merge reads it to tell a finished job from one that died (its process killed, its node lost,
its time limit passed), and `resume=true` reads it to skip finished jobs.

A job writes `running` before its first case and `done` (or `interrupted`, `failed` with the reason) after its
last; a job still `running` when the sweep ends never got to say how it ended.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from suite.core.errors import ConfigError

NAME = "job.json"
DONE, RUNNING, INTERRUPTED, FAILED = "done", "running", "interrupted", "failed"


def read(outdir: Path) -> dict[str, Any] | None:
    path = Path(outdir) / NAME
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write(outdir: Path, state: dict[str, Any]) -> None:
    path = Path(outdir) / NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # a reader never sees half a file


def begin(outdir: Path, job: int, overrides: list[str], gpu: str | None = None) -> dict[str, Any]:
    state = {
        "job": job,
        "overrides": list(overrides),
        "status": RUNNING,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "gpu": gpu,
        "started": time.time(),
    }
    _write(outdir, state)
    return state


def end(outdir: Path, state: dict[str, Any], status: str, reason: str = "", rows: int | None = None) -> None:
    _write(outdir, {**state, "status": status, "reason": reason, "rows": rows, "ended": time.time()})


def finished(outdir: Path, job: int, overrides: list[str]) -> bool:
    """Whether job `job` already ran to its end in `outdir` with these overrides (resume skips it). A job
    directory holding another job's overrides is refused: resuming a sweep needs the same sweep."""
    state = read(outdir)
    if state is None:
        return False
    if list(state.get("overrides", [])) != list(overrides):
        raise ConfigError(
            f"resume: {outdir} holds job {job} of another sweep ({' '.join(state.get('overrides', [])) or 'no overrides'}"
            f", not {' '.join(overrides) or 'no overrides'}); resume with the same sweep arguments or another hydra.sweep.dir"
        )
    return state.get("status") == DONE


def why_unfinished(state: dict[str, Any] | None) -> str:
    """How a job that is not `done` ended, in words for its failure row."""
    if state is None:
        return "it never started (no job.json)"
    status = state.get("status")
    where = f" on {state['host']}" if state.get("host") else ""
    if status == RUNNING:
        return f"its process{where} ended without saying how (killed, out of memory or past its time limit)"
    return f"it {status}{where}" + (f": {state['reason']}" if state.get("reason") else "")
