"""cross_entropy's backward and train phases on the CUDA backends: Triton in its interpreter and Numba CUDA in its
simulator, fused and unfused, against the float64 gradient; what each forward saves against the model; a fused
training step launching no backward kernel. (CuPy's kernels only compile here: `test_backward_resources`.)

Seed 0 draws ignored targets in each case (row 2 of 4, rows 1 and 3 of 5, row 2 of 3). The vocabularies are no
multiple of any block: 3 (within one chunk), 301 (a chunk of 256 and a ragged one; no multiple of a block of
threads, nor are its 1,204 elements of a copy block) and 37 (a block of 256 threads, most idle). Few tokens:
the simulator runs every thread of a block of 256 for each."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.cross_entropy import IGNORE_INDEX
from suite.core import kernelspec, phases
from suite.core import scenario as scenarios
from tests.training_support import assert_close, run_phase

pytestmark = pytest.mark.emulated

FAMILY = "cross_entropy"
RAGGED = {"tokens": 4, "vocab": 301, "tile": 256}
NARROW = {"tokens": 5, "vocab": 3, "tile": 32}
ODD = {"tokens": 3, "vocab": 37, "tile": 32}
"""Two chunks of 32 columns, the second of 5."""
SHAPES = {"float32": (RAGGED, NARROW, ODD), "float16": (RAGGED,)}
CASES = [(backend, variant, dtype) for backend in ("triton", "numba") for variant in ("fused", "unfused")
         for dtype in ("float32", "float16")]  # fmt: skip


def _saved_model(params: dict, dtype: str, variant: str) -> dict[str, int]:
    scn = scenarios.get(FAMILY)
    return scn.training.saved(scn, params, dtype)[variant]


def test_cases_hold_ignored_rows() -> None:
    view = phases.phased(scenarios.get(FAMILY), phases.BACKWARD)
    for params in (RAGGED, NARROW, ODD):
        targets = view.make_inputs(params, "float32", np.random.default_rng(0))["targets"]
        assert (targets == IGNORE_INDEX).any() and (targets != IGNORE_INDEX).any(), params


@pytest.mark.parametrize(("backend", "variant", "dtype"), CASES)
def test_backward_and_train(backend: str, variant: str, dtype: str) -> None:
    """Both phases on each shape, with the kernels the ledger counts (a backward entry records only its backward's);
    a fused training step's forward writes the gradient's own buffer (no backward launch), where the backward
    phase copies the gradient its forward saved."""
    for params in SHAPES[dtype]:
        for phase in (phases.BACKWARD, phases.TRAIN):
            with kernelspec.recording() as specs:
                out, ref, tol, launch = run_phase(FAMILY, backend, variant, "cuda", phase, params, dtype)
            assert_close(out, ref, tol)
            ledger = phases.phased(scenarios.get(FAMILY), phase).ledger(params, dtype)[variant]
            assert len(specs) == ledger.launches, (phase, [spec.name for spec in specs], ledger.launches)
            assert dict(launch.saves) == _saved_model(params, dtype, variant), (phase, launch.saves)
            if variant == "fused":
                how = "written by the forward" if phase == phases.TRAIN else "copied"
                assert how in launch.notes["dlogits"], launch.notes
