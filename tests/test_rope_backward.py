"""Rope's backward and train phases: the closed-form gradient against finite differences, the Numba CPU kernels
and torch's autograd rivals on the family's awkward shapes, the ledger against a hand count, torch's eager
backward against the kernels the ledger names, and what each variant keeps for the backward pass.

Rope is linear in q and k, so the gradient is dy rotated back by −θ and no variant saves more than cos and sin
(`scenarios.rope.backward`): fused and unfused keep the same bytes, which the saves test holds them to.
"""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.rope import Rope
from suite.core import phases
from tests.training_support import assert_close, finite_differences, run_phase

ROPE = Rope()
P = {"batch": 2, "seq_len": 3, "heads": 4, "kv_heads": 2, "head_dim": 8, "pairing": "half"}
NQ, NK, T = 2 * 3 * 4 * 8, 2 * 3 * 2 * 8, 3 * 4
"""Elements of q (96), of k (48) and of one table (12)."""
CASES = [
    {"batch": 1, "seq_len": 7, "heads": 4, "kv_heads": 1, "head_dim": 64, "pairing": "half"},
    {"batch": 3, "seq_len": 5, "heads": 3, "kv_heads": 1, "head_dim": 128, "pairing": "interleaved"},
]
"""Odd token counts (7, 15), grouped-query heads (4:1, 3:1), head_dim 64 and 128, both pairings."""


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_reference_matches_finite_differences(pairing: str) -> None:
    params = {"batch": 1, "seq_len": 3, "heads": 2, "kv_heads": 1, "head_dim": 6, "pairing": pairing}
    errors = finite_differences("rope", params)
    assert set(errors) == {"dq", "dk"} and max(errors.values()) < 1e-6, errors


def test_reference_is_the_inverse_rotation() -> None:
    """dq of an upstream gradient equal to the forward's output is q itself: the backward undoes the rotation."""
    for pairing in ("half", "interleaved"):
        params = P | {"pairing": pairing}
        inputs = ROPE.make_inputs(params, "float32", np.random.default_rng(5))
        y = ROPE.reference(inputs, params)
        grads = ROPE.training.reference(ROPE, inputs | {"dy": y}, params)
        assert np.allclose(grads["dq"], inputs["q"], rtol=0, atol=1e-5)
        assert np.allclose(grads["dk"], inputs["k"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", CASES, ids=["half-4:1-d64", "interleaved-3:1-d128"])
def test_numba_cpu_backward_and_train(case: dict, dtype: str) -> None:
    """Both variants in both phases within the scenario's tolerance; the fused kernel in half precision also
    within one rounding of every element's own value (it rounds once, the tolerance allows the unfused steps'
    three roundings)."""
    for variant in ("fused", "unfused"):
        for phase in (phases.BACKWARD, phases.TRAIN):
            out, ref, tol, _ = run_phase("rope", "numba", variant, "cpu", phase, case, dtype, seed=3)
            assert_close(out, ref, tol)
            assert set(out) == ({"dq", "dk"} if phase == phases.BACKWARD else {"y", "dq", "dk"})
            if variant == "fused" and dtype == "float16":
                for name in ("dq", "dk"):
                    got = out[name].astype(np.float64)
                    bound = np.abs(ref[name]) * 2.0**-11 + 2.0**-22  # |dy| <= 1
                    assert np.all(np.abs(got - ref[name]) <= bound), (phase, name)


def test_torch_eager_backward_and_train() -> None:
    case = CASES[1] | {"batch": 1}
    model = ROPE.training.saved(ROPE, case, "float16")["eager"]
    for phase in (phases.BACKWARD, phases.TRAIN):
        for dtype in ("float32", "float16"):
            out, ref, tol, launch = run_phase("rope", "torch", "eager", "cpu", phase, case, dtype)
            assert_close(out, ref, tol)
        assert sorted(launch.saves.values()) == sorted(model.values())  # the two tables, nothing else


def test_torch_compiled_train_on_a_tiny_case() -> None:
    case = {"batch": 1, "seq_len": 3, "heads": 2, "kv_heads": 1, "head_dim": 8, "pairing": "interleaved"}
    out, ref, tol, launch = run_phase("rope", "torch", "compiled", "cpu", phases.TRAIN, case, "float32")
    assert_close(out, ref, tol)
    model = ROPE.training.saved(ROPE, case, "float32")["compiled"]
    assert sorted(launch.saves.values()) == sorted(model.values())


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_backward_ledger_matches_a_hand_count(dtype: str, s: int) -> None:
    lg = phases.phased(ROPE, phases.BACKWARD).ledger(P, dtype)
    held = (2 * (NQ + NK) + 2 * T) * s  # dy, dq, dk, cos, sin
    fused = lg["fused"]
    assert (fused.bytes_read, fused.bytes_written, fused.launches) == ((NQ + NK + 2 * T) * s, (NQ + NK) * s, 1)
    assert fused.flops == lg["unfused"].flops == int(3.5 * (NQ + NK))
    assert fused.saved_bytes == 3 * 2 * (NQ + NK) * s and fused.peak_bytes == held  # u, v, w of q and of k
    hand = []
    for x, n in (("q", NQ), ("k", NK)):
        hand += [
            (f"dy·sin ({x})", (n + T) * s, n * s, n),
            (f"rotate back ({x})", n * s, n * s, n // 2),
            (f"dy·cos ({x})", (n + T) * s, n * s, n),
            (f"add ({x})", 2 * n * s, n * s, n),
        ]
    assert [(k.name, k.bytes_read, k.bytes_written, k.flops) for k in lg["unfused"].kernels] == hand
    assert lg["unfused"].launches == 8 and lg["unfused"].peak_bytes == held + 2 * NQ * s  # v with u, then with w
    eager = lg["eager"]  # 9 kernels a tensor: 1 + 1 + ½ + 0 + ½ + 2 + 0 + ½ + 2 = 7.5n and two tables read,
    # 1 + 1 + ½ + 1 + ½ + 1 + 1 + ½ + 1 = 7.5n written (mul, mul, neg, zeros, copy, add, zeros, copy, add_)
    assert eager.launches == 18 and eager.bytes_read == (7.5 * (NQ + NK) + 4 * T) * s
    assert eager.bytes_written == 7.5 * (NQ + NK) * s and eager.peak_bytes == held + 3.5 * NQ * s
    train = phases.phased(ROPE, phases.TRAIN).ledger(P, dtype)
    assert train["fused"].launches == 2 and train["unfused"].launches == 16
    assert train["fused"].bytes_read == 2 * (NQ + NK + 2 * T) * s  # forward and backward, each one pass
    assert train["eager"].launches == 11 + 18  # neg, cat, two products, add per tensor, a cat into y
    compiled = train["compiled"].kernels[0]  # one call: rotate(x) stored, then x, rotate(x), tables read into y
    assert (compiled.bytes_read, compiled.bytes_written) == ((3 * (NQ + NK) + 2 * T) * s, 2 * (NQ + NK) * s)
    assert train["compiled"].launches == 2 and train["compiled"].peak_bytes == held + (NQ + NK) * s


def test_eager_backward_runs_the_kernels_its_ledger_names() -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from backends.torch.rope_training import rope_forward

    aten = {"dy·sin": "mul", "dy·cos": "mul", "neg": "neg", "zeros": "zero_", "copy": "copy_", "add": "add"}
    aten["add_ (in place)"] = "add_"
    lg = phases.phased(ROPE, phases.BACKWARD).ledger(P, "float32")["eager"]
    expected = sorted(next(a for n, a in sorted(aten.items(), key=lambda i: -len(i[0])) if k.name.startswith(n))
                      for k in lg.kernels)  # fmt: skip
    for pairing in ("half", "interleaved"):
        q, k = torch.randn(2, 3, 4, 8, requires_grad=True), torch.randn(2, 3, 2, 8, requires_grad=True)
        y = rope_forward(q, k, torch.randn(3, 4), torch.randn(3, 4), params={"pairing": pairing})
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            torch.autograd.grad(y, [q, k], torch.randn_like(y))
        ran = sorted(e.name[6:] for e in prof.events() if e.name[6:] in set(aten.values()))
        assert ran == expected, pairing


def test_every_variant_keeps_only_the_tables() -> None:
    """Fused saves no less than unfused here: the backward of a rotation needs only the angle, so there is
    nothing to recompute; both keep cos and sin, as the model says."""
    case = CASES[0]
    model = ROPE.training.saved(ROPE, case, "float32")
    assert all(m == {"cos": 7 * 32 * 4, "sin": 7 * 32 * 4} for m in model.values())
    for variant in ("fused", "unfused"):
        *_, launch = run_phase("rope", "numba", variant, "cpu", phases.BACKWARD, case, "float32")
        assert dict(launch.saves) == model[variant]
