"""layernorm's backward and train phases: the closed-form reference against finite differences, Numba CPU fused
and unfused on awkward shapes in float32 and float16, torch autograd's rivals, the backward ledger against a
hand count, and what each variant's forward saves."""

from __future__ import annotations

import pytest

from suite.core.phases import phased
from suite.core.scenario import get
from tests.normalization_backward_checks import (
    SHAPES,
    beyond_inputs,
    check_numba,
    check_torch,
    modelled_saves,
    rows_of,
)
from tests.training_support import finite_differences

FAMILY = "layernorm"


def test_reference_matches_finite_differences():
    errors = finite_differences(FAMILY, {"rows": 3, "cols": 5, "tile": 32})
    assert set(errors) == {"dx", "dweight", "dbias"}
    assert all(e < 1e-6 for e in errors.values()), errors


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("params", SHAPES, ids=lambda p: f"{p['rows']}x{p['cols']}t{p['tile']}")
def test_numba_backward_and_train(params, variant, dtype):
    saves = check_numba(FAMILY, variant, "backward", params, dtype)
    assert saves == modelled_saves(FAMILY, variant, params, dtype)
    check_numba(FAMILY, variant, "train", params, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("variant", ["eager", "library"])
def test_torch_autograd(variant, dtype):
    for phase in ("backward", "train"):
        check_torch(FAMILY, variant, phase, {"rows": 7, "cols": 193, "tile": 256}, dtype)


def test_torch_compiled_tiny():
    check_torch(FAMILY, "compiled", "backward", {"rows": 3, "cols": 5, "tile": 32}, "float32")


def test_backward_ledger_hand_count():
    """40 × 193 halves (N = 7,720, s = 2), tile 64 < 193: the fused row pass re-reads x and dy; 40 rows make
    5 blocks of 8, so 5 float32 partial rows of 193 for dweight and for dbias."""
    params = {"rows": 40, "cols": 193, "tile": 64}
    ledgers = phased(get(FAMILY), "backward").ledger(params, "float16")
    matrix, vector, stat, partial = 7720 * 2, 193 * 2, 40 * 4, 5 * 193 * 4
    row_pass_read = 2 * matrix + vector + 2 * stat + 2 * matrix  # x, dy, weight, mean, rstd; x and dy again
    row_pass_written = matrix + 2 * partial  # dx, the partials of dweight and dbias
    assert rows_of(ledgers["fused"]) == (row_pass_read + 2 * partial, row_pass_written + 2 * vector, 2)
    unfused_read = (
        matrix  # dbias = Σ dy
        + 2 * matrix  # dweight = Σ dy·x̂
        + matrix + vector  # dx̂ = dy·weight
        + matrix  # m1 = mean(dx̂)
        + 2 * matrix  # m2 = mean(dx̂·x̂)
        + 2 * matrix + 3 * stat  # dx from dx̂, x̂, var, m1, m2
    )  # fmt: skip
    unfused_written = vector + vector + matrix + stat + stat + matrix
    assert rows_of(ledgers["unfused"]) == (unfused_read, unfused_written, 6)
    assert ledgers["fused"].kernels[0].reread_bytes == 2 * matrix
    assert {i.name for i in ledgers["fused"].removed} == {"dxhat", "m1", "m2"}
    assert ledgers["fused"].peak_bytes < ledgers["unfused"].peak_bytes
    train = phased(get(FAMILY), "train").ledger(params, "float16")
    forward = get(FAMILY).ledger(params, "float16")
    extra = train["fused"].bytes_written - forward["fused"].bytes_written - ledgers["fused"].bytes_written
    assert extra == 2 * stat  # the fused forward's mean and rstd
    assert train["unfused"].bytes_written == forward["unfused"].bytes_written + unfused_written


def test_fused_saves_statistics_where_unfused_saves_xhat():
    """Fused recomputes x̂: beyond x and weight (inputs, held by the layer before anyway) it keeps two float32
    numbers a row; unfused keeps the x̂ matrix and the variance. Counting x, fused keeps 4·rows bytes more."""
    params, dtype = {"rows": 33, "cols": 781, "tile": 1024}, "float16"
    fused = check_numba(FAMILY, "fused", "backward", params, dtype)
    unfused = check_numba(FAMILY, "unfused", "backward", params, dtype)
    assert beyond_inputs(FAMILY, fused) == 2 * 33 * 4
    assert beyond_inputs(FAMILY, unfused) == 33 * 781 * 2 + 33 * 4
    assert sum(fused.values()) - sum(unfused.values()) == 33 * 4
