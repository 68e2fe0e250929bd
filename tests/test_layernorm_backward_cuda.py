"""layernorm's backward and train phases on the CUDA backends: Triton in its interpreter and Numba CUDA in its
simulator, fused and unfused, on awkward tiny shapes in float32 and float16, with what each forward saves.
CuPy's kernels only compile here: `tests/test_backward_resources.py` builds and compiles them."""

from __future__ import annotations

import pytest

from tests.normalization_backward_cuda_checks import BACKENDS, CASES, IDS, check_cuda, runs
from tests.training_support import assert_close, run_phase

FAMILY = "layernorm"


@pytest.mark.emulated
@pytest.mark.parametrize("backend", [pytest.param(b, marks=runs(b)) for b in BACKENDS])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize(("params", "dtype"), CASES, ids=IDS)
def test_cuda_backward_and_train(backend, variant, params, dtype):
    check_cuda(FAMILY, backend, variant, params, dtype)


@pytest.mark.emulated
@pytest.mark.parametrize("backend", [pytest.param("triton", marks=runs("triton"))])
def test_fused_blocks_past_the_last_row(backend):
    """1,031 rows make 128 blocks of ⌈1031/128⌉ = 9 rows (`partials`), 115 of them holding rows and 13 past the
    last: every row in exactly one block (blocks of 8 would drop the last 7 from dweight and dbias), and the blocks
    past the end adding nothing to the partials' sum. Three columns keep the interpreter quick."""
    out, ref, tol, launch = run_phase(FAMILY, backend, "fused", "cuda", "backward", {"rows": 1031, "cols": 3,
                                      "tile": 64}, "float32")  # fmt: skip
    assert launch.notes["partials"] == 128
    assert_close(out, ref, tol)
