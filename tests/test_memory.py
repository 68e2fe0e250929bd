"""Peak memory: the ledger's live-buffer model against hand counts, the CPU and CUDA meters, the memory verdicts,
the report's Memory section and first screen, and compare's memory flag."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from suite.core.ledger import live_peak
from suite.core.scenario import SCENARIOS, discover
from suite.report import compare_stats
from suite.run import peak_memory
from suite.run.stages import Memory

discover()
MIB = 2**20


def test_live_peak_counts_what_coexists() -> None:
    # a -> t1 -> t2 -> b: at the second kernel t1 and t2 are both alive, never t1 and t3
    steps = [(("a",), ("t1",)), (("t1",), ("t2",)), (("t2",), ("t3",)), (("t3",), ("b",))]
    assert live_peak(100, steps, {"t1": 10, "t2": 20, "t3": 40}) == 100 + 20 + 40
    assert live_peak(100, [], {}) == 100
    # a tensor read again later stays alive in between
    assert live_peak(0, [((), ("s",)), ((), ("u",)), (("s", "u"), ())], {"s": 5, "u": 7}) == 12


@pytest.mark.parametrize(
    ("ops", "unfused"),
    [(["scale"], 2), (["scale", "shift"], 3), (["scale", "shift", "relu"], 4), (["scale", "shift", "relu", "gelu"], 4)],
)
def test_chain_peak_by_hand(ops: list[str], unfused: int) -> None:
    n, s = 1000, 4
    ledger = SCENARIOS["elementwise_chain"].ledger({"n": n, "ops": ops}, "float32")
    assert ledger["fused"].peak_bytes == ledger["compiled"].peak_bytes == 2 * n * s  # x and y
    assert ledger["unfused"].peak_bytes == ledger["eager"].peak_bytes == unfused * n * s


def test_normalization_peaks_by_hand() -> None:
    params = {"rows": 3, "cols": 5, "tile": 64}
    matrix, vector, stat = 3 * 5 * 4, 5 * 4, 3 * 4
    # layernorm: x, weight, bias, y held; at "normalise" xc, var and xhat are alive together
    ln = SCENARIOS["layernorm"].ledger(params, "float32")
    held = matrix + 2 * vector + matrix
    assert ln["fused"].peak_bytes == ln["library"].peak_bytes == held
    assert ln["unfused"].peak_bytes == held + matrix + stat + matrix
    # rmsnorm: at "normalise" ms and xhat
    rms = SCENARIOS["rmsnorm"].ledger(params, "float32")
    held = matrix + vector + matrix
    assert rms["fused"].peak_bytes == held and rms["unfused"].peak_bytes == held + stat + matrix
    # softmax: at "exp" z and e (the max is dead by then)
    sm = SCENARIOS["softmax"].ledger(params, "float32")
    assert sm["fused"].peak_bytes == 2 * matrix and sm["unfused"].peak_bytes == 2 * matrix + 2 * matrix


def test_attention_and_matmul_peaks_by_hand() -> None:
    att = SCENARIOS["attention"].ledger(
        {"batch": 1, "heads": 2, "seq_len": 7, "head_dim": 4, "causal": True, "block_m": 16, "block_n": 16},
        "float16",
    )
    io = 4 * 2 * 7 * 4 * 2
    assert att["fused"].peak_bytes == att["library"].peak_bytes == io
    assert att["unfused"].peak_bytes == att["eager"].peak_bytes == io + 2 * 2 * 7 * 7 * 2  # S and P, full L×L
    mm = SCENARIOS["matmul"].ledger({"m": 4, "n": 6, "k": 5, "epilogue": "bias_gelu", "tile": [16, 16, 16]}, "float32")
    held = (4 * 5 + 5 * 6 + 6 + 4 * 6) * 4
    assert mm["fused"].peak_bytes == mm["compiled"].peak_bytes == held
    assert mm["unfused"].peak_bytes == held + 4 * 6 * 4  # A·B stored for the epilogue
    assert mm["eager"].peak_bytes == held + 2 * 4 * 6 * 4  # and the bias add's own M×N beside it


def test_footprint_guard_reads_the_ledgers_peak() -> None:
    scn = SCENARIOS["softmax"]
    params = {"rows": 3, "cols": 5, "tile": 64}
    assert scn.footprint_bytes(params, "float32", "unfused") == scn.ledger(params, "float32")["unfused"].peak_bytes


@pytest.mark.parametrize(
    ("family", "params", "what"),
    [
        ("softmax", {"rows": 2**14, "cols": 2**15, "tile": 4096}, "softmax of 16384 × 32768"),
        ("swiglu", {"rows": 2**14, "cols": 2**15}, "swiglu of 16384 × 32768"),
        ("rope", {"batch": 8, "seq_len": 8192, "heads": 32, "kv_heads": 8, "head_dim": 128, "pairing": "half"},
         "rope of 335,544,320 elements"),
        ("cross_entropy", {"tokens": 2**16, "vocab": 2**17, "tile": 2048}, "cross_entropy over 65536 × 131072 logits"),
        ("linear_cross_entropy", {"tokens": 2**16, "hidden": 64, "vocab": 2**17, "chunk": 1024, "tile": 2048},
         "linear_cross_entropy over 65536 tokens × 131072 logits"),
    ],
)  # fmt: skip
def test_a_case_too_large_for_the_host_is_refused_in_one_words(monkeypatch, family, params, what) -> None:
    """Every family that guards host memory says it in the one guard's words (suite.core.host_memory)."""
    from suite.core import host_memory
    from suite.core.errors import ConfigError

    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 8 * 2**30 // 4096}  # an 8 GiB machine
    monkeypatch.setattr(host_memory.os, "sysconf", lambda name: pages[name])
    with pytest.raises(ConfigError, match=rf"^{what} needs about [\d.]+ GiB; this machine has 8\.0 GiB$"):
        SCENARIOS[family].check(params)


# The CPU meter: a kernel with a known scratch buffer, and one with none ------------------------------------------


def _kernel(scratch: int) -> None:
    if scratch:
        buf = np.empty(scratch, dtype=np.uint8)
        buf[::4096] = 1  # one byte per page: every page resident
        del buf


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="no resettable resident-set high-water mark")
def test_rss_peak_sees_a_scratch_buffer_freed_inside_the_call() -> None:
    size = 48 * MIB
    with peak_memory.rss_peak() as with_scratch:
        _kernel(size)
    with peak_memory.rss_peak() as without:
        _kernel(0)
    tolerance = 2 * MIB + 0.05 * size  # the interpreter's own objects and the allocator's rounding
    assert abs(with_scratch[0] - size) < tolerance, with_scratch
    assert without[0] < 2 * MIB, without


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="no resettable resident-set high-water mark")
def test_rss_peak_sees_memory_freed_earlier_and_reused() -> None:
    """A block freed before the measurement and served again must count: its pages are handed back first."""
    warm = np.ones(40 * MIB, dtype=np.uint8)
    del warm
    with peak_memory.rss_peak() as reading:
        again = np.ones(40 * MIB, dtype=np.uint8)
        del again
    assert reading[0] > 38 * MIB, reading


# The CUDA meter, on fakes of the device's free memory -------------------------------------------------------------


class FakeDevice:
    name = "fake/cuda"

    def __init__(self, free: int) -> None:
        self.free, self.synced = free, 0

    def free_bytes(self) -> int:
        return self.free

    def synchronize(self) -> None:
        self.synced += 1


def test_device_peak_is_the_memory_in_use_after_the_call_with_pools_released_first(monkeypatch) -> None:
    released = []
    monkeypatch.setattr(peak_memory.footprint, "release_caches", lambda: released.append(True))
    device = FakeDevice(80 * 2**30)
    with peak_memory.device_peak(device) as reading:
        assert released  # released before the first reading, or a pool's cached blocks would hide an allocation
        device.free -= 96 * MIB  # the call's buffers, still held by the allocator's pool after it
    assert reading[0] == 96 * MIB and device.synced == 2


def test_device_peak_says_where_free_memory_is_unknown(monkeypatch) -> None:
    monkeypatch.setattr(peak_memory.footprint, "release_caches", lambda: None)
    device = FakeDevice(0)
    device.free_bytes = lambda: None  # type: ignore[method-assign]
    with pytest.raises(OSError, match="cannot say how much memory is free"), peak_memory.device_peak(device):
        pass


# Verdicts -----------------------------------------------------------------------------------------------------------


def test_versus_uses_measured_peaks_where_both_are_and_a_band() -> None:
    base, fused = Memory(200 * MIB, 190 * MIB), Memory(100 * MIB, 95 * MIB)
    ratio, saved, word, basis = peak_memory.versus(base, fused)
    assert (round(ratio, 3), round(saved, 3), word, basis) == (2.0, 100.0, "pays", "measured")
    ratio, _, word, basis = peak_memory.versus(Memory(None, 190 * MIB), fused)
    assert basis == "modeled" and round(ratio, 3) == 2.0 and word == "pays"
    assert peak_memory.versus(Memory(101 * MIB, None), Memory(100 * MIB, None))[2] == "neutral"  # within 5%
    assert peak_memory.versus(Memory(3 * MIB, None), Memory(2 * MIB, None))[2] == "neutral"  # 1 MiB is noise
    assert peak_memory.versus(Memory(100 * MIB, None), Memory(150 * MIB, None))[2] == "loses"


def test_compare_flags_a_memory_regression() -> None:
    row = {
        "peak_bytes_base": 64 * MIB,
        "peak_bytes_new": 128 * MIB,
        "peak_bytes_modeled_base": 64 * MIB,
        "peak_bytes_modeled_new": 64 * MIB,
    }
    assert compare_stats.memory_grew(row, 0.05) == "memory 64.0→128.0 MiB (measured)"
    assert compare_stats.memory_grew({**row, "peak_bytes_new": 66 * MIB}, 0.05) == ""
    modeled = {"peak_bytes_modeled_base": 10 * MIB, "peak_bytes_modeled_new": 30 * MIB}
    assert compare_stats.memory_grew(modeled, 0.05).endswith("(modeled)")
    assert compare_stats.memory_grew({}, 0.05) == ""  # runs from before peaks were recorded


def test_a_resident_set_measured_on_the_cpu_needs_four_mib_to_flag() -> None:
    """A CPU's resident-set peak moves by a few MiB between identical runs; a GPU's memory in use does not."""
    row = {"peak_bytes_base": 20 * MIB, "peak_bytes_new": 23 * MIB}
    assert compare_stats.memory_grew({**row, "device": "cpu"}, 0.05) == ""
    assert compare_stats.memory_grew({**row, "device": "cuda"}, 0.05) == "memory 20.0→23.0 MiB (measured)"
    assert compare_stats.memory_grew({**row, "peak_bytes_new": 25 * MIB, "device": "cpu"}, 0.05) != ""


# End to end on this machine's CPU: measured against modeled, the verdict, the report ------------------------------


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="no resettable resident-set high-water mark")
def test_measured_peak_follows_the_model_and_the_report_says_so(tmp_path: Path) -> None:
    from suite.report.plots import make_charts
    from suite.report.report import write_report
    from suite.run.runner import run
    from tests.conftest import make_config

    n = 1 << 22  # 16 MiB of float32 per buffer
    cfg = make_config(
        "scenario=elementwise_chain",
        f"scenario.n=[{n}]",
        "scenario.ops=[scale,shift,relu]",
        "backends=[numba]",
        "device=cpu",
        "dtype=float32",
        "variants=[fused,unfused]",
        "timing=quick",
        "isolate=false",
    )
    frame = run(cfg, tmp_path, show_progress=False).table
    rows = {r.variant: r for r in frame.itertuples()}
    assert rows["fused"].peak_bytes_modeled == 2 * n * 4 and rows["unfused"].peak_bytes_modeled == 4 * n * 4
    for variant in ("fused", "unfused"):
        modeled, measured = rows[variant].peak_bytes_modeled, rows[variant].peak_bytes
        assert abs(measured - modeled) < 2 * MIB + 0.1 * modeled, (variant, measured, modeled)
    fused = rows["fused"]
    assert fused.memory_verdict == "pays" and fused.memory_ratio == pytest.approx(2.0, rel=0.1)
    charts = make_charts(frame, tmp_path / "charts")
    assert (tmp_path / "charts" / "memory_elementwise_chain.png") in charts
    text = write_report(frame, charts, tmp_path).read_text()
    assert text.index("## At a glance") < text.index("## Provenance") < text.index("### Memory")
    glance = text[text.index("## At a glance") : text.index("## Provenance")]
    assert "numba/cpu" in glance and "pays, " in glance and "MiB saved" in glance


def test_compiled_model_counts_the_buffers_its_code_allocates() -> None:
    notes = {"compiler": {"buffer_elements": 1000}}
    stages = SimpleNamespace(ledger=SimpleNamespace(peak_bytes_modeled=5), check=SimpleNamespace(notes=notes))
    assert peak_memory._modeled(stages, 8000, "float32") == 8000 + 4000
    stages.check.notes = {}
    assert peak_memory._modeled(stages, 8000, "float32") == 5


@pytest.mark.gpu
def test_measured_peak_on_a_gpu_follows_the_model(tmp_path: Path) -> None:
    """On a device: every CUDA backend's fused and unfused chain measured within 10% (and the allocators'
    2 MiB rounding) of the ledger's live buffers."""
    from suite.run.runner import run
    from tests.conftest import make_config

    n = 1 << 24
    cfg = make_config(
        "scenario=elementwise_chain",
        f"scenario.n=[{n}]",
        "scenario.ops=[scale,shift,relu]",
        "device=cuda",
        "dtype=float32",
        "variants=[fused,unfused]",
        "timing=quick",
        "isolate=false",
    )
    frame = run(cfg, tmp_path, show_progress=False).table
    measured = frame[(frame["status"] == "ok") & frame["peak_bytes"].notna()]
    assert not measured.empty
    off = (measured["peak_bytes"] - measured["peak_bytes_modeled"]).abs()
    assert (off < 4 * MIB + 0.1 * measured["peak_bytes_modeled"]).all(), measured[["backend", "variant", "peak_bytes"]]


def test_rows_without_peaks_read_as_before() -> None:
    from suite.kit.tidy import tidy
    from suite.report import glance
    from suite.report import memory as report_memory

    old = pd.DataFrame(
        [
            {
                "scenario": "softmax",
                "params": '{"cols": 8, "rows": 2, "tile": 64}',
                "dtype": "float32",
                "backend": "numba",
                "device": "cpu",
                "variant": "fused",
                "status": "ok",
                "time_ms": 1.0,
                "size": 8,
            }
        ]
    )
    data = tidy(old)
    assert report_memory.section(data) is None
    assert glance.section(data) is not None  # a fused row timed: the first screen still says what it can


def test_a_variant_that_holds_more_says_more_not_a_negative_saving() -> None:
    """The summary once read "at most 0.68× less memory, -2.0 MiB saved" for a tiled GEMM holding 2 MiB more."""
    from suite.report.memory import _best

    more = _best(pd.Series({"memory_ratio": 4.2 / 6.2, "memory_saved_mib": -2.0}))
    assert more == "at best 1.48× the memory of its baseline, 2.0 MiB more"
    less = _best(pd.Series({"memory_ratio": 2.0, "memory_saved_mib": 128.0}))
    assert less == "at most 2.00× less memory, 128.0 MiB saved"
