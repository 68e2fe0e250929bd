"""add_rmsnorm's backward and train phases on the CUDA backends, emulated: Triton in its interpreter and Numba CUDA
in its simulator, both variants, on tiny awkward shapes (odd rows, widths past the tile, one column, several row
blocks of dweight's partials, one with no rows), and what each variant's forward keeps against the model. CuPy's
kernels only compile here: `test_backward_resources` builds them."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.add_rmsnorm import AddRMSNorm
from scenarios.add_rmsnorm.backward import partial_rows
from suite.core.phases import BACKWARD, TRAIN
from tests.training_support import assert_close, run_phase

SCN = AddRMSNorm()
SHAPES = ((5, 75, 32), (3, 1, 64), (17, 45, 64))
"""(rows, cols, tile): rows wider than the tile (walked twice, the partial row added to in memory); one column;
17 rows in 2 blocks of 9 and 8, each row of one tile."""
HALF = (3, 67, 64)
EMPTY_BLOCK = (513, 3, 64)
"""32 blocks of 17 rows, the last with none: its partial row must still be zeroed (Triton only: the simulator
runs a thread per element and would take minutes; the fused kernel only, the unfused one's 513-row grids take
the interpreter long too)."""


def params(rows: int, cols: int, tile: int) -> dict:
    return {"rows": rows, "cols": cols, "tile": tile}


def check(backend: str, variant: str, phase: str, shape: tuple[int, int, int], dtype: str) -> None:
    p = params(*shape)
    out, ref, tol, launch = run_phase("add_rmsnorm", backend, variant, "cuda", phase, p, dtype)
    assert_close(out, ref, tol)
    assert np.array_equal(out["dx"], out["dresidual"])  # one gradient, written to both
    assert dict(launch.saves) == SCN.training.saved(SCN, p, dtype)[variant]


def test_shapes_cover_the_partials() -> None:
    assert [partial_rows(s[0]) for s in SHAPES] == [1, 1, 2]
    rows, blocks = EMPTY_BLOCK[0], partial_rows(EMPTY_BLOCK[0])
    assert (blocks - 1) * -(-rows // blocks) >= rows  # the last block starts past the last row


@pytest.mark.emulated
@pytest.mark.parametrize("phase", [BACKWARD, TRAIN])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", ["triton", "numba"])
def test_awkward_shapes(backend: str, variant: str, phase: str) -> None:
    for shape in SHAPES:
        check(backend, variant, phase, shape, "float32")
    check(backend, variant, phase, HALF, "float16")


@pytest.mark.emulated
def test_triton_fused_block_with_no_rows() -> None:
    check("triton", "fused", BACKWARD, EMPTY_BLOCK, "float32")
