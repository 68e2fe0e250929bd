"""Checks the backward tests of layernorm, rmsnorm and softmax share: Numba CPU numerics on awkward shapes, the
torch autograd rivals (numerics, and what they save against the scenario's model), a variant's `Launch.saves`
against that model. Each family's test module parametrizes them and writes its own hand-counted ledger.
"""

from __future__ import annotations

import numpy as np

from suite.core import dtypes
from suite.core.phases import phased
from suite.core.scenario import get
from tests.training_support import assert_close, judged, run_phase

SHAPES = (
    {"rows": 7, "cols": 193, "tile": 64},  # odd rows; cols past the tile (the re-read path), not a vector multiple
    {"rows": 33, "cols": 781, "tile": 1024},  # odd rows, half of them +80; one row fits the tile, 781 is ragged
    {"rows": 1, "cols": 1, "tile": 64},  # one column: x̂ = 0 (layernorm), 1 − x̂² cancels (rmsnorm), y = 1
    {"rows": 34, "cols": 96, "tile": 128},  # fused blocks of 7 rows and one of 6: an odd and an even pipeline
)
HALF_HOLD = 5e-3
"""Fused kernels recompute x̂ in float32 (or read y once): in half precision their every gradient stays within
a few units of a half's last place, far inside the backward's tolerance, which must admit the unfused
decomposition's stored halves (`scenarios.normalization.backward.LIMITS`)."""


def check_numba(family: str, variant: str, phase: str, params: dict, dtype: str) -> dict:
    """One numba/cpu launch into NaN-poisoned outputs, judged output by output; returns the launch's saves."""
    out, ref, tol, launch = run_phase(family, "numba", variant, "cpu", phase, params, dtype)
    assert_close(out, ref, tol)
    if variant == "fused" and dtypes.eps(dtype) > 1e-4:
        errors = {name: err for name, (err, _, _) in judged(out, ref, tol).items()}
        assert max(errors.values()) <= HALF_HOLD, errors
    return dict(launch.saves)


def modelled_saves(family: str, variant: str, params: dict, dtype: str) -> dict[str, int]:
    return phased(get(family), "backward").saved(params, dtype)[variant]


def check_torch(family: str, variant: str, phase: str, params: dict, dtype: str) -> None:
    """torch autograd through the decomposition (eager, compiled) or torch's op (library): the bytes autograd
    saved against the scenario's model of them (the same sizes, whatever their names), and in float32 the
    gradients. In half precision torch is not held to the tolerance here: on the CPU layer_norm saves its mean
    and rstd as halves (x − mean of rows near 80 then loses dweight and dbias entirely), and eager autograd of
    softmax's decomposition carries its gradients as halves through dy − Σdy·y; the suite reports both."""
    out, ref, tol, launch = run_phase(family, "torch", variant, "cpu", phase, params, dtype)
    if dtype == "float32":
        assert_close(out, ref, tol)
    model = modelled_saves(family, variant, params, dtype)
    assert sorted(launch.saves.values()) == sorted(model.values()), (launch.saves, model)


def beyond_inputs(family: str, saves: dict[str, int]) -> int:
    """Bytes a forward saves beyond the inputs it keeps alive (which the layer before holds anyway)."""
    return sum(b for name, b in saves.items() if name not in get(family).inputs)


def rows_of(ledger) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    return ledger.bytes_read, ledger.bytes_written, ledger.launches


def finite(errors: dict[str, float]) -> bool:
    return all(np.isfinite(e) and e < 1e-6 for e in errors.values())
