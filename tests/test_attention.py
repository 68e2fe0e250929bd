"""Attention: the scenario's reference, ledger (against hand counts), footprint guard and tolerance, and every
runnable kernel on an awkward size (seq_len 193: no tile divides it) beyond the small checks of test_kernels.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scenarios.attention import Attention, key_rows_streamed, storage_precision
from scenarios.attention import scenario as attention
from suite.core import numerics, registry, targets
from suite.core.errors import ConfigError
from suite.core.registry import KernelKey
from suite.core.scenario import Scenario
from suite.run import footprint

SCN = Attention()
BASE = {"batch": 1, "heads": 2, "kv_heads": 2, "seq_len": 193, "head_dim": 64, "causal": False, "block_m": 64,
        "block_n": 64}  # fmt: skip


def naive(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """Attention straight from its definition, one (batch, head) at a time, in float64."""
    out = np.empty(q.shape)
    seq_len = q.shape[2]
    for b, h in np.ndindex(q.shape[:2]):
        s = q[b, h].astype(np.float64) @ k[b, h].astype(np.float64).T / math.sqrt(q.shape[3])
        if causal:
            s[np.triu_indices(seq_len, 1)] = -np.inf
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[b, h] = (p / p.sum(axis=1, keepdims=True)) @ v[b, h].astype(np.float64)
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_reference_matches_the_definition_across_slabs(causal: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    params = {**BASE, "heads": 1, "kv_heads": 1, "seq_len": 600, "head_dim": 8, "causal": causal}
    monkeypatch.setattr(attention, "SLAB", 600 * 256)  # slabs of 256, 256 and 88 query rows
    assert [r.stop for r in attention.slabs(params)] == [256, 512, 600]
    inputs = SCN.make_inputs(params, "float32", np.random.default_rng(3))
    np.testing.assert_allclose(SCN.reference(inputs, params), naive(**inputs, causal=causal), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_reference_is_multi_head_on_repeated_kv(causal: bool) -> None:
    """kv_heads = heads/2 is multi-head attention on K and V with each head repeated (repeat_interleave): query
    head h reads K/V head h // 2. With 4 heads on 2, heads 1 and 2 read different K/V heads under h // group
    and the other one under h % kv_heads, so a swapped mapping fails here."""
    gqa = {**BASE, "batch": 2, "heads": 4, "kv_heads": 2, "seq_len": 23, "head_dim": 8, "causal": causal}
    mha = {**gqa, "kv_heads": 4}
    inputs = SCN.make_inputs(gqa, "float32", np.random.default_rng(4))
    assert inputs["k"].shape == inputs["v"].shape == (2, 2, 23, 8) and inputs["q"].shape == (2, 4, 23, 8)
    repeated = {**inputs, "k": np.repeat(inputs["k"], 2, axis=1), "v": np.repeat(inputs["v"], 2, axis=1)}
    tiled = {**inputs, "k": np.tile(inputs["k"], (1, 2, 1, 1)), "v": np.tile(inputs["v"], (1, 2, 1, 1))}
    out = SCN.reference(inputs, gqa)
    np.testing.assert_allclose(out, SCN.reference(repeated, mha), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out, naive(**repeated, causal=causal), rtol=1e-12, atol=1e-12)
    assert numerics.rel_err(SCN.reference(tiled, mha), out) > 0.1  # the h % kv_heads mapping
    np.testing.assert_array_equal(
        storage_precision(inputs, gqa, "float16"), storage_precision(repeated, mha, "float16")
    )


def test_causal_mask_hides_later_keys() -> None:
    params = {**BASE, "seq_len": 5, "head_dim": 4, "causal": True}
    inputs = SCN.make_inputs(params, "float32", np.random.default_rng(0))
    out = SCN.reference(inputs, params)
    np.testing.assert_allclose(out[:, :, 0], inputs["v"][:, :, 0])  # the first query sees only the first key


def test_ledger_matches_hand_counts() -> None:
    # N = 2 heads, L = 193, d = 64, s = 4, block_m = 64: query tiles of 64, 64, 64, 1 rows, each reading all
    # 193 key rows: 772 K (and V) rows per head.
    led = SCN.ledger(BASE, "float32")
    qkvo, streamed, e = 2 * 193 * 64 * 4, 2 * 64 * 4 * 772, 2 * 193 * 193
    scores, softmax, pv = led["unfused"].kernels
    assert (scores.bytes_read, scores.bytes_written) == (qkvo + streamed, e * 4) == (494_080, 297_992)
    assert (softmax.bytes_read, softmax.bytes_written) == (e * 4, e * 4)
    assert (pv.bytes_read, pv.bytes_written) == (e * 4 + streamed, qkvo) == (693_256, 98_816)
    (flash,) = led["fused"].kernels
    assert (flash.bytes_read, flash.bytes_written) == (qkvo + 2 * streamed, qkvo) == (889_344, 98_816)
    assert led["library"].bytes_read == 3 * qkvo and led["library"].bytes_written == qkvo
    flops = 4 * 2 * 193**2 * 64
    assert led["unfused"].flops == led["fused"].flops == led["library"].flops == flops == 19_071_488
    # S and P are each written once and read once: 2·B·H·L²·s bytes each, which fusion removes.
    assert scores.bytes_written + softmax.bytes_read == softmax.bytes_written + pv.bytes_read - streamed == 2 * e * 4
    assert led["fused"].saved_bytes == 2 * (2 * e * 4)
    assert led["unfused"].launches == 3 and led["fused"].launches == 1


def test_causal_ledger_counts_the_triangle_and_the_shorter_key_streams() -> None:
    params = {**BASE, "causal": True}
    # query tiles end at rows 64, 128, 192, 193: they stream 64 + 128 + 192 + 193 = 577 key rows.
    assert key_rows_streamed(193, 64, True) == 577 and key_rows_streamed(193, 64, False) == 772
    led = SCN.ledger(params, "float16")
    e = 2 * 193 * 194 // 2
    assert led["fused"].flops == 4 * 64 * e == 9_585_152  # about half of the unmasked 19,071,488
    scores = led["unfused"].kernels[0]
    assert scores.bytes_written == e * 2 and scores.bytes_read == 2 * 193 * 64 * 2 + 2 * 64 * 2 * 577


def test_grouped_ledger_matches_hand_counts() -> None:
    # batch 2, heads 4 on 2 K/V heads: N = 8, N_kv = 4, L = 33, d = 16, s = 4, block_m = 16: query tiles of 16,
    # 16, 1 rows, each reading all 33 key rows: 99 K (and V) rows per query head, streamed per query head.
    params = {**BASE, "batch": 2, "heads": 4, "kv_heads": 2, "seq_len": 33, "head_dim": 16, "block_m": 16}
    led = SCN.ledger(params, "float32")
    qkvo, kv, streamed, e = 8 * 33 * 16 * 4, 4 * 33 * 16 * 4, 8 * 16 * 4 * 99, 8 * 33 * 33
    assert (qkvo, kv, streamed, e) == (16_896, 8_448, 50_688, 8_712)
    (flash,) = led["fused"].kernels
    assert (flash.bytes_read, flash.bytes_written) == (qkvo + 2 * streamed, qkvo) == (118_272, 16_896)
    scores, _, pv = led["unfused"].kernels
    assert (scores.bytes_read, pv.bytes_read) == (qkvo + streamed, e * 4 + streamed) == (67_584, 85_536)
    assert (led["library"].bytes_read, led["library"].bytes_written) == (qkvo + 2 * kv, qkvo) == (33_792, 16_896)
    # eager: K and V expanded first, each read once (kv) and written for every query head (qkvo)
    eager = led["eager"].kernels
    assert [k.name for k in eager] == ["repeat_k", "repeat_v", "scores", "softmax", "pv"]
    assert [(k.bytes_read, k.bytes_written) for k in eager[:3]] == [(8_448, 16_896)] * 2 + [(33_792, 34_848)]
    assert eager[4].bytes_read == e * 4 + qkvo == 51_744
    # memory: q, O (qkvo each), k, v (kv each); eager also holds the two expanded copies beside S and P
    io, square = 2 * qkvo + 2 * kv, 8 * 33 * 33 * 4
    assert led["fused"].peak_bytes == led["library"].peak_bytes == io == 50_688
    assert led["unfused"].peak_bytes == io + 2 * square == 120_384
    assert led["eager"].peak_bytes == led["compiled"].peak_bytes == io + 2 * qkvo + 2 * square == 154_176
    # multi-head: nothing to expand
    mha = SCN.ledger({**params, "kv_heads": 4}, "float32")
    assert [k.name for k in mha["eager"].kernels] == ["scores", "softmax", "pv"]
    assert mha["eager"].peak_bytes == mha["unfused"].peak_bytes == 4 * qkvo + 2 * square


def test_tiles_change_only_the_streamed_rows() -> None:
    small = SCN.ledger({**BASE, "block_m": 16}, "float32")["fused"]
    large = SCN.ledger({**BASE, "block_m": 128}, "float32")["fused"]
    assert small.bytes_read - large.bytes_read == 2 * 2 * 64 * 4 * 193 * (math.ceil(193 / 16) - math.ceil(193 / 128))
    assert small.bytes_written == large.bytes_written and small.flops == large.flops


def test_footprints() -> None:
    io = 4 * 2 * 193 * 64 * 2
    assert SCN.footprint_bytes(BASE, "float16", "fused") == SCN.footprint_bytes(BASE, "float16", "library") == io
    assert SCN.footprint_bytes({**BASE, "causal": True}, "float16", "unfused") == io + 2 * 2 * 193 * 193 * 2


class FakeTarget:
    name = "fake/cuda"

    def __init__(self, free: int | None) -> None:
        self.free = free

    def free_bytes(self) -> int | None:
        return self.free


def test_guard_skips_what_does_not_fit_and_names_the_footprint() -> None:
    params = {**BASE, "seq_len": 4096, "heads": 8, "kv_heads": 8}
    need = SCN.footprint_bytes(params, "float32", "unfused")
    reason = footprint.guard(SCN, params, "float32", "unfused", FakeTarget(need - 1))
    assert reason is not None and reason.startswith("unfused needs ") and f"{need:,} bytes" in reason
    assert "fake/cuda" in reason
    assert footprint.guard(SCN, params, "float32", "unfused", FakeTarget(need)) is None
    assert footprint.guard(SCN, params, "float32", "fused", FakeTarget(need // 10)) is None  # fused: no L×L


def test_guard_uses_host_memory_where_the_target_cannot_tell(monkeypatch: pytest.MonkeyPatch) -> None:
    params = {**BASE, "seq_len": 8192}
    monkeypatch.setattr(footprint, "host_available_bytes", lambda: 2**20)
    reason = footprint.guard(SCN, params, "float32", "unfused", FakeTarget(None))
    assert reason is not None and "(host memory)" in reason and "1.0 MiB" in reason
    monkeypatch.setattr(footprint, "host_available_bytes", lambda: None)
    assert footprint.guard(SCN, params, "float32", "unfused", FakeTarget(None)) is None


def test_guard_ignores_scenarios_without_a_footprint_model() -> None:
    assert footprint.guard(Scenario(), BASE, "float32", "unfused", FakeTarget(0)) is None


def test_host_available_memory_is_read() -> None:
    available = footprint.host_available_bytes()
    assert available is None or available > 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"head_dim": 512}, "head_dim=512"),
        ({"block_m": 48}, "block_m=48"),
        ({"block_n": True}, "block_n=True"),
        ({"causal": "yes"}, "causal='yes'"),
        ({"seq_len": 0}, "seq_len=0"),
        ({"batch": 2**20, "seq_len": 2**14}, "elements"),
        ({"kv_heads": 0}, "kv_heads=0 must be a positive integer"),
        ({"kv_heads": 1.5}, "kv_heads=1.5 must be a positive integer"),
        ({"heads": 8, "kv_heads": 3}, r"^scenario\.kv_heads=3 must divide scenario\.heads=8$"),
        ({"heads": 2, "kv_heads": 4}, "kv_heads=4 must divide scenario.heads=2"),
    ],
)
def test_bad_cases_are_refused(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SCN.check({**BASE, **change})


def test_a_bad_kv_heads_fails_before_any_work() -> None:
    from suite.cli import precheck

    overrides = ["scenario=attention", "scenario.heads=[8]", "scenario.kv_heads=[3]", "device=cpu"]
    with pytest.raises(ConfigError, match=r"^scenario\.kv_heads=3 must divide scenario\.heads=8$"):
        precheck(overrides)


def test_emulation_keeps_a_ragged_tile_within_the_budget() -> None:
    assert SCN.emulation_params(SCN.checks[0], 4096) == SCN.checks[0]
    for seq_len, head_dim in [(2048, 64), (193, 64), (4096, 128), (100, 256)]:
        small = SCN.emulation_params({**BASE, "seq_len": seq_len, "head_dim": head_dim}, 4096)
        SCN.check(small)
        assert small["batch"] == small["heads"] == 1 and small["block_m"] == small["block_n"] == 16
        assert small["seq_len"] % 16 != 0 and 17 <= small["seq_len"] <= 64
        assert small["head_dim"] == head_dim


def test_emulation_keeps_the_group_of_a_grouped_case() -> None:
    small = SCN.emulation_params({**BASE, "heads": 32, "kv_heads": 8, "seq_len": 2048, "head_dim": 128}, 4096)
    SCN.check(small)
    assert (small["batch"], small["heads"], small["kv_heads"]) == (1, 4, 1)
    assert small["seq_len"] % 16 != 0 and 17 <= small["seq_len"] <= 64


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_tolerance_holds_the_storage_precision_decomposition(dtype: str) -> None:
    inputs = SCN.make_inputs(BASE, dtype, np.random.default_rng(1))
    ref = SCN.reference(inputs, BASE)
    tol = SCN.tolerance(inputs, BASE, dtype, ref)
    own = numerics.rel_err(storage_precision(inputs, BASE, dtype), ref)
    assert own < tol <= 4.0
    # A wrong scale (1/d instead of 1/√d) is far outside it.
    wrong = SCN.reference(inputs, {**BASE, "head_dim": 64**2 // 8})
    assert numerics.rel_err(wrong, ref) > 10 * tol


registry.discover()
RUNNABLE = [
    pytest.param(key, id=f"{key.backend}-{key.device}-{key.variant}")
    for key in registry.REGISTRY.keys(scenario="attention")
    if key.backend != "numba" or key.device == "cpu"  # the simulator is too slow for 193: test_kernels covers it
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("key", RUNNABLE)
def test_kernels_on_a_ragged_seq_len(key: KernelKey, dtype: str, causal: bool) -> None:
    target = targets.TARGETS[(key.backend, key.device)]
    avail = target.probe()
    if not avail.runs:
        pytest.skip(avail.reason)
    params = {**BASE, "causal": causal}
    inputs = SCN.make_inputs(params, dtype, np.random.default_rng(11))
    ref = SCN.reference(inputs, params)
    out = target.empty(SCN.output_shape(params), dtype)
    target.poison(out)
    launch = registry.REGISTRY.get(key)(
        {n: target.asarray(a) for n, a in inputs.items()}, out, params, {"stream": None}
    )
    launch()
    target.synchronize()
    _, problem = numerics.judge(np.asarray(target.to_host(out)), ref, SCN.tolerance(inputs, params, dtype, ref))
    assert problem == ""


def _row(seq_len: int, backend: str, device: str, variant: str, time_ms: float | None, **extra: object) -> dict:
    params = {**BASE, "heads": 4, "seq_len": seq_len}
    led = SCN.ledger(params, "float32")[variant]
    return {"scenario": "attention", "params": json.dumps(params, sort_keys=True), "dtype": "float32",
            "backend": backend, "device": device, "variant": variant, "status": "ok" if time_ms else "skipped",
            "reason": "", "time_ms": time_ms, "time_q1_ms": time_ms, "time_q3_ms": time_ms, "mode": "native",
            "bytes_modeled": led.bytes_moved(), "flops_modeled": led.flops, "size": seq_len,
            "store_model": "write-once", **extra}  # fmt: skip


def test_charts_and_section_read_the_table(tmp_path: Path) -> None:
    from scenarios.attention import charts, report
    from suite.kit.tidy import tidy

    too_big = footprint.guard(SCN, {**BASE, "heads": 4, "seq_len": 512}, "float32", "unfused", FakeTarget(10**6))
    rows = [
        _row(128, "numba", "cpu", "fused", 2.0), _row(128, "numba", "cpu", "unfused", 1.5),
        _row(256, "numba", "cpu", "fused", 5.0), _row(256, "numba", "cpu", "unfused", 6.0),
        _row(512, "numba", "cpu", "fused", 20.0), _row(512, "numba", "cpu", "unfused", None, reason=too_big),
        *(_row(n, "torch", "cpu", "library", t) for n, t in [(128, 1.0), (256, 2.5), (512, 10.0)]),
    ]  # fmt: skip
    frame = tidy(pd.DataFrame(rows))
    section = report.fitting_section(frame)
    assert "seq_len ≥ 256" in section  # unfused slower than fused from 256 on
    assert "seq_len = 512 (unfused needs" in section  # and skipped by the footprint guard at 512
    assert "2.00× at seq_len 512" in section  # fused 20 ms against the library's 10 ms
    paths = charts.tflops_chart(frame, tmp_path) + charts.traffic_chart(frame, tmp_path, Attention())
    assert [p.name for p in paths] == ["tflops_attention.png", "traffic_attention.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)
