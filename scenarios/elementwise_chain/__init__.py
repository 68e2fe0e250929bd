"""Elementwise chain: y = op_k(...op_1(x)), the simplest case where fusion pays (see `scenario`).

Importing the package registers the scenario; the names backends and tests use are re-exported here.
"""

from scenarios.elementwise_chain.ops import ALL8, CHEAP4, FLOPS, GELU_A, GELU_C, OPS, TRANSCENDENTAL
from scenarios.elementwise_chain.scenario import (
    MAX_CHAIN,
    MAX_N,
    ElementwiseChain,
    short_label,
)

__all__ = [
    "ALL8",
    "CHEAP4",
    "FLOPS",
    "GELU_A",
    "GELU_C",
    "MAX_CHAIN",
    "MAX_N",
    "OPS",
    "TRANSCENDENTAL",
    "ElementwiseChain",
    "short_label",
]
