"""Every CPU figure names its host's core: environment.json records the core as LLVM names it and the one Numba
built for, and the report's provenance and `compare` print them beside the model name."""

from __future__ import annotations

import pytest

from suite.report.host import host_cpu
from suite.run import provenance


def test_the_core_is_llvms_name_for_this_host_and_numba_cpu_name_is_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    from llvmlite import binding

    host = binding.get_host_cpu_name()
    monkeypatch.delenv("NUMBA_CPU_NAME", raising=False)
    assert provenance.cpu_microarchitecture() == {"microarchitecture": host, "numba_target": host}
    monkeypatch.setenv("NUMBA_CPU_NAME", "host")
    assert provenance.cpu_microarchitecture()["numba_target"] == host
    monkeypatch.setenv("NUMBA_CPU_NAME", "znver3")  # AVX2 code on an AVX-512 host
    assert provenance.cpu_microarchitecture() == {"microarchitecture": host, "numba_target": "znver3"}


def test_the_line_says_the_numba_target_only_where_it_differs() -> None:
    same = {"cpu": {"model": "AMD EPYC", "microarchitecture": "znver4", "numba_target": "znver4"}}
    other = {"cpu": {"model": "AMD EPYC", "microarchitecture": "znver4", "numba_target": "znver3"}}
    assert host_cpu(same) == "AMD EPYC, znver4"
    assert host_cpu(other) == "AMD EPYC, znver4; Numba built for znver3"
    assert host_cpu({"jobs": {"0": other, "1": same}}) == "AMD EPYC, znver4; Numba built for znver3"  # a multirun
    assert host_cpu({"cpu": {"model": "AMD EPYC"}}) == "AMD EPYC"  # written before the core was recorded
    assert host_cpu({}) == "" and host_cpu({"runs": {}}) == ""


def test_a_run_records_its_core_and_its_report_says_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from llvmlite import binding

    from suite.kit.store import ENVIRONMENT
    from suite.report.report import sections
    from suite.run.runner import run
    from tests.conftest import make_config

    cfg = make_config("plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]",
                      "variants=[good]", "device=cpu", "dtype=float32", "timing=quick", "isolate=false")  # fmt: skip
    frame = run(cfg, tmp_path, show_progress=False).table
    cpu = json.loads((tmp_path / ENVIRONMENT).read_text())["cpu"]
    assert cpu["microarchitecture"] == binding.get_host_cpu_name()
    text = "\n\n".join(sections(frame, [], tmp_path))
    assert f"- CPU (environment.json): {cpu['model']}, {cpu['microarchitecture']}" in text
    assert cpu["caches"] == provenance.cpu_caches() and "L1d" in cpu["caches"]  # this host's sysfs lists them
    assert "; caches L1d " in text


def test_cache_sizes_are_read_from_sysfs_by_level_and_kind(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for i, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"), ("3", "Unified",
                                                                                               "300M")]):  # fmt: skip
        index = tmp_path / f"index{i}"
        index.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (index / name).write_text(value + "\n")
    assert provenance.cpu_caches(tmp_path) == {"L1d": 48 << 10, "L1i": 32 << 10, "L3": 300 << 20}
    assert provenance.cpu_caches(tmp_path / "absent") == {}
    said = host_cpu({"cpu": {"model": "Xeon", "caches": provenance.cpu_caches(tmp_path)}})
    assert said == "Xeon; caches L1d 48 KiB, L3 300 MiB"
