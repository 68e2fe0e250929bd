"""cross_entropy's backward and train phases: the closed-form dlogits against finite differences, the Numba CPU
fused and unfused kernels on odd token counts, a vocabulary of 1001 (no vector width divides it) and of 3,
ignored rows and float16; the torch autograd rivals; the backward ledger against a hand count; what each saves.

Seed 0 draws ignored targets in every case here (rows 1 and 7 of 9, row 6 of 7, row 1 of 4), odd rows among
them (shifted by +100, so only a kernel that subtracts the row's max survives)."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.cross_entropy import IGNORE_INDEX
from suite.core import phases, registry
from suite.core import scenario as scenarios
from tests.training_support import assert_close, finite_differences, run_phase

registry.discover()
FAMILY = "cross_entropy"
WIDE = {"tokens": 9, "vocab": 1001, "tile": 256}
NARROW = {"tokens": 7, "vocab": 3, "tile": 32}
PAST_TILE = {"tokens": 5, "vocab": 4099, "tile": 4096}
"""One column past the tile: the online max and sum merge a chunk of one."""
TINY = {"tokens": 4, "vocab": 5, "tile": 32}


def test_reference_agrees_with_finite_differences() -> None:
    view = phases.phased(scenarios.get(FAMILY), phases.BACKWARD)
    inputs = view.make_inputs(TINY, "float32", np.random.default_rng(0))
    assert (inputs["targets"] == IGNORE_INDEX).any()
    assert not view.reference(inputs, TINY)["dlogits"][inputs["targets"] == IGNORE_INDEX].any()
    errors = finite_differences(FAMILY, TINY)
    assert set(errors) == {"dlogits"} and max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
def test_numba_cpu_backward_and_train(variant: str, dtype: str) -> None:
    for params in (WIDE, NARROW, PAST_TILE):
        for phase in (phases.BACKWARD, phases.TRAIN):
            out, ref, tol, _ = run_phase(FAMILY, "numba", variant, "cpu", phase, params, dtype)
            assert_close(out, ref, tol)


def test_fused_train_step_has_no_backward_launch() -> None:
    """In a training step the fused forward writes the gradient's own buffer; the backward phase copies it."""
    _, _, _, train = run_phase(FAMILY, "numba", "fused", "cpu", phases.TRAIN, NARROW, "float32")
    _, _, _, backward = run_phase(FAMILY, "numba", "fused", "cpu", phases.BACKWARD, NARROW, "float32")
    assert "written by the forward" in train.notes["dlogits"]
    assert "copied" in backward.notes["dlogits"]


@pytest.mark.parametrize("variant", ["eager", "library"])
def test_torch_autograd_backward_and_train(variant: str) -> None:
    for phase in (phases.BACKWARD, phases.TRAIN):
        for dtype in ("float32", "float16"):
            out, ref, tol, launch = run_phase(FAMILY, "torch", variant, "cpu", phase, WIDE, dtype)
            assert_close(out, ref, tol)
            model = scenarios.get(FAMILY).training.saved(scenarios.get(FAMILY), WIDE, dtype)[variant]
            assert sum(launch.saves.values()) == sum(model.values()), (launch.saves, model)


def test_torch_compiled_on_a_tiny_case() -> None:
    for phase in (phases.BACKWARD, phases.TRAIN):
        out, ref, tol, launch = run_phase(FAMILY, "torch", "compiled", "cpu", phase, TINY, "float32")
        assert_close(out, ref, tol)
        assert TINY["tokens"] * TINY["vocab"] * 4 in launch.saves.values()  # the logits, not a log-softmax


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_backward_ledger_matches_a_hand_count(dtype: str, s: int) -> None:
    t, v = 5, 7
    n, params = t * v, {"tokens": t, "vocab": v, "tile": 32}
    scn = phases.phased(scenarios.get(FAMILY), phases.BACKWARD)
    lg = scn.ledger(params, dtype)
    # unfused: one kernel reads logp, the targets and dy, writes dlogits; fused: a copy of the saved gradient.
    assert (lg["unfused"].bytes_read, lg["unfused"].bytes_written, lg["unfused"].launches) == (
        n * s + t * 8 + s,
        n * s,
        1,
    )
    assert (lg["fused"].bytes_read, lg["fused"].bytes_written, lg["fused"].launches) == (n * s, n * s, 1)
    # both hold logits, dlogits, targets, dy and one n·s tensor saved (logp; the gradient), + 8·t targets kept
    assert lg["fused"].peak_bytes == lg["unfused"].peak_bytes == 3 * n * s + t * 8 + s

    train = phases.phased(scenarios.get(FAMILY), phases.TRAIN).ledger(params, dtype)
    fused, unfused = train["fused"], train["unfused"]
    # fused step: rows (logits, targets, dy in; losses, dlogits out), mean; no backward kernel
    assert [(k.bytes_read, k.bytes_written) for k in fused.kernels] == [(n * s + t * 8 + s, t * 4 + n * s), (t * 12, s)]
    # unfused step: log-softmax, gather, mean, then the backward kernel
    assert [(k.bytes_read, k.bytes_written) for k in unfused.kernels] == [
        (n * s, n * s),
        (t * (8 + s), t * 4),
        (t * 12, s),
        (n * s + t * 8 + s, n * s),
    ]
    # logp written and read back, and the gather's reads (its losses the fused rows write too), never happen fused
    moved = unfused.bytes_read + unfused.bytes_written - fused.bytes_read - fused.bytes_written
    assert moved == 2 * n * s + t * (8 + s)
    assert unfused.peak_bytes - fused.peak_bytes == n * s - t * 4 - s  # no logp; the losses and y held
    for variant in ("eager", "library", "compiled"):
        assert lg[variant].launches >= 1 and train[variant].bytes_written >= n * s


def test_fused_saves_only_the_gradient() -> None:
    _, _, _, fused = run_phase(FAMILY, "numba", "fused", "cpu", phases.BACKWARD, WIDE, "float16")
    _, _, _, unfused = run_phase(FAMILY, "numba", "unfused", "cpu", phases.BACKWARD, WIDE, "float16")
    n = WIDE["tokens"] * WIDE["vocab"]
    assert dict(fused.saves) == {"dlogits": n * 2}
    assert dict(unfused.saves) == {"logp": n * 2, "targets": WIDE["tokens"] * 8}
    assert sum(fused.saves.values()) < sum(unfused.saves.values())
    model = scenarios.get(FAMILY).training.saved(scenarios.get(FAMILY), WIDE, "float16")
    assert model["fused"] == dict(fused.saves) and model["unfused"] == dict(unfused.saves)


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_liger_ledger_matches_a_hand_count(dtype: str, s: int) -> None:
    """Liger keeps the gradient alone (as fused) and its backward scales it by dy in place."""
    t, v = 5, 7
    n, params = t * v, {"tokens": t, "vocab": v, "tile": 32}
    scn = scenarios.get(FAMILY)
    assert scn.training.saved(scn, params, dtype)["liger/library"] == {"dlogits": n * s}
    lg = phases.phased(scn, phases.BACKWARD).ledger(params, dtype)["liger/library"]
    # the row's copy of the saved gradient into dlogits, then element_mul reading dlogits and dy, writing dlogits
    assert [(k.bytes_read, k.bytes_written, k.flops) for k in lg.kernels] == [(n * s, n * s, 0), (n * s + s, n * s, n)]
    assert lg.peak_bytes == 3 * n * s + t * 8 + s  # logits, dlogits, targets, dy and the saved gradient
    assert phases.modeled(phases.phased(scn, phases.BACKWARD).ledger(params, dtype), "torch", "library").launches == 2
    train = phases.phased(scn, phases.TRAIN).ledger(params, dtype)["liger/library"]
    # the step: the logits copied into dlogits, Liger's rows there (no dy read), the mean, then the scaling alone
    assert [(k.bytes_read, k.bytes_written) for k in train.kernels] == [
        (n * s, n * s),
        (n * s + t * 8, t * 4 + n * s),
        (t * 12, s),
        (n * s + s, n * s),
    ]
