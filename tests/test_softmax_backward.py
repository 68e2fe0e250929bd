"""softmax's backward and train phases: the closed-form reference (from y) against finite differences, Numba CPU
fused and unfused on awkward shapes in float32 and float16, torch autograd's rivals, the backward ledger
against a hand count, and what each variant's forward saves."""

from __future__ import annotations

import pytest

from suite.core.phases import phased
from suite.core.scenario import get
from tests.normalization_backward_checks import SHAPES, check_numba, check_torch, modelled_saves, rows_of
from tests.training_support import finite_differences, run_phase

FAMILY = "softmax"


def test_reference_matches_finite_differences():
    errors = finite_differences(FAMILY, {"rows": 3, "cols": 5, "tile": 32})
    assert set(errors) == {"dx"}
    assert errors["dx"] < 1e-6, errors


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
    """40 × 193 halves (N = 7,720, s = 2), tile 64 < 193: the fused row pass re-reads y and dy; no partials."""
    params = {"rows": 40, "cols": 193, "tile": 64}
    ledgers = phased(get(FAMILY), "backward").ledger(params, "float16")
    matrix, stat = 7720 * 2, 40 * 4
    assert rows_of(ledgers["fused"]) == (2 * matrix + 2 * matrix, matrix, 1)  # y, dy; y and dy again; dx
    unfused_read = 2 * matrix + matrix + 2 * matrix + stat  # p = dy·y; s = Σ p; dx from y, dy, s
    assert rows_of(ledgers["unfused"]) == (unfused_read, matrix + stat + matrix, 3)
    assert {i.name for i in ledgers["fused"].removed} == {"p", "s"}
    fits = phased(get(FAMILY), "backward").ledger({**params, "tile": 256}, "float16")
    assert rows_of(fits["fused"]) == (2 * matrix, matrix, 1)
    train = phased(get(FAMILY), "train").ledger(params, "float16")
    forward = get(FAMILY).ledger(params, "float16")
    assert train["fused"].bytes_written == forward["fused"].bytes_written + matrix  # y is what it keeps


def test_saves_y_where_autograd_of_the_decomposition_keeps_x_and_the_exponentials():
    """Fused and unfused both keep y alone (its backward needs nothing else); autograd of the decomposition
    keeps x, the exponentials, the row max and the sum's reciprocal: twice the bytes."""
    params, dtype = {"rows": 7, "cols": 193, "tile": 256}, "float32"
    fused = check_numba(FAMILY, "fused", "backward", params, dtype)
    unfused = check_numba(FAMILY, "unfused", "backward", params, dtype)
    assert fused == unfused == {"y": 7 * 193 * 4}
    eager = run_phase(FAMILY, "torch", "eager", "cpu", "backward", params, dtype)[3].saves
    assert sum(eager.values()) == 2 * 7 * 193 * 4 + 2 * 7 * 4
