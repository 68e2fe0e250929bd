"""Checks the CUDA backward tests of layernorm, rmsnorm and softmax share: a Triton (interpreter) or Numba CUDA
(simulator) launch of a variant's backward or train entry into NaN-poisoned outputs, judged against the float64
reference, and its `Launch.saves` against the scenario's model. Shapes are tiny: both emulators are slow.
"""

from __future__ import annotations

import pytest

from suite.core import dtypes, registry, targets
from tests.normalization_backward_checks import HALF_HOLD, modelled_saves
from tests.training_support import assert_close, judged, run_phase

SHAPES = (
    {"rows": 7, "cols": 193, "tile": 64},  # one block of rows; cols past the tile (the re-read), a last chunk of one
    {"rows": 11, "cols": 37, "tile": 64},  # two blocks of rows (6, 5) in one tile of 64, 37 ragged
    {"rows": 1, "cols": 1, "tile": 64},  # one column: x̂ = 0 (layernorm), 1 − x̂² cancels (rmsnorm), y = 1
)
"""float32 cases; float16 runs the first. tile 64 keeps the Numba CUDA blocks at one warp in the simulator."""
CASES = [(p, "float32") for p in SHAPES] + [(SHAPES[0], "float16")]
IDS = [f"{p['rows']}x{p['cols']}t{p['tile']}-{d}" for p, d in CASES]
BACKENDS = ("triton", "numba")

registry.discover()  # the backends, and with them their targets


def runs(backend: str) -> pytest.MarkDecorator:
    """Skip where the backend's CUDA target cannot run kernels (no interpreter, no simulator)."""
    target = targets.TARGETS.get((backend, "cuda"))
    avail = target.probe() if target else targets.Availability(targets.UNAVAILABLE, "no target")
    return pytest.mark.skipif(not avail.runs, reason=f"{backend}/cuda: {avail.reason}")


def check_cuda(family: str, backend: str, variant: str, params: dict, dtype: str) -> None:
    """The backward and the train entry, each judged output by output; the fused variant in half precision also
    within HALF_HOLD; the backward's saves equal to the model's."""
    for phase in ("backward", "train"):
        out, ref, tol, launch = run_phase(family, backend, variant, "cuda", phase, params, dtype)
        assert_close(out, ref, tol)
        if variant == "fused" and dtypes.eps(dtype) > 1e-4:
            errors = {name: err for name, (err, _, _) in judged(out, ref, tol).items()}
            assert max(errors.values()) <= HALF_HOLD, errors
        assert dict(launch.saves) == modelled_saves(family, variant, params, dtype), phase
