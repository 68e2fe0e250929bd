"""Rope's backward and train phases on the CUDA backends: Triton in its interpreter and Numba CUDA in its
simulator, fused (one kernel) and unfused (the differentiated steps), on tiny shapes with both pairings, key heads
fewer than query heads, odd token counts and head_dim 64 and 128; each keeps only cos and sin, as the model says.
CuPy's kernels are compiled for sm_90 by tests/test_backward_resources.py."""

from __future__ import annotations

import pytest

from scenarios.rope import Rope
from suite.core.phases import BACKWARD, TRAIN
from tests.training_support import assert_close, run_phase

ROPE = Rope()
BACKENDS = ("triton", "numba")
CASES = (
    {"batch": 1, "seq_len": 3, "heads": 2, "kv_heads": 1, "head_dim": 64, "pairing": "half"},
    {"batch": 3, "seq_len": 1, "heads": 3, "kv_heads": 1, "head_dim": 128, "pairing": "interleaved"},
)
"""Odd token counts (3, 3), grouped-query heads (2:1, 3:1), head_dim 64 and 128, both pairings."""
HALF_CASE = {"batch": 1, "seq_len": 3, "heads": 2, "kv_heads": 1, "head_dim": 64, "pairing": "interleaved"}


def _check(backend: str, variant: str, phase: str, params: dict, dtype: str) -> None:
    out, ref, tol, launch = run_phase("rope", backend, variant, "cuda", phase, params, dtype, seed=3)
    assert_close(out, ref, tol)
    assert dict(launch.saves) == ROPE.training.saved(ROPE, params, dtype)[variant]


@pytest.mark.emulated
@pytest.mark.parametrize("phase", [BACKWARD, TRAIN])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_both_pairings(backend: str, variant: str, phase: str) -> None:
    for params in CASES:
        _check(backend, variant, phase, params, "float32")


@pytest.mark.emulated
@pytest.mark.parametrize("phase", [BACKWARD, TRAIN])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_float16(backend: str, variant: str, phase: str) -> None:
    _check(backend, variant, phase, HALF_CASE, "float16")
