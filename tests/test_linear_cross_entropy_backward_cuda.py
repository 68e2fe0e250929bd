"""linear_cross_entropy's backward and train phases on the CUDA backends that run here: Triton in the interpreter
and Numba CUDA in the simulator (CuPy only compiles without a GPU: `tests/test_backward_resources.py` builds its
kernels). Both variants, both phases: float32 on ragged chunks (Triton: 7 tokens in chunks of 3, 3, 1 and 5 in
chunks of 4, 1; Numba: 5 in chunks of 3, 2), vocabularies that are no multiple of the row tile nor of the GEMM
tile, odd hidden sizes; float16 on one case (chunks of 4, 2); every case with ignored targets (checked); what
each forward keeps against the model's `saved`. Shapes are tiny: the emulators are slow on GEMMs."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.cross_entropy import IGNORE_INDEX
from suite.core import phases, registry
from suite.core import scenario as scenarios
from tests.training_support import assert_close, run_phase

registry.discover()
FAMILY = "linear_cross_entropy"
RAGGED = ({"tokens": 7, "hidden": 5, "vocab": 37, "chunk": 3, "tile": 32}, 1)
NARROW = ({"tokens": 5, "hidden": 3, "vocab": 3, "chunk": 4, "tile": 32}, 3)
SHORT = ({"tokens": 5, "hidden": 5, "vocab": 37, "chunk": 3, "tile": 32}, 1)
"""The simulator's float32 case (it runs a block of 256 Python threads per GEMM tile and per row): chunks of 3
and 2, row 3 ignored."""
FLOAT32 = {"triton": (RAGGED, NARROW), "numba": (SHORT,)}
HALF = ({"tokens": 6, "hidden": 3, "vocab": 50, "chunk": 4, "tile": 32}, 7)
"""float16's case: chunks of 4 and 2. Its dweight sums few tokens, so float16 logp and g cost little relative
error here; on RAGGED the unfused steps' own error (emulated, 0.046) exceeds float16's clipped tolerance (0.03)."""


def _check(backend: str, variant: str, params: dict, seed: int, dtype: str) -> None:
    view = phases.phased(scenarios.get(FAMILY), phases.BACKWARD)
    assert (view.make_inputs(params, dtype, np.random.default_rng(seed))["targets"] == IGNORE_INDEX).any()
    model = view.training.saved(scenarios.get(FAMILY), params, dtype)[variant]
    for phase in (phases.BACKWARD, phases.TRAIN):
        out, ref, tol, launch = run_phase(FAMILY, backend, variant, "cuda", phase, params, dtype, seed)
        assert_close(out, ref, tol)
        assert dict(launch.saves) == model, (phase, launch.saves, model)


@pytest.mark.emulated
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", ["triton", "numba"])
def test_backward_and_train_float32(backend: str, variant: str) -> None:
    for params, seed in FLOAT32[backend]:
        _check(backend, variant, params, seed, "float32")


@pytest.mark.emulated
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", ["triton", "numba"])
def test_backward_and_train_float16(backend: str, variant: str) -> None:
    params, seed = HALF
    _check(backend, variant, params, seed, "float16")
