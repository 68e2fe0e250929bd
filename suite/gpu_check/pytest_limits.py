"""A pytest plugin the check runs the gpu tests under: a time limit on each test, and a ledger of outcomes.

Each test's outcome is appended to the JSON-lines file $FUSEBENCH_TEST_LEDGER as it is known, so what ran
survives the process. A test past $FUSEBENCH_TEST_TIMEOUT_S is interrupted by SIGALRM (a Python-level wait
fails with TimeoutError and the session goes on); one stuck where no signal reaches it (inside a CUDA call)
is recorded as `timeout` by a watchdog after a grace period, and the process leaves at once: the check then
starts pytest again without the tests already in the ledger (`--deselect` is not needed: this plugin reads
the ledger and deselects them). No test starts past $FUSEBENCH_TEST_DEADLINE (seconds since the epoch: the
check's share of its budget for the tests), nor is let run past it: one not reached is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

GRACE_S = 15.0
"""How long past its limit a test stuck beyond the reach of SIGALRM is given before the process leaves."""
TIMED_OUT = 75
"""The exit status when the watchdog ended the process."""


def _ledger() -> Path | None:
    path = os.environ.get("FUSEBENCH_TEST_LEDGER")
    return Path(path) if path else None


def _limit() -> float:
    """The time the next test may take: its own limit, or the time left before the deadline where that is less."""
    limit = float(os.environ.get("FUSEBENCH_TEST_TIMEOUT_S", "0") or 0)
    left = _deadline() - time.time()
    return min(limit, left) if limit > 0 else (left if left != float("inf") else 0.0)


def _deadline() -> float:
    return float(os.environ.get("FUSEBENCH_TEST_DEADLINE", "inf") or "inf")


LATE = "not reached: the GPU check's deadline for its tests passed before this test could start"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if time.time() >= _deadline():
        pytest.skip(LATE)


def _write(entry: dict[str, Any]) -> None:
    path = _ledger()
    if path is None:
        return
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def recorded(path: Path) -> dict[str, dict[str, Any]]:
    """nodeid -> its last entry in the ledger at `path` ({} where there is none)."""
    if not path.exists():
        return {}
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            found[entry["nodeid"]] = entry
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the tests a previous process of this check already recorded."""
    path = _ledger()
    done = recorded(path) if path is not None else {}
    if not done:
        return
    keep = [i for i in items if i.nodeid not in done]
    config.hook.pytest_deselected(items=[i for i in items if i.nodeid in done])
    items[:] = keep


class TestTimeout(TimeoutError):
    """The test ran past its limit."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    limit = _limit()
    if limit <= 0:  # no limit, or none left: pytest_runtest_setup skips it
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise TestTimeout(f"past the limit of {limit:g} s")

    def stuck() -> None:
        _write(
            {
                "nodeid": item.nodeid,
                "outcome": "timeout",
                "duration": limit + GRACE_S,
                "message": f"timeout: past {limit:g} s and stuck where no signal reaches (a CUDA call?)",
            }
        )
        os._exit(TIMED_OUT)

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    watchdog = threading.Timer(limit + GRACE_S, stuck)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        watchdog.cancel()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """One ledger line per test: its call's outcome, or its setup's where that failed or skipped."""
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        message = ""
        if report.outcome != "passed":
            text = str(report.longrepr) if report.longrepr is not None else ""
            if isinstance(report.longrepr, tuple):  # a skip: (path, line, reason)
                text = str(report.longrepr[2])
            message = _summary(text)
        outcome = "timeout" if "TestTimeout" in message else report.outcome
        _write({"nodeid": report.nodeid, "outcome": outcome, "duration": round(report.duration, 3), "message": message})


def _summary(text: str) -> str:
    """The error line of a failure's text (pytest's `E   ...`), else its last line, at most 300 characters."""
    lines = [line for line in text.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return (errors[0] if errors else lines[-1] if lines else "")[:300]
