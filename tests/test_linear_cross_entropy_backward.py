"""linear_cross_entropy's backward and train phases: dhidden and dweight against finite differences, the Numba CPU
chunked (fused) and all-token (unfused) backward on ragged chunks, an odd hidden size, vocabularies of 1001 and
3 and ignored rows; float16 refused as the forward refuses it; torch autograd; the ledger against a hand count;
the tokens × vocab bytes that the fused variant neither saves nor holds.

The seeds are chosen so that every case has ignored targets: seed 1 row 2 of the 4 × 5 case, seed 0 row 1 of
the 9-token one, seed 3 rows 2 and 3 of the 7-token one."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.cross_entropy import IGNORE_INDEX
from suite.core import phases, registry
from suite.core import scenario as scenarios
from suite.core.registry import Unsupported
from tests.training_support import assert_close, finite_differences, run_phase

registry.discover()
FAMILY = "linear_cross_entropy"
WIDE = ({"tokens": 9, "hidden": 33, "vocab": 1001, "chunk": 4, "tile": 256}, 0)
NARROW = ({"tokens": 7, "hidden": 16, "vocab": 3, "chunk": 4, "tile": 32}, 3)
ONE_EACH = ({"tokens": 5, "hidden": 64, "vocab": 100, "chunk": 2, "tile": 32}, 0)
"""Chunks of 2, 2 and 1 tokens: the last chunk a single row."""
TINY = ({"tokens": 4, "hidden": 3, "vocab": 5, "chunk": 2, "tile": 32}, 1)


def test_reference_agrees_with_finite_differences() -> None:
    params, seed = TINY
    view = phases.phased(scenarios.get(FAMILY), phases.BACKWARD)
    assert (view.make_inputs(params, "float32", np.random.default_rng(seed))["targets"] == IGNORE_INDEX).any()
    errors = finite_differences(FAMILY, params, seed=seed)
    assert set(errors) == {"dhidden", "dweight"} and max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("variant", ["fused", "unfused"])
def test_numba_cpu_backward_and_train(variant: str) -> None:
    for params, seed in (WIDE, NARROW, ONE_EACH):
        for phase in (phases.BACKWARD, phases.TRAIN):
            out, ref, tol, _ = run_phase(FAMILY, "numba", variant, "cpu", phase, params, "float32", seed)
            assert_close(out, ref, tol)
    with pytest.raises(Unsupported, match="half-precision BLAS"):
        run_phase(FAMILY, "numba", variant, "cpu", phases.TRAIN, NARROW[0], "float16")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_torch_eager_backward_and_train(dtype: str) -> None:
    params, seed = WIDE
    for phase in (phases.BACKWARD, phases.TRAIN):
        out, ref, tol, launch = run_phase(FAMILY, "torch", "eager", "cpu", phase, params, dtype, seed)
        assert_close(out, ref, tol)
        model = scenarios.get(FAMILY).training.saved(scenarios.get(FAMILY), params, dtype)["eager"]
        assert sum(launch.saves.values()) == sum(model.values()), (launch.saves, model)


def test_torch_compiled_on_a_tiny_case() -> None:
    params, seed = TINY
    for phase in (phases.BACKWARD, phases.TRAIN):
        out, ref, tol, launch = run_phase(FAMILY, "torch", "compiled", "cpu", phase, params, "float32", seed)
        assert_close(out, ref, tol)
        assert params["tokens"] * params["vocab"] * 4 in launch.saves.values()  # the logits it saved


def test_backward_ledger_matches_a_hand_count() -> None:
    t, h, v, c, s = 5, 3, 7, 2, 4
    params = {"tokens": t, "hidden": h, "vocab": v, "chunk": c, "tile": 32}
    lg = phases.phased(scenarios.get(FAMILY), phases.BACKWARD).ledger(params, "float32")
    n, hv, th = t * v, h * v, t * h
    unfused = [(k.bytes_read, k.bytes_written) for k in lg["unfused"].kernels]
    assert unfused == [
        (n * s + t * 8 + s, n * s),  # g from logp, the targets, dy
        ((n + hv) * s, th * s),  # dhidden = g · Wᵀ
        ((th + n) * s, hv * s),  # dweight = hiddenᵀ · g
    ]
    fused = lg["fused"]
    # chunks of 2, 2, 1: logits GEMM, g in place, two GEMMs; the second and third add their dweight term
    assert fused.launches == 3 * 4 + 2
    # per chunk of m tokens, read: hidden rows and W; the logits, targets, lse and dy; g and W; hidden rows and g
    read = [(m * h + hv) * s + (m * v * s + m * 12 + s) + (m * v + hv) * s + (m * h + m * v) * s for m in (2, 2, 1)]
    written = [m * v * s + m * v * s + m * h * s + hv * s for m in (2, 2, 1)]  # logits, g, dhidden rows, dweight
    assert fused.bytes_read == sum(read) + 2 * hv * (s + 4)  # each add reads dweight and the float32 scratch
    assert fused.bytes_written == sum(written) + 2 * hv * s
    held = 2 * (th + hv) * s + t * 8 + s  # hidden, W, dhidden, dweight, targets, dy
    assert lg["unfused"].peak_bytes == held + 2 * n * s  # logp saved, g
    assert fused.peak_bytes == held + t * 4 + c * v * s + hv * 4  # lse, a chunk of g, the dweight scratch

    train = phases.phased(scenarios.get(FAMILY), phases.TRAIN).ledger(params, "float32")
    assert train["unfused"].launches == 4 + 3  # GEMM, log-softmax, gather, mean; then the backward's three
    assert train["unfused"].peak_bytes == held + 2 * n * s  # logp kept, g beside it
    step = train["fused"]
    # per chunk: the logits GEMM, the row kernel (loss, lse), then g, dhidden's GEMM, dweight's; two adds; the mean
    assert step.launches == 3 * 5 + 2 + 1
    assert sum(k.name.startswith("logits = hidden") for k in step.kernels) == 3  # no chunk's logits twice
    rows = [(m * h + hv) * s + (m * v * s + m * 8) for m in (2, 2, 1)]  # GEMM: hidden rows, W; rows: logits, targets
    grads = [(m * v * s + m * 12 + s) + (m * v + hv) * s + (m * h + m * v) * s for m in (2, 2, 1)]
    assert step.bytes_read == sum(rows) + sum(grads) + 2 * hv * (s + 4) + t * (4 + 8)  # the mean: losses, targets
    # logits, loss and lse; g, dhidden rows, dweight's term; the adds; y
    written = [m * v * s + m * 8 + m * v * s + m * h * s + hv * s for m in (2, 2, 1)]
    assert step.bytes_written == sum(written) + 2 * hv * s + s
    assert step.peak_bytes == held + s + t * (4 + 4) + c * v * s + hv * 4  # y, losses, lse, a chunk, the scratch


def test_fused_saves_nothing_of_vocabulary_size() -> None:
    params, seed = WIDE
    _, _, _, fused = run_phase(FAMILY, "numba", "fused", "cpu", phases.BACKWARD, params, "float32", seed)
    _, _, _, unfused = run_phase(FAMILY, "numba", "unfused", "cpu", phases.BACKWARD, params, "float32", seed)
    t, h, v = params["tokens"], params["hidden"], params["vocab"]
    inputs = {"hidden": t * h * 4, "weight": h * v * 4, "targets": t * 8}
    assert dict(fused.saves) == {**inputs, "logsumexp": t * 4}
    assert dict(unfused.saves) == {**inputs, "logp": t * v * 4}
    assert sum(unfused.saves.values()) - sum(fused.saves.values()) == t * v * 4 - t * 4
    model = scenarios.get(FAMILY).training.saved(scenarios.get(FAMILY), params, "float32")
    assert model["fused"] == dict(fused.saves) and model["unfused"] == dict(unfused.saves)


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_liger_ledger_matches_a_hand_count(dtype: str, s: int) -> None:
    """Liger keeps both gradients (its forward computes them); its row copies them into the suite's, then Liger
    checks dy against 1 and scales each in place by dy, a float32 scalar."""
    t, h, v = 5, 3, 7
    params = {"tokens": t, "hidden": h, "vocab": v, "chunk": 2, "tile": 32}
    th, hv = t * h * s, h * v * s
    scn = scenarios.get(FAMILY)
    assert scn.training.saved(scn, params, dtype)["liger/library"] == {"dhidden": th, "dweight": hv}
    lg = phases.phased(scn, phases.BACKWARD).ledger(params, dtype)["liger/library"]
    assert [(k.bytes_read, k.bytes_written, k.flops) for k in lg.kernels] == [
        (th, th, 0),  # copy of the saved dhidden
        (hv, hv, 0),  # copy of the saved dweight
        (8, 1, 1),  # torch.equal(dy, 1)
        (th + 4, th, t * h),  # dhidden ·= dy
        (hv + 4, hv, h * v),  # dweight ·= dy
    ]
    held = 2 * (th + hv) + t * 8 + s  # hidden, W, dhidden, dweight, targets, dy
    assert lg.peak_bytes == held + th + hv  # and Liger's saved gradients
    train = phases.phased(scn, phases.TRAIN).ledger(params, dtype)["liger/library"]
    forward = scn.ledger(params, dtype)["library"]  # Liger's forward row, at its own chunk of 2: 2, 2, 1 tokens
    extra = [k for k in train.kernels if k.name not in {f.name for f in forward.kernels}]
    # its zeroed dweight; per chunk the gradient written over the logits, dhidden's GEMM and dweight's (in place
    # below float32, a product and its add at float32); the loss copied into y; the check and the two scalings
    per_chunk = 3 if s == 2 else 4
    assert len(extra) == 1 + 3 * per_chunk + 1 + 3 and train.launches == forward.launches + 1 + 3 * (per_chunk - 1) + 4
    grads = [k for k in train.kernels if k.name.startswith("dhidden = g")]
    assert [(k.bytes_read, k.bytes_written) for k in grads] == [(m * v * s + hv, m * h * s) for m in (2, 2, 1)]
    written = train.bytes_written - forward.bytes_written
    products = 3 * hv if s == 2 else 6 * hv  # dweight written once a chunk; at float32 the product too
    assert written == hv + t * v * s + t * h * s + products + s + 1 + th + hv
    assert "copy" not in " ".join(k.name for k in train.kernels[-3:])  # no saved gradient copied in a step
