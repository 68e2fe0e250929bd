"""The check's first step: the gpu tests, in a child pytest with a limit on each test, never stopping the check.

Outcomes come from the ledger `suite.gpu_check.pytest_limits` writes as each test ends. A child that leaves
early (the watchdog ended a stuck test, or a crash) is started again without the tests already recorded, as
long as it makes progress; tests never reached are reported as such. A failed test is a line in the summary
and the bundle's log; the sweep runs whatever happened here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from suite.gpu_check.plan import ROOT, TEST_TIMEOUT_S
from suite.gpu_check.pytest_limits import recorded


@dataclass
class TestsResult:
    outcomes: dict[str, dict]
    seconds: float
    note: str = ""

    def count(self, outcome: str) -> int:
        return sum(1 for e in self.outcomes.values() if e["outcome"] == outcome)

    def lines(self) -> list[str]:
        head = (
            f"tests     {self.count('passed')} passed, {self.count('failed')} failed, "
            f"{self.count('timeout')} timed out, {self.count('skipped')} skipped in {self.seconds:.0f} s"
        )
        bad = [
            f"  {e['outcome']:<8} {node}: {e.get('message', '')}"
            for node, e in self.outcomes.items()
            if e["outcome"] in ("failed", "timeout")
        ]
        return [head + (f" ({self.note})" if self.note else ""), *bad]


def run_tests(
    args: list[str],
    ledger: Path,
    log: TextIO,
    timeout_s: float = TEST_TIMEOUT_S,
    restarts: int = 5,
    deadline: float = float("inf"),
) -> TestsResult:
    """Run `pytest args` under the limits plugin until every collected test is recorded or no progress is made;
    none starts past `deadline` (wall-clock seconds since the epoch: the child reads it) nor runs past it."""
    started = time.monotonic()
    env = {
        **os.environ,
        "FUSEBENCH_GPU_TESTS": "1",
        "FUSEBENCH_TEST_LEDGER": str(ledger),
        "FUSEBENCH_TEST_TIMEOUT_S": str(timeout_s),
        "FUSEBENCH_TEST_DEADLINE": str(deadline),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "suite.gpu_check.pytest_limits",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rs",
        *args,
    ]
    note = ""
    for attempt in range(restarts + 1):
        before = len(recorded(ledger))
        log.write(f"$ {' '.join(command)}  (attempt {attempt + 1})\n")
        log.flush()
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
        # 0 passed, 1 some failed, 5 nothing left to run: the child finished; anything else left early
        if done.returncode in (0, 1, 5):
            break
        if len(recorded(ledger)) == before:
            note = f"pytest left with status {done.returncode} without recording another test; the rest not run"
            break
    else:
        note = f"pytest left early {restarts + 1} times; the tests not recorded did not run"
    return TestsResult(recorded(ledger), time.monotonic() - started, note)
