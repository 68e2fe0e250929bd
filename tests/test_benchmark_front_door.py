"""The pytest-benchmark front door (`nox -s benchmark`) on one tiny case, run as a user runs it.

Two runs in subprocesses: the first writes `--benchmark-json` and autosaves, the second compares with the saved
run and may fail on a slowdown; the test asserts one benchmark per implementation the suite plans (no more, no
less), each with its case, ledger, numerics and, for the fused kernel, the paired fusion verdict. No time is
asserted: a generous compare-fail threshold on the fastest round only proves the comparison runs and exits
cleanly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from suite.benchmark.cases import cases
from tests.conftest import make_config

ROOT = Path(__file__).resolve().parents[1]
FRONT_DOOR = "tests/benchmarks/bench_registry.py"
OVERRIDES = ["scenario.n=1000", "scenario.ops=[scale,gelu]", "backends=[numba]", "device=cpu", "dtype=float32",
             "timing=quick"]  # fmt: skip
KEYS = {"scenario", "params", "dtype", "backend", "device", "variant", "bytes_read", "bytes_written",
        "bytes_modeled", "flops_modeled", "gbps", "max_rel_err", "tolerance"}  # fmt: skip
FUSION_KEYS = {"baseline", "speedup", "speedup_lo", "speedup_hi", "verdict", "predicted"}


def _front_door(tmp: Path, *options: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", FRONT_DOOR, "-p", "no:randomly", "-q", "-o", f"cache_dir={tmp / 'cache'}",
               f"--fusebench-overrides={' '.join(OVERRIDES)}", f"--benchmark-storage=file://{tmp / 'storage'}",
               *options]  # fmt: skip
    # a user's shell: no PYTEST_* of this run (under pytest-xdist, a worker's variables would make the inner
    # pytest-benchmark take itself for a distributed run and switch itself off)
    # One Numba thread: beside another test worker, a parallel kernel's launch waits milliseconds for its second
    # thread, which a compare of two rounds would read as a 1000× slowdown; no time is asserted here anyway.
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, "PYTHONPATH": str(ROOT)}
    env["NUMBA_NUM_THREADS"] = "1"
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _expected(tmp: Path) -> set[str]:
    """The test ids the suite's own plan gives for the same overrides."""
    found = cases([make_config(*OVERRIDES)], tmp / "plan")
    return {f"test_case[{c.id}]" for c in found}


def test_json_autosave_and_compare(tmp_path):
    expected = _expected(tmp_path)
    assert {e.rsplit("-", 1)[1] for e in expected} >= {"fused]", "unfused]"}
    saved = _front_door(tmp_path, f"--benchmark-json={tmp_path / 'bench.json'}", "--benchmark-autosave")
    assert saved.returncode == 0, saved.stdout[-3000:] + saved.stderr[-3000:]

    benchmarks = json.loads((tmp_path / "bench.json").read_text())["benchmarks"]
    assert sorted(b["name"] for b in benchmarks) == sorted(expected)
    for b in benchmarks:
        info = b["extra_info"]
        assert info.keys() >= KEYS, sorted(KEYS - info.keys())
        assert (info["backend"], info["device"], info["dtype"]) == ("numba", "cpu", "float32")
        assert b["name"].endswith(f"-{info['variant']}]")
        assert json.loads(info["params"]) == {"n": 1000, "ops": ["scale", "gelu"]}
        assert info["bytes_read"] > 0 and info["bytes_written"] > 0 and info["bytes_modeled"] > 0
        assert info["flops_modeled"] > 0 and info["gbps"] > 0
        assert 0 <= info["max_rel_err"] <= info["tolerance"]
        assert b["stats"]["rounds"] >= 2 and b["stats"]["median"] > 0
    fused = next(b["extra_info"] for b in benchmarks if b["extra_info"]["variant"] == "fused")
    assert fused.keys() >= FUSION_KEYS
    assert fused["baseline"] == "numba/cpu/unfused" and fused["verdict"] in ("pays", "neutral", "loses")
    assert 0 < fused["speedup_lo"] <= fused["speedup_hi"] and fused["speedup"] > 0
    assert fused["predicted"] == 2.0  # one intermediate of the two-op chain removed: half the bytes

    # the fastest round, not the median: a microsecond kernel's median on a shared host can be a scheduler tick
    compared = _front_door(tmp_path, "--benchmark-compare", "--benchmark-compare-fail=min:5000%")
    assert compared.returncode == 0, compared.stdout[-3000:] + compared.stderr[-3000:]
    assert "0001" in compared.stdout  # the autosaved run it compared against is in the table
