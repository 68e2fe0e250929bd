"""The elementwise chain's backward and train phases: the float64 derivative reference against finite differences,
the Numba CPU fused and unfused passes and torch's autograd rivals against it, what each variant keeps, and the
backward ledger against a hand count.

Kernels compile once per (chain, dtype) whatever n is, so every Numba case runs one chain holding every op (in an
order of its own, several stages: the fused kernel's strips) and one chain of a single stage (one expression per
element), at an odd n and at n = 1.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backends.numba.on_cpu.elementwise_chain_backward_kernels import compiled_grad
from scenarios.elementwise_chain import OPS
from scenarios.elementwise_chain.backward import BACKWARD, compiled_saved, gradient
from suite.core import phases
from suite.core import scenario as scenarios
from suite.core.ledger import WRITE_ONCE
from suite.core.numerics import rel_err
from tests.training_support import assert_close, finite_differences, run_phase

FAMILY = "elementwise_chain"
CHAIN = ["square", "relu", "gelu", "tanh", "scale", "silu", "shift", "sigmoid"]
"""Every op once: four stages (a transcendental op starts each), so the fused backward runs in strips."""
SHORT = ["shift", "square", "relu", "scale", "tanh"]
"""One stage: the fused backward is one expression per element."""
assert sorted(CHAIN) == sorted(OPS)


@pytest.mark.parametrize("ops", [[op] for op in OPS] + [CHAIN, SHORT], ids=lambda ops: "+".join(ops))
def test_reference_matches_finite_differences(ops: list[str]) -> None:
    """Each op's closed-form derivative and their product along a chain (h = 1e-4: the loss sums every element, so
    a smaller step loses more to cancellation than the O(h²) it saves; no input lands on relu's kink)."""
    errors = finite_differences(FAMILY, {"n": 5, "ops": ops}, h=1e-4)
    assert errors["dx"] < 1e-6, errors


def _own_error(params: dict, dtype: str, phase: str) -> float:
    """The error of the unfused backward that saves each op's input, emulated in `dtype` on the run's inputs:
    the Numba kernels compute that decomposition, so they answer to it, tighter than the family's tolerance
    (which also admits torch's, saving tanh's output in `dtype`)."""
    scn = phases.phased(scenarios.get(FAMILY), phase)
    inputs = scn.make_inputs(params, dtype, np.random.default_rng(0))
    ref = gradient(inputs["x"], inputs["dy"], params["ops"])
    return rel_err(gradient(inputs["x"], inputs["dy"], params["ops"], dtype), ref)


@pytest.mark.parametrize("phase", ["backward", "train"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize(
    ("ops", "n"), [(CHAIN, 1001), (CHAIN, 1), (SHORT, 1001)], ids=["chain-1001", "chain-1", "short-1001"]
)
def test_numba_matches_reference(variant: str, dtype: str, phase: str, ops: list[str], n: int) -> None:
    params = {"n": n, "ops": ops}
    out, ref, tol, launch = run_phase(FAMILY, "numba", variant, "cpu", phase, params, dtype)
    assert_close(out, ref, tol)
    floor = scenarios.get(FAMILY).limits.clip(dtype, 0.0)
    assert rel_err(out["dx"], ref["dx"]) <= max(4 * _own_error(params, dtype, phase), floor)
    assert all(a.dtype == np.dtype(dtype) for a in out.values())
    scn = phases.phased(scenarios.get(FAMILY), phase)
    assert launch.saves == scn.saved(params, dtype)[variant]


@pytest.mark.parametrize("ops", [CHAIN, SHORT], ids=["chain", "short"])
def test_fused_equals_unfused_in_float32(ops: list[str]) -> None:
    """In float32 storing an intermediate or a gradient loses nothing, so the variants, differing only in fusion
    (and the fused chain's strips), agree bit for bit."""
    params = {"n": 1001, "ops": ops}
    fused, *_ = run_phase(FAMILY, "numba", "fused", "cpu", "backward", params, "float32")
    unfused, *_ = run_phase(FAMILY, "numba", "unfused", "cpu", "backward", params, "float32")
    np.testing.assert_array_equal(fused["dx"].view(np.uint32), unfused["dx"].view(np.uint32))


def test_relu_at_its_kink_is_torchs() -> None:
    """relu's derivative is undefined at 0: torch's threshold_backward gives 0 there (and lets a NaN input pass the
    gradient); the Numba kernel and the reference do the same."""
    v = np.array([0.0, -0.0, 1.0, -1.0, np.nan], np.float32)
    g = np.full(5, 0.75, np.float32)
    dx = np.empty_like(v)
    kernel, scratch = compiled_grad(("relu",), v, g, dx, "float32", "fast")
    kernel(v, g, dx, scratch)
    leaf = torch.tensor(v, requires_grad=True)
    (expected,) = torch.autograd.grad(torch.relu(leaf), [leaf], torch.tensor(g))
    np.testing.assert_array_equal(dx, expected.numpy())
    np.testing.assert_array_equal(BACKWARD["relu"](v.astype(np.float64), None, g.astype(np.float64)), expected.numpy())


@pytest.mark.parametrize("phase", ["backward", "train"])
def test_torch_eager_matches_reference(phase: str) -> None:
    params = {"n": 1001, "ops": CHAIN}
    out, ref, tol, launch = run_phase(FAMILY, "torch", "eager", "cpu", phase, params, "float32")
    assert_close(out, ref, tol)
    saved = phases.phased(scenarios.get(FAMILY), phase).saved(params, "float32")["eager"]
    assert sorted(saved) == ["t2", "t4", "t5", "x", "y"]  # relu's output, square's input (x), tanh's ...
    assert sum(launch.saves.values()) == sum(saved.values())


def test_torch_compiled_matches_reference() -> None:
    """One tiny case (Inductor compiles for seconds): the gradient, and what AOTAutograd kept — y for tanh's
    derivative and relu's mask, one byte an element, which its forward writes besides y — against the model."""
    params = {"n": 5, "ops": ["scale", "relu", "tanh"]}
    out, ref, tol, launch = run_phase(FAMILY, "torch", "compiled", "cpu", "backward", params, "float32")
    assert_close(out, ref, tol)
    assert compiled_saved(params["ops"], 5, 4) == {"mask": 5, "y": 20}
    assert sorted(launch.saves.values()) == [5, 20]
    train = phases.phased(scenarios.get(FAMILY), "train").ledger(params, "float32")["compiled"]
    assert train.kernels[0].bytes_written == 20 + 5  # y and the mask


def test_backward_ledger_by_hand() -> None:
    """n = 1001 halves (s = 2, ns = 2002 bytes), chain scale → relu → tanh (t1 = scale(x), t2 = relu(t1))."""
    params, ns = {"n": 1001, "ops": ["scale", "relu", "tanh"]}, 2002
    scn = phases.phased(scenarios.get(FAMILY), "backward")
    lg = scn.ledger(params, "float16")
    unfused, fused = lg["unfused"], lg["fused"]
    # unfused: dtanh reads t2 and dy, writes g2; drelu reads t1 and g2, writes g1; dscale reads g1 only, writes dx
    assert [k.name for k in unfused.kernels] == ["dtanh", "drelu", "dscale"]
    assert (unfused.bytes_read, unfused.bytes_written, unfused.launches) == (5 * ns, 3 * ns, 3)
    # held: x, t1, t2 (saved), dy, dx; while drelu runs g2 and g1 both live
    assert unfused.peak_bytes == 5 * ns + 2 * ns
    # fused: reads x and dy, writes dx; g1 and g2 never exist
    assert (fused.bytes_read, fused.bytes_written, fused.launches) == (2 * ns, ns, 1)
    assert fused.peak_bytes == 3 * ns
    assert fused.saved_bytes == 2 * (2 * ns)
    # the difference: g1, g2 written and read (saved_bytes), t1 and t2 read, x read by fused alone
    assert unfused.bytes_moved(WRITE_ONCE) - fused.bytes_moved(WRITE_ONCE) == fused.saved_bytes + 2 * ns - ns
    train = phases.phased(scenarios.get(FAMILY), "train").ledger(params, "float16")
    assert train["unfused"].launches == 6 and train["fused"].launches == 2
    assert train["unfused"].bytes_written == 3 * ns + 3 * ns  # forward: t1, t2, y; backward: g2, g1, dx


def test_fused_saves_less_than_unfused() -> None:
    """Fusion recomputes the intermediates instead of saving them: its forward keeps x alone."""
    params = {"n": 1001, "ops": SHORT}
    *_, fused = run_phase(FAMILY, "numba", "fused", "cpu", "backward", params, "float16")
    *_, unfused = run_phase(FAMILY, "numba", "unfused", "cpu", "backward", params, "float16")
    assert sum(fused.saves.values()) == 2002
    assert sum(unfused.saves.values()) == len(SHORT) * 2002 > sum(fused.saves.values())
