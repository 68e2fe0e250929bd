"""The elementwise chain's backward and train phases on the CUDA backends: Triton (in its interpreter) and Numba CUDA
(in its simulator), fused and unfused, against the float64 reference, and what each variant's forward keeps.

CuPy's kernels only compile here; `tests/test_backward_resources.py` builds and compiles them. The simulator runs
every thread in Python, so the shapes are tiny: an odd n below one block, n = 1, and the chains the CPU test uses —
every op once (several stages: the CPU's strips), one stage of cheap ops and tanh, and a chain of constant
derivatives only, whose kernels do not read x.
"""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.elementwise_chain import OPS
from scenarios.elementwise_chain.backward import gradient
from suite.core import phases
from suite.core import scenario as scenarios
from suite.core.numerics import rel_err
from tests.training_support import assert_close, run_phase

FAMILY = "elementwise_chain"
CHAIN = ["square", "relu", "gelu", "tanh", "scale", "silu", "shift", "sigmoid"]
"""Every op once, in an order of its own."""
SHORT = ["shift", "square", "relu", "scale", "tanh"]
CONSTANT = ["scale", "shift", "scale"]
"""Derivatives that are constants: the fused kernel reads dy alone."""
assert sorted(CHAIN) == sorted(OPS)

CASES = [
    (CHAIN, 67, "float32"),
    (CHAIN, 1, "float32"),
    (SHORT, 45, "float32"),
    (CONSTANT, 37, "float32"),
    (CHAIN, 67, "float16"),
]


def _own_error(params: dict, dtype: str, phase: str) -> float:
    """The error of the unfused backward that saves each op's input, emulated in `dtype`: what these kernels
    compute (fused in float32 registers, unfused through `dtype` storage), tighter than the family's tolerance."""
    scn = phases.phased(scenarios.get(FAMILY), phase)
    inputs = scn.make_inputs(params, dtype, np.random.default_rng(0))
    ref = gradient(inputs["x"], inputs["dy"], params["ops"])
    return rel_err(gradient(inputs["x"], inputs["dy"], params["ops"], dtype), ref)


@pytest.mark.emulated
@pytest.mark.parametrize("phase", ["backward", "train"])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", ["triton"])
@pytest.mark.parametrize(("ops", "n", "dtype"), CASES, ids=lambda c: "+".join(c) if isinstance(c, list) else str(c))
def test_cuda_backward_matches_reference(backend: str, variant: str, phase: str, ops: list, n: int, dtype: str) -> None:
    params = {"n": n, "ops": ops}
    out, ref, tol, launch = run_phase(FAMILY, backend, variant, "cuda", phase, params, dtype)
    assert_close(out, ref, tol)
    floor = scenarios.get(FAMILY).limits.clip(dtype, 0.0)
    assert rel_err(out["dx"], ref["dx"]) <= max(4 * _own_error(params, dtype, phase), floor)
    assert all(a.dtype == np.dtype(dtype) for a in out.values())
    assert launch.saves == phases.phased(scenarios.get(FAMILY), phase).saved(params, dtype)[variant]
