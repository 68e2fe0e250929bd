"""softmax's backward and train phases on the CUDA backends: Triton in its interpreter and Numba CUDA in its
simulator, fused and unfused, on awkward tiny shapes in float32 and float16, with what each forward saves.
CuPy's kernels only compile here: `tests/test_backward_resources.py` builds and compiles them."""

from __future__ import annotations

import pytest

from tests.normalization_backward_cuda_checks import BACKENDS, CASES, IDS, check_cuda, runs

FAMILY = "softmax"


@pytest.mark.emulated
@pytest.mark.parametrize("backend", [pytest.param(b, marks=runs(b)) for b in BACKENDS])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize(("params", "dtype"), CASES, ids=IDS)
def test_cuda_backward_and_train(backend, variant, params, dtype):
    check_cuda(FAMILY, backend, variant, params, dtype)
