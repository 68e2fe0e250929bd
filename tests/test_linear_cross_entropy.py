"""The linear_cross_entropy family: its ledger against a hand count, its chunks, the values it refuses, and its
point measured: on the CPU the fused variant's peak memory follows the model, a chunk's logits instead of all.

Every kernel's numerics on the family's awkward `checks` (odd token counts in ragged chunks, vocabularies of 3,
100 and 257 in ragged tiles, an odd hidden size, ignored tokens) run in tests/test_kernels.py, the CUDA targets
emulated. Its kernels are the cross-entropy family's and the matmul family's, compiled for sm_90 in theirs.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from scenarios.linear_cross_entropy import LinearCrossEntropy, chunks, liger_chunk
from suite.core.errors import ConfigError

LCE = LinearCrossEntropy()
MIB = 2**20


def test_chunks_cover_every_token_once_the_last_ragged() -> None:
    assert chunks(7, 4) == [(0, 4), (4, 7)]
    assert chunks(4, 4) == [(0, 4)] and chunks(3, 8) == [(0, 3)]
    assert chunks(5, 2) == [(0, 2), (2, 4), (4, 5)]


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_ledger_matches_a_hand_count(dtype: str, s: int) -> None:
    t, h, v, c = 5, 3, 7, 2
    lg = LCE.ledger({"tokens": t, "hidden": h, "vocab": v, "chunk": c, "tile": 32}, dtype)
    unfused = [(k.bytes_read, k.bytes_written, k.flops) for k in lg["unfused"].kernels]
    assert unfused == [
        ((t * h + h * v) * s, t * v * s, 2 * t * h * v),  # the GEMM: hidden and W in, every logit out
        (t * v * s + 8 * t, 4 * t, 4 * t * v + t),  # the row kernel: logits and int64 targets, float32 losses
        (12 * t, s, 2 * t),  # the mean
    ]
    fused = lg["fused"]
    assert fused.launches == 2 * 3 + 1  # chunks of 2, 2 and 1 tokens, two kernels each, then the mean
    assert fused.bytes_read == lg["unfused"].bytes_read + 2 * h * v * s  # W read once more per extra chunk
    assert fused.bytes_written == lg["unfused"].bytes_written and fused.flops == lg["unfused"].flops
    assert fused.saved_bytes == 0  # no traffic removed: every chunk writes and reads its logits
    held = (t * h + h * v) * s + 8 * t + s + 4 * t  # hidden, W, targets, the loss, the per-token losses
    assert lg["unfused"].peak_bytes == held + t * v * s
    assert fused.peak_bytes == held + c * v * s  # one chunk's logits
    assert lg["eager"].peak_bytes == held + 2 * t * v * s  # F.cross_entropy writes the log-softmax too
    assert lg["compiled"].peak_bytes == lg["unfused"].peak_bytes
    library = lg["library"]  # Liger's own chunk (⌈7/3⌉ = 3 parts of ⌈5/3⌉ = 2 tokens), after its zeroed buffer
    assert liger_chunk(t, h, v) == 2 and library.launches == 2 + 2 * 3 + 1
    assert library.peak_bytes == held + 2 * v * s + t * h * s
    assert library.bytes_written == lg["unfused"].bytes_written + t * h * s + 8


def test_liger_chunk_is_liger_kernels_rule() -> None:
    """Liger's own example: 4 × 4,096 tokens, vocabulary 32,000, hidden 4,096 → 8 parts, chunks of 2,048."""
    assert liger_chunk(16384, 4096, 32000) == 2048
    assert liger_chunk(4096, 256, 32000) == 64  # ⌈4096 / 125⌉ = 33, rounded up to a power of two
    assert liger_chunk(5, 4096, 100) == 5  # one part: every token at once


@pytest.mark.parametrize(("key", "value", "match"), [
    ("tile", 48, "power of two"), ("chunk", 0, "positive integer"), ("vocab", 2.5, "positive integer"),
])  # fmt: skip
def test_check_refuses_with_the_reason(key: str, value: object, match: str) -> None:
    params = {"tokens": 8, "hidden": 4, "vocab": 16, "chunk": 4, "tile": 32} | {key: value}
    with pytest.raises(ConfigError, match=match):
        LCE.check(params)


def test_reference_is_the_loss_of_the_float64_logits() -> None:
    params = {"tokens": 6, "hidden": 5, "vocab": 11, "chunk": 4, "tile": 32}
    inputs = LCE.make_inputs(params, "float32", np.random.default_rng(5))
    logits = inputs["hidden"].astype(np.float64) @ inputs["weight"].astype(np.float64)
    keep = inputs["targets"] != -100
    assert 0 < keep.sum() < 6 or keep.all()
    lse = np.log(np.exp(logits).sum(axis=1))
    by_hand = (lse - logits[np.arange(6), np.where(keep, inputs["targets"], 0)])[keep].mean()
    assert LCE.reference(inputs, params)[0] == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="no resettable resident-set high-water mark")
def test_fused_holds_a_chunk_of_logits_measured_on_the_cpu(tmp_path: Path) -> None:
    from suite.run.runner import run
    from tests.conftest import make_config

    t, v, c = 512, 8192, 64  # all the logits: 16 MiB of float32; a chunk's: 2 MiB
    cfg = make_config("scenario=linear_cross_entropy", f"scenario.tokens=[{t}]", "scenario.hidden=[64]",
                      f"scenario.vocab=[{v}]", f"scenario.chunk=[{c}]", "scenario.tile=[2048]", "backends=[numba]",
                      "device=cpu", "dtype=float32", "variants=[fused,unfused]", "timing=quick", "isolate=false")  # fmt: skip
    frame = run(cfg, tmp_path, show_progress=False).table
    rows = {r.variant: r for r in frame.itertuples()}
    assert {r.status for r in rows.values()} == {"ok"}, frame[["variant", "status", "reason"]]
    assert rows["unfused"].peak_bytes_modeled - rows["fused"].peak_bytes_modeled == (t - c) * v * 4
    for variant in ("fused", "unfused"):
        modeled, measured = rows[variant].peak_bytes_modeled, rows[variant].peak_bytes
        assert abs(measured - modeled) < 2 * MIB + 0.1 * modeled, (variant, measured, modeled)
    fused = rows["fused"]
    assert fused.memory_verdict == "pays" and fused.memory_ratio > 3.0, (fused.memory_ratio, fused.memory_verdict)


def test_m_preset_shows_the_memory_point_at_its_larger_size() -> None:
    """At 4,096 tokens of a 32,000 vocabulary the fused variant's modeled peak is over 4× smaller; every case
    of S and M passes the family's own checks (L's may not fit a smaller machine, and is refused with the reason)."""
    for preset in ("S", "M"):
        for case in LCE.cases(LCE.presets[preset]):
            LCE.check(case)
    big = max(LCE.cases(LCE.presets["M"]), key=lambda c: c["tokens"])
    lg = LCE.ledger(big, "float32")
    assert big["vocab"] >= 32000 and lg["unfused"].peak_bytes > 4 * lg["fused"].peak_bytes
