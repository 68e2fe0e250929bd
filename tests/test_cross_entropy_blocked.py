"""The blocked float64 references (scenarios/cross_entropy/blocked.py) against the whole-array loss: several blocks
of rows and of W's columns, rows shifted past float32's exp range, ignored tokens, targets on block edges."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.cross_entropy import blocked, mean_loss
from scenarios.cross_entropy.scenario import CrossEntropy
from scenarios.linear_cross_entropy.scenario import LinearCrossEntropy

SEED = 20261205


def whole_loss(logits: np.ndarray, targets: np.ndarray) -> float:
    x = logits.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return mean_loss(x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True)), targets)


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocked, "BLOCK_BYTES", 3000)  # a few rows or columns a block


def test_cross_entropy_reference_by_rows_is_the_whole_one(small_blocks: None) -> None:
    params = {"tokens": 37, "vocab": 101, "tile": 32}
    scn = CrossEntropy()
    inputs = scn.make_inputs(params, "float32", np.random.default_rng(SEED))
    assert len(list(blocked.spans(37, 101 * 8 * 3))) > 5
    want = whole_loss(inputs["logits"], inputs["targets"])
    assert scn.reference(inputs, params)[0] == pytest.approx(want, rel=1e-12)


def test_linear_cross_entropy_reference_by_columns_is_the_whole_one(small_blocks: None) -> None:
    params = {"tokens": 23, "hidden": 17, "vocab": 211, "chunk": 4, "tile": 32}
    scn = LinearCrossEntropy()
    inputs = scn.make_inputs(params, "float32", np.random.default_rng(SEED))
    inputs["targets"][1:4] = [0, 210, 3]  # the first and last columns, and one inside the first block
    inputs["hidden"][5] *= 40.0  # a row whose max moves across blocks
    assert len(list(blocked.spans(211, (23 + 17) * 8 * 2))) > 5
    logits = inputs["hidden"].astype(np.float64) @ inputs["weight"].astype(np.float64)
    ref = scn.reference(inputs, params)
    assert ref[0] == pytest.approx(whole_loss(logits, inputs["targets"]), rel=1e-12)
    assert 0 < scn.tolerance(inputs, params, "float16", ref) <= 3e-2
