"""`preset=DRAM` sizes a memory-bound family past the last-level cache by STREAM's rule: every planned case's
inputs and output take at least four times the cache, from the first power of two that does so; a size the user
sets wins, a compute-bound family is one line (exit status 2), and the host's memory caps the sizes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from suite.cli import precheck
from suite.core import host_memory
from suite.core.errors import ConfigError
from suite.run import dram_sizes, validate
from suite.run.runner import run
from tests.conftest import make_config

MIB = 2**20

WORKING_SET = {
    "rmsnorm": lambda p: 2 * p["rows"] * p["cols"] + p["cols"],  # x and y, the weight row
    "swiglu": lambda p: 3 * p["rows"] * p["cols"],  # a, b and y
    "elementwise_chain": lambda p: 2 * p["n"],  # x and out
}
"""Each family's inputs and output in elements, written out here rather than read from the family."""


@pytest.fixture
def host(monkeypatch):
    """A last-level cache of the test's choosing and, unless the test says otherwise, a host with memory for any
    size: the sizes then depend on the rule alone, not on the machine running the test."""
    monkeypatch.setattr(host_memory, "physical_bytes", lambda: 2**50)

    def cache(size: int) -> None:
        monkeypatch.setattr(dram_sizes, "last_level_cache", lambda: ("L3", size))

    return cache


def _plan(family: str, *overrides: str) -> validate.Plan:
    return validate.plan(make_config(f"scenario={family}", "preset=DRAM", *overrides))


@pytest.mark.parametrize("cache", [1 * MIB, 300 * MIB], ids=["1MiB", "300MiB"])
@pytest.mark.parametrize("family", sorted(WORKING_SET))
def test_every_case_holds_four_caches_from_the_first_size_that_does(host, family, cache) -> None:
    host(cache)
    p = _plan(family)
    axis = p.scenario.size_axis
    smallest_item = min(np.dtype(d).itemsize for d in p.dtypes)
    assert p.dtypes == ["float32", "float16"]  # the default: the rule must hold for the narrower one
    for params in p.cases:
        assert WORKING_SET[family](params) * smallest_item >= 4 * cache, params
    sizes = p.sizing.sizes
    assert sorted({c[axis] for c in p.cases}) == sizes
    assert sizes == [sizes[0] * 2**k for k in range(len(sizes))] and 1 <= len(sizes) <= 3
    assert sizes[0] & (sizes[0] - 1) == 0  # a power of two, and the one below it falls short in some case
    halved = [{**c, axis: sizes[0] // 2} for c in p.cases if c[axis] == sizes[0]]
    assert min(WORKING_SET[family](c) for c in halved) * smallest_item < 4 * cache
    others = {k: v for k, v in p.scenario.presets["L"].items() if k != axis}
    assert all(c[k] in v for c in p.cases for k, v in others.items())  # the other axes are preset L's


def test_a_family_with_other_sizes_keeps_three_when_memory_allows(host) -> None:
    host(1 * MIB)
    assert _plan("rmsnorm").sizing.sizes == [16, 32, 64]  # 65,536 rows × 16 cols × 2 × 2 bytes = 4 MiB


def test_the_size_the_user_sets_wins(host) -> None:
    host(300 * MIB)
    p = _plan("rmsnorm", "scenario.cols=[1024]")
    assert {c["cols"] for c in p.cases} == {1024}
    assert {c["rows"] for c in p.cases} == {65536}
    assert p.sizing.overridden and "as set" in p.sizing.line()


def test_the_host_memory_caps_the_sizes_then_refuses(host, monkeypatch) -> None:
    """rmsnorm's own guard holds 40 bytes an element (x and y, two intermediates, the float64 reference's)."""
    host(1 * MIB)
    need = 65536 * 16 * 40
    monkeypatch.setattr(host_memory, "physical_bytes", lambda: int(1.5 * need))
    p = _plan("rmsnorm")
    assert p.sizing.sizes == [16]
    assert "cols=32 and up left out" in p.sizing.line() and "needs about" in p.sizing.line()
    monkeypatch.setattr(host_memory, "physical_bytes", lambda: need // 2)
    with pytest.raises(ConfigError, match=r"preset=DRAM: rmsnorm at cols=16: .*needs about") as info:
        _plan("rmsnorm")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("family", ["matmul", "attention", "linear_cross_entropy"])
def test_a_compute_bound_family_is_one_line_naming_those_it_sizes(family) -> None:
    with pytest.raises(ConfigError) as info:
        precheck([f"scenario={family}", "preset=DRAM"])
    message = str(info.value)
    assert "\n" not in message and f"{family} is compute-bound" in message
    assert "rmsnorm" in message and "swiglu" in message and "elementwise_chain" in message


def test_command_line_exit_status_two_for_a_compute_bound_family() -> None:
    proc = subprocess.run([sys.executable, "-m", "suite", "scenario=matmul", "preset=DRAM"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "preset=DRAM" in lines[0] and "matmul is compute-bound" in lines[0]


def test_the_command_line_says_what_it_chose_in_one_line(host, capsys) -> None:
    host(1 * MIB)
    precheck(["scenario=swiglu", "preset=DRAM"])
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        "fusebench: preset=DRAM: swiglu's cols=[64, 128, 256], from the first power of two at which every case's "
        "inputs and output take >= 4 x the 1.0 MiB L3"
    ]  # 16,384 rows × 64 cols × 3 arrays × 2 bytes = 6 MiB; 32 cols: 3 MiB, short of 4


def test_an_unknown_preset_names_dram() -> None:
    with pytest.raises(ConfigError, match="valid: S, M, L, DRAM"):
        precheck(["preset=XXL"])


def test_the_cache_is_the_largest_level_sysfs_reports(monkeypatch) -> None:
    caches = {"L1d": 48 * 1024, "L1i": 32 * 1024, "L2": 2 * MIB, "L3": 300 * MIB}
    monkeypatch.setattr(dram_sizes, "cpu_caches", lambda: caches)
    assert dram_sizes.last_level_cache() == ("L3", 300 * MIB)
    monkeypatch.setattr(dram_sizes, "cpu_caches", lambda: {})
    monkeypatch.setattr(dram_sizes, "last_level_cache_bytes", lambda: 8 * MIB)
    assert dram_sizes.last_level_cache() == ("assumed", 8 * MIB)


def test_the_run_records_the_cache_and_the_sizes_in_environment_json(host, tmp_path) -> None:
    host(4096)  # 4 KiB: 2**12 float16 values in and out hold four of it, small enough to run here
    cfg = make_config("scenario=elementwise_chain", "preset=DRAM", "scenario.ops=[scale]", "dtype=float16",
                      "backends=[numpy]", "device=cpu", "timing=quick", "isolate=false")  # fmt: skip
    run(cfg, tmp_path, show_progress=False)
    sizing = json.loads((tmp_path / "environment.json").read_text())["sizing"]
    assert sizing["last_level_cache"] == {"level": "L3", "bytes": 4096}
    assert sizing["axis"] == "n" and sizing["sizes"] == [2**12, 2**13, 2**14]
