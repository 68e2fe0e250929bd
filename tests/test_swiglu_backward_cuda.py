"""swiglu's backward and train phases on the CUDA backends: Triton in its interpreter and Numba CUDA in its
simulator, fused (silu recomputed) and unfused (s read back), on odd tiny shapes, each keeping exactly what the
model says it keeps. CuPy's kernels are compiled for sm_90 by tests/test_backward_resources.py."""

from __future__ import annotations

import pytest

from scenarios.swiglu import SwiGLU
from suite.core.phases import BACKWARD, TRAIN
from tests.training_support import assert_close, run_phase

SCN = SwiGLU()
BACKENDS = ("triton", "numba")
SHAPES = ({"rows": 3, "cols": 37}, {"rows": 1, "cols": 1})
"""Odd rows, a width that is no multiple of any block, and one element."""


def _check(backend: str, variant: str, phase: str, params: dict, dtype: str) -> None:
    out, ref, tol, launch = run_phase("swiglu", backend, variant, "cuda", phase, params, dtype)
    assert_close(out, ref, tol)
    assert dict(launch.saves) == SCN.training.saved(SCN, params, dtype)[variant]


@pytest.mark.emulated
@pytest.mark.parametrize("phase", [BACKWARD, TRAIN])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_awkward_shapes(backend: str, variant: str, phase: str) -> None:
    for params in SHAPES:
        _check(backend, variant, phase, params, "float32")


@pytest.mark.emulated
@pytest.mark.parametrize("phase", [BACKWARD, TRAIN])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_float16(backend: str, variant: str, phase: str) -> None:
    _check(backend, variant, phase, {"rows": 5, "cols": 21}, "float16")
