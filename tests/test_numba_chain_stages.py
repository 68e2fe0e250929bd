"""The staged fused chain of the Numba CPU target: cut into stages of one transcendental op each, run strip by
strip, and bit for bit the values of the one-expression kernel it replaces, at every strip boundary."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit, prange

from backends.numba.on_cpu.elementwise_chain import STRIP, fused, stages
from backends.numba.op_tables import chain
from backends.numba.ops import VECTOR_CODECS
from scenarios.elementwise_chain import ALL8
from suite.core.registry import notes


@pytest.mark.parametrize(
    ("ops", "want"),
    [
        (ALL8, [ALL8[:5], ["sigmoid"], ["silu"], ["gelu"]]),
        (["scale", "gelu"], [["scale", "gelu"]]),
        (["relu"], [["relu"]]),
        (["gelu", "tanh", "scale"], [["gelu"], ["tanh", "scale"]]),
        (["scale", "shift"], [["scale", "shift"]]),
    ],
)
def test_stages_hold_one_transcendental_op_each(ops: list[str], want: list[list[str]]) -> None:
    got = stages(tuple(ops))
    assert [list(s) for s in got] == want
    assert [op for s in got for op in s] == ops


def _one_expression(ops: tuple[str, ...], dtype: str, math: str):  # type: ignore[no-untyped-def]
    """The chain as one expression per element: what the fused kernel computed before it was staged."""
    apply, (load, store) = chain(ops, math), VECTOR_CODECS[dtype]

    @njit(parallel=True)
    def run(x, out):  # type: ignore[no-untyped-def]
        for i in prange(x.size):
            out[i] = store(apply(load(x[i])))

    return run


@pytest.mark.parametrize("math", ["fast", "libm"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("n", [1, STRIP - 1, STRIP, 2 * STRIP + 1, 3 * STRIP])
def test_staged_kernel_is_the_one_expression_kernel_bit_for_bit(n: int, dtype: str, math: str) -> None:
    ops = (*ALL8, "scale", "tanh")
    x = (np.random.default_rng(n).standard_normal(n) * 4).astype(dtype)
    out = np.full(n, np.nan, dtype)
    launch = fused({"x": x}, out, {"ops": list(ops)}, {"math": math})
    launch()
    bits = np.uint16 if dtype == "float16" else np.uint32
    want = np.full(n, np.nan, dtype)
    _one_expression(ops, dtype, math)(
        x.view(bits) if dtype == "float16" else x, want.view(bits) if dtype == "float16" else want
    )
    assert not np.isnan(out).any()
    np.testing.assert_array_equal(out.view(bits), want.view(bits))
    assert notes(launch) == {"math": math, "stages": 5}
