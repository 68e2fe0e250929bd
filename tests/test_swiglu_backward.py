"""swiglu's backward and train phases: the closed-form gradients against central differences, the Numba CPU
kernels (fused recomputing silu, unfused reading the saved s) on awkward shapes, torch autograd's rivals, the
backward ledger against a hand count, and what each variant's forward keeps."""

from __future__ import annotations

import pytest

from scenarios.swiglu import SwiGLU
from suite.core.phases import BACKWARD, TRAIN, phased
from tests.training_support import assert_close, finite_differences, run_phase

SCN = SwiGLU()


def test_reference_matches_finite_differences() -> None:
    errors = finite_differences("swiglu", {"rows": 3, "cols": 5})
    assert set(errors) == {"da", "db"} and max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("phase", [BACKWARD, TRAIN])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
def test_numba_cpu_awkward_shapes(variant: str, phase: str, dtype: str) -> None:
    """Odd rows, widths no multiple of a vector, one element, and one element past a parallel chunk (16384)."""
    for rows, cols in ((7, 193), (3, 1), (33, 781), (1, 16385)):
        out, ref, tol, launch = run_phase("swiglu", "numba", variant, "cpu", phase, {"rows": rows, "cols": cols}, dtype)
        assert_close(out, ref, tol)
        assert dict(launch.saves) == SCN.training.saved(SCN, {"rows": rows, "cols": cols}, dtype)[variant]


def test_torch_eager_backward_and_train() -> None:
    params = {"rows": 7, "cols": 193}
    for phase in (BACKWARD, TRAIN):
        out, ref, tol, launch = run_phase("swiglu", "torch", "eager", "cpu", phase, params, "float32")
        assert_close(out, ref, tol)
        assert sum(launch.saves.values()) == sum(SCN.training.saved(SCN, params, "float32")["eager"].values())


def test_torch_compiled_on_one_tiny_case() -> None:
    """AOTAutograd keeps a and b only and recomputes silu, as the saved-bytes model says."""
    params = {"rows": 3, "cols": 5}
    for phase in (BACKWARD, TRAIN):
        out, ref, tol, launch = run_phase("swiglu", "torch", "compiled", "cpu", phase, params, "float32")
        assert_close(out, ref, tol)
        assert sum(launch.saves.values()) == sum(SCN.training.saved(SCN, params, "float32")["compiled"].values())


def test_backward_ledger_matches_hand_count() -> None:
    """3 × 5 float32: N = 15 elements of 4 bytes, 60 bytes a tensor."""
    params, t = {"rows": 3, "cols": 5}, 60
    lg = phased(SCN, BACKWARD).ledger(params, "float32")
    # unfused: db = dy·s (reads dy, s), ds = dy·b (reads dy, b), da = ds·silu′(a) (reads ds, a)
    assert [(k.bytes_read, k.bytes_written) for k in lg["unfused"].kernels] == [(2 * t, t)] * 3
    assert (lg["unfused"].launches, lg["unfused"].bytes_read, lg["unfused"].bytes_written) == (3, 6 * t, 3 * t)
    assert lg["unfused"].peak_bytes == 7 * t  # a, b, s, dy, da, db and ds
    # fused: reads a, b, dy; writes da, db
    assert (lg["fused"].launches, lg["fused"].bytes_read, lg["fused"].bytes_written) == (1, 3 * t, 2 * t)
    assert lg["fused"].peak_bytes == 5 * t and lg["fused"].saved_bytes == 2 * t  # ds never exists
    assert [k.flops for k in lg["unfused"].kernels] == [15, 15, 8 * 15] and lg["fused"].flops == 10 * 15
    train = phased(SCN, TRAIN).ledger(params, "float32")
    moved = {v: train[v].bytes_read + train[v].bytes_written for v in ("unfused", "fused")}
    assert moved == {"unfused": 14 * t, "fused": 8 * t}
    assert (train["unfused"].launches, train["fused"].launches) == (5, 2)
    assert set(lg) == {"fused", "unfused", "eager", "compiled", "liger/library"}


def test_liger_ledger_matches_hand_count() -> None:
    """3 × 5 float16: 30 bytes a tensor. Liger keeps a and b; its row copies them into da and db, where its one
    kernel reads dy, a and b and writes the gradients in place."""
    params, t = {"rows": 3, "cols": 5}, 30
    assert SCN.training.saved(SCN, params, "float16")["liger/library"] == {"a": t, "b": t}
    lg = phased(SCN, BACKWARD).ledger(params, "float16")["liger/library"]
    assert [(k.bytes_read, k.bytes_written) for k in lg.kernels] == [(t, t), (t, t), (3 * t, 2 * t)]
    assert lg.flops == 10 * 15 and lg.peak_bytes == 5 * t  # a, b, dy, da, db
    train = phased(SCN, TRAIN).ledger(params, "float16")["liger/library"]
    # Liger's forward (a, b in; y out), then the backward with its copies
    assert (train.launches, train.bytes_read + train.bytes_written) == (4, 3 * t + 4 * t + 5 * t)


def test_fused_saves_less_than_unfused() -> None:
    """Fused recomputes silu(a) from a instead of keeping s: it saves 2·N·s against 3·N·s."""
    params = {"rows": 7, "cols": 193}
    saves = {
        v: sum(run_phase("swiglu", "numba", v, "cpu", BACKWARD, params, "float16")[3].saves.values())
        for v in ("fused", "unfused")
    }
    assert saves == {"fused": 2 * 7 * 193 * 2, "unfused": 3 * 7 * 193 * 2}
