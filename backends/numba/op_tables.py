"""The op tables of the two math modes, and op chains composed from them.

Apart from `backends.numba.ops` because the fast table takes its transcendental ops from
`backends.numba.fast_math`, which is built on the constants and bit casts of `ops`: this module imports both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from numba.extending import register_jitable

from backends.numba import fast_math
from backends.numba.ops import OPS

MATH = ("fast", "libm")
"""Math modes of the CPU kernels (`backend_options.numba.math`)."""

LONG_OPS = frozenset({"tanh", "sigmoid", "silu", "gelu"})
"""The ops built on exp (tanh included): tens of dependent instructions each, where the others take one."""


@functools.cache
def op_table(math: str) -> dict[str, Callable[[float], float]]:
    """The ops of math mode `math`: "libm" is `OPS`; "fast" replaces the transcendental ones by the branch-free
    float32 functions of `backends.numba.fast_math`, which vectorise (CPU target only: the CUDA simulator cannot
    run their llvmlite intrinsics, and libdevice is already vectorised per thread)."""
    if math == "libm":
        return OPS
    if math != "fast":
        raise ValueError(f"unknown math mode {math!r}; valid: {', '.join(MATH)}")
    fast = {
        "tanh": fast_math.tanh_fast,
        "sigmoid": fast_math.sigmoid_fast,
        "silu": fast_math.silu_fast,
        "gelu": fast_math.gelu_fast,
    }
    assert fast.keys() == LONG_OPS
    return {**OPS, **fast}


@functools.cache
def chain(ops: tuple[str, ...], math: str = "libm") -> Callable[[float], float]:
    """v -> op_k(...op_1(v)): one jitable function, the head op composed with the chain of the rest, each op
    from the table of math mode `math` (see `op_table`).

    A one-op chain is the op itself, so an unfused kernel and a fused one run the same code.
    """
    if not ops:
        raise ValueError("an op chain needs at least one op")
    head = op_table(math)[ops[0]]
    if len(ops) == 1:
        return head
    tail = chain(ops[1:], math)

    @register_jitable
    def composed(v: float) -> float:
        return tail(head(v))

    return composed
