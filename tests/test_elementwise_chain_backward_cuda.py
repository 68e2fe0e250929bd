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
@pytest.mark.parametrize("backend", ["triton", "numba"])
@pytest.mark.parametrize(("ops", "n", "dtype"), CASES, ids=lambda c: "+".join(c) if isinstance(c, list) else str(c))
def test_cuda_backward_matches_reference(backend: str, variant: str, phase: str, ops: list, n: int, dtype: str) -> None:
    params = {"n": n, "ops": ops}
    out, ref, tol, launch = run_phase(FAMILY, backend, variant, "cuda", phase, params, dtype)
    assert_close(out, ref, tol)
    floor = scenarios.get(FAMILY).limits.clip(dtype, 0.0)
    assert rel_err(out["dx"], ref["dx"]) <= max(4 * _own_error(params, dtype, phase), floor)
    assert all(a.dtype == np.dtype(dtype) for a in out.values())
    assert launch.saves == phases.phased(scenarios.get(FAMILY), phase).saved(params, dtype)[variant]


@pytest.mark.emulated
@pytest.mark.parametrize("backend", ["triton", "numba"])
def test_relu_at_its_kink_is_torchs(backend: str) -> None:
    """relu's derivative at 0 (and -0) is torch's threshold_backward's 0, and a NaN input passes the gradient."""
    v = np.array([0.0, -0.0, 1.0, -1.0, np.nan], np.float32)
    g = np.full(5, 0.75, np.float32)
    if backend == "triton":
        import torch

        from backends.triton.elementwise_chain_backward import _grad_kernel
        from backends.triton.ops import codes

        dx_t = torch.empty(5)
        _grad_kernel[(1,)](torch.tensor(v), torch.tensor(g), dx_t, 5, CHAIN=codes(["relu"]), READS_X=True, BLOCK=16)
        dx = dx_t.numpy()
    else:
        from numba import cuda

        from backends.numba.on_cuda.elementwise_chain_backward import _grad_kernel

        out = cuda.to_device(np.full(5, np.nan, np.float32))
        _grad_kernel(("relu",))[1, 32](cuda.to_device(v), cuda.to_device(g), out)
        dx = out.copy_to_host()
    np.testing.assert_array_equal(dx, np.array([0.0, 0.0, 0.75, 0.0, 0.75], np.float32))


def test_constant_derivatives_do_not_read_x() -> None:
    """The ledger's fused kernel of scale and shift reads dy alone, as does each such op's unfused kernel: the
    generated CuPy and Numba CUDA sources do not load x for them, and do for a chain with any other op."""
    from backends.cupy.elementwise_chain_backward import grad_body
    from backends.numba.on_cuda.elementwise_chain_backward import _lines

    for ops in (("scale",), ("shift",), tuple(CONSTANT)):
        assert "x + i" not in grad_body(ops) and "(x[i])" not in "\n".join(_lines(ops)), ops
    for ops in (("relu",), ("scale", "tanh")):
        assert "load(x + i)" in grad_body(ops) and "(x[i])" in "\n".join(_lines(ops)), ops
