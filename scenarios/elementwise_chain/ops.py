"""The elementwise ops a chain is made of: their float64 meaning, the FLOPs counted, which are transcendental.

Exact meaning on the running value v (fused kernels compute in float32; unfused kernels store each intermediate
in the chain's dtype); every backend implements these with the same constants.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

GELU_C, GELU_A = 0.7978845608, 0.044715


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


OPS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "scale": lambda v: 1.25 * v,
    "shift": lambda v: v + 0.5,
    "relu": lambda v: np.maximum(v, 0),
    "square": lambda v: v * v,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "silu": lambda v: v * _sigmoid(v),
    "gelu": lambda v: 0.5 * v * (1.0 + np.tanh(GELU_C * (v + GELU_A * v * v * v))),
}

FLOPS = {"scale": 1, "shift": 1, "relu": 1, "square": 1, "tanh": 1, "sigmoid": 3, "silu": 4, "gelu": 9}
"""FLOPs per element, counting each add, multiply, max, divide and transcendental (exp, tanh) as one."""
TRANSCENDENTAL = frozenset({"tanh", "sigmoid", "silu", "gelu"})
"""Ops that evaluate exp or tanh: a chain with any of them can be bound by arithmetic where a chain of cheap ops
(scale, shift, relu, square) is bound by memory, so its speedup follows its own curve against length."""

ALL8 = ["scale", "shift", "relu", "square", "tanh", "sigmoid", "silu", "gelu"]
CHEAP4 = ["scale", "shift", "relu", "square"]
"""Chains without transcendentals stay memory-bound on a CPU; ALL8's tanh and exp make it compute-bound there."""
