"""The CPU ceiling is a copy that stores as the kernels do, and the streaming copies are kept beside it."""

from __future__ import annotations

import numpy as np

from backends.numba.copies import copy_kernels
from suite.core import registry
from suite.run import ceiling


def test_the_ordinary_store_copy_copies_and_cannot_become_memcpy() -> None:
    memcpy_loop, ordinary = copy_kernels()
    rng = np.random.default_rng(3)
    src, dst = rng.standard_normal(10_001).astype(np.float32), np.full(10_001, np.nan, np.float32)
    ordinary(src, dst, np.float32(0.0))
    np.testing.assert_array_equal(dst, src)
    asm = ordinary.inspect_asm(ordinary.signatures[0])
    assert "memcpy" not in asm and "movnt" not in asm  # else it may stream, and is no ordinary-store bound
    memcpy_loop(src, dst)
    assert "memcpy" in memcpy_loop.inspect_asm(memcpy_loop.signatures[0])  # the other copy is the memcpy one


def test_cpu_rows_are_held_to_the_ordinary_store_copy_even_when_a_streaming_copy_is_faster() -> None:
    rates = {"numpy copyto": 22.0, "numba parallel memcpy": 40.0, "numba ordinary-store copy": 25.0}
    assert ceiling.held_to(rates, {"numba ordinary-store copy"}) == "numba ordinary-store copy"
    assert ceiling.held_to({"numpy copyto": 22.0, "torch copy_": 19.0}, set()) == "numpy copyto"
    assert ceiling.held_to({"cupy copy": 4100.0, "torch copy_": 4250.0}, {"cupy copy", "torch copy_"}) == "torch copy_"


def test_the_backends_bring_the_cpu_copies_and_say_which_may_stream() -> None:
    registry.discover()
    found = {c.method: c for c in ceiling.copies("cpu", 1000, None)}
    assert not found["numba ordinary-store copy"].streams
    assert found["numba parallel memcpy"].streams and found["numpy copyto"].streams
    for copy in found.values():
        copy.launch()  # each is ready to time
    assert not ceiling.copies("cuda", 1000, None)  # no stream, no GPU copy


def _fake_ceiling(monkeypatch, seconds: float, cache_bytes: int = 0) -> None:
    """The worker's ceiling measurement replaced by 10 GB/s over 8 MB copies, and the copy timed beside a case
    by one taking `seconds`: 8 MB / seconds is what a row held to it must read."""
    import time

    from suite.core.backend import Copy

    top = ceiling.Ceiling("cpu", 10.0, "fake copy", 8_000_000, cache_bytes, {"fake copy": 10.0}, 10.0)
    monkeypatch.setattr(ceiling, "measure", lambda device: top)
    monkeypatch.setattr(ceiling, "held_copy", lambda device: Copy("fake copy", lambda: time.sleep(seconds)))


def _rows(tmp_path, *overrides: str):
    from suite.run.runner import run
    from tests.conftest import make_config

    fake = ["plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]", "device=cpu",
            "timing=quick", "dtype=float32", "isolate=false", "variants=[good]"]  # fmt: skip
    return run(make_config(*fake, *overrides), tmp_path, show_progress=False).table


def test_a_case_past_the_cache_is_held_to_the_copy_timed_in_its_own_rounds(tmp_path, monkeypatch) -> None:
    _fake_ceiling(monkeypatch, seconds=0.004)
    rows = _rows(tmp_path)
    assert rows["ceiling_gbps"].between(1.0, 2.0).all(), rows["ceiling_gbps"]  # 8 MB in 4 ms and a little more
    assert (rows["pct_of_ceiling"] == 100 * rows["gbps"] / rows["ceiling_gbps"]).all()


def test_a_case_within_the_cache_and_ceiling_once_keep_the_workers_measurement(tmp_path, monkeypatch) -> None:
    _fake_ceiling(monkeypatch, seconds=0.004, cache_bytes=1 << 40)
    assert (_rows(tmp_path / "fits")["ceiling_gbps"] == 10.0).all()
    _fake_ceiling(monkeypatch, seconds=0.004)
    assert (_rows(tmp_path / "once", "timing.ceiling=once")["ceiling_gbps"] == 10.0).all()


def test_read_beside_replaces_only_the_devices_that_timed_their_copy() -> None:
    from suite.run.timing import Timing

    cpu = ceiling.Ceiling("cpu", 10.0, "fake copy", 8_000_000, 0)
    gpu = ceiling.Ceiling("cuda", 4000.0, "cupy copy", 1 << 31, 1 << 26)
    held = ceiling.read_beside({"cpu": cpu, "cuda": gpu}, {"cpu": Timing([2.0, 4.0, 100.0])})
    assert held["cuda"] is gpu and held["cpu"].gbps == 8_000_000 / 4e-3 / 1e9
    assert held["cpu"].method == "fake copy, timed beside the case" and held["cpu"].cache_bytes == 0
