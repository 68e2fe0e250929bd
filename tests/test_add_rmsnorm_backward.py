"""add_rmsnorm's backward and train phases: the closed-form gradients against central differences, the Numba CPU
kernels (fused: one pass from h and rstd; unfused: five kernels from h, ms and ĥ) on awkward shapes, torch
autograd's rivals, the backward ledger against a hand count, and what each variant's forward keeps."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.add_rmsnorm import AddRMSNorm
from scenarios.add_rmsnorm.backward import partial_rows
from suite.core.phases import BACKWARD, TRAIN, phased
from tests.training_support import assert_close, finite_differences, run_phase

SCN = AddRMSNorm()
SHAPES = ((7, 193, 64), (3, 1, 64), (33, 781, 1024), (33, 781, 256), (513, 3, 64))
"""Odd rows and widths; rows wider than the tile (the forward's chunked path, the ledger's re-read); one column;
513 rows: 32 blocks of 17, the last with no rows (its partial row must still be zeroed)."""


def params(rows: int, cols: int, tile: int) -> dict:
    return {"rows": rows, "cols": cols, "tile": tile}


def saved_total(variant: str, p: dict, dtype: str) -> int:
    return sum(SCN.training.saved(SCN, p, dtype)[variant].values())


def test_reference_matches_finite_differences() -> None:
    errors = finite_differences("add_rmsnorm", params(3, 5, 64))
    assert set(errors) == {"dx", "dresidual", "dweight"} and max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("phase", [BACKWARD, TRAIN])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
def test_numba_cpu_awkward_shapes(variant: str, phase: str, dtype: str) -> None:
    for shape in SHAPES:
        p = params(*shape)
        out, ref, tol, launch = run_phase("add_rmsnorm", "numba", variant, "cpu", phase, p, dtype)
        assert_close(out, ref, tol)
        assert np.array_equal(out["dx"], out["dresidual"])  # one gradient, written to both
        assert dict(launch.saves) == SCN.training.saved(SCN, p, dtype)[variant]


@pytest.mark.parametrize("variant", ["eager", "library"])
def test_torch_autograd_backward_and_train(variant: str) -> None:
    p = params(7, 193, 64)
    for phase in (BACKWARD, TRAIN):
        out, ref, tol, launch = run_phase("add_rmsnorm", "torch", variant, "cpu", phase, p, "float32")
        assert_close(out, ref, tol)
        assert sum(launch.saves.values()) == saved_total(variant, p, "float32")


def test_torch_compiled_on_one_tiny_case() -> None:
    """AOTAutograd keeps h, the row statistic and γ: what the fused variant keeps."""
    p = params(3, 5, 64)
    for phase in (BACKWARD, TRAIN):
        out, ref, tol, launch = run_phase("add_rmsnorm", "torch", "compiled", "cpu", phase, p, "float32")
        assert_close(out, ref, tol)
        assert sum(launch.saves.values()) == saved_total("compiled", p, "float32") == saved_total("fused", p, "float32")


def test_backward_ledger_matches_hand_count() -> None:
    """3 × 5 float32, the row in one tile: a matrix 60 bytes, a row statistic 12, γ and dweight 20, one block
    of partials 20; dy holds two matrices."""
    p = params(3, 5, 64)
    assert partial_rows(3) == 1
    lg = phased(SCN, BACKWARD).ledger(p, "float32")
    unfused = [(k.bytes_read, k.bytes_written) for k in lg["unfused"].kernels]
    assert unfused == [
        (60 + 20, 60),  # dĥ = dy[1]·γ
        (60 + 60, 20),  # partials of dy[1]·ĥ
        (20, 20),  # partials summed into dweight
        (60 + 60 + 12, 12),  # dms from dĥ, h, ms
        (3 * 60 + 2 * 12, 2 * 60),  # dx = dresidual from dy[0], dĥ, h, ms, dms
    ]
    assert lg["unfused"].launches == 5 and lg["unfused"].peak_bytes == 412 + 60 + 20  # + dĥ, partials
    fused = [(k.bytes_read, k.bytes_written) for k in lg["fused"].kernels]
    assert fused == [(60 + 12 + 20 + 2 * 60, 2 * 60 + 20), (20, 20)]  # h, rstd, γ, dy -> dx, dresidual, partials
    assert lg["fused"].peak_bytes == 352 + 20  # dy, the gradients and what the forward kept, + partials
    assert sorted(i.name for i in lg["fused"].removed) == ["dhhat", "dms"]
    train = phased(SCN, TRAIN).ledger(p, "float32")
    # the fused forward reads x, residual, γ (140) and writes h, y and rstd (132)
    assert (train["fused"].bytes_read, train["fused"].bytes_written) == (140 + 232, 132 + 160)
    assert (train["unfused"].launches, train["fused"].launches) == (4 + 5, 1 + 2)
    wide = phased(SCN, BACKWARD).ledger(params(3, 200, 64), "float32")
    assert wide["fused"].kernels[0].bytes_read - wide["compiled"].kernels[0].bytes_read == 2 * 3 * 200 * 4


def test_fused_saves_less_than_unfused() -> None:
    """Fused keeps h, rstd and γ (92 bytes at 3 × 5 float32); unfused also keeps ĥ and ms in place of rstd."""
    p = params(3, 5, 64)
    saves = {v: sum(run_phase("add_rmsnorm", "numba", v, "cpu", BACKWARD, p, "float32")[3].saves.values())
             for v in ("fused", "unfused")}  # fmt: skip
    assert saves == {"fused": 60 + 12 + 20, "unfused": 2 * 60 + 12 + 20}


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_liger_ledger_matches_hand_count(dtype: str, s: int) -> None:
    """3 × 5: a matrix 15·s bytes, a row statistic 12, γ and dweight 5·s, Liger's partials 132 rows of 5 float32
    (one a program, a program an SM of an H100), 2640 bytes; dweight summed in float32 (20), then cast below it."""
    p, m, w, part = params(3, 5, 64), 15 * s, 5 * s, 132 * 5 * 4
    assert SCN.training.saved(SCN, p, dtype)["liger/library"] == {"h": m, "rstd": 12, "weight": w}
    lg = phased(SCN, BACKWARD).ledger(p, dtype)["liger/library"]
    cast = [(20, w)] if s != 4 else []
    # dy[1], dy[0], h, rstd, γ -> dx (dresidual is published, untimed) and the partials; their sum; the cast
    assert [(k.bytes_read, k.bytes_written) for k in lg.kernels] == [(3 * m + 12 + w, m + part), (part, 20), *cast]
    held = 4 * m + w + m + 12 + w  # dy, dx, dresidual, dweight; h, rstd, γ
    assert lg.peak_bytes == held + part + (20 if s != 4 else 0)
    assert phased(SCN, BACKWARD).ledger(p, dtype)["library"].launches == 3  # torch's: unchanged
    train = phased(SCN, TRAIN).ledger(p, dtype)["liger/library"]
    # Liger's forward reads x, residual, γ and writes h, y and rstd once, then its backward
    assert train.kernels[0].bytes_read == 2 * m + w and train.kernels[0].bytes_written == 2 * m + 12
    assert train.launches == 1 + len(lg.kernels)
