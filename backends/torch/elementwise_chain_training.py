"""The elementwise chain's torch rivals in the backward and train phases: torch autograd of the chain as torch ops.

`eager` differentiates the chain written one torch op per chain op (`TORCH_OPS`, the forward's eager ops), so
autograd keeps what each op's backward formula needs (scale and shift nothing, relu, tanh and sigmoid their
output, square, silu and gelu their input) and runs one backward kernel per op (square: two multiplies and an
add; shift: none). `compiled` is the same chain through torch.compile, whose partitioner keeps x and recomputes
the chain in one fused backward kernel. torch has no op for a chain, so there is no `library` variant.
The forward takes the case's params (its chain of ops), which `autograd_variants` hands it.
"""

from __future__ import annotations

import torch

from backends.torch.elementwise_chain import TORCH_OPS
from backends.torch.training import autograd_variants


def chain(x: torch.Tensor, *, params: dict) -> torch.Tensor:
    """The case's chain (`params["ops"]`) as torch ops, each a new tensor (autograd decides what to keep)."""
    v = x
    for op in params["ops"]:
        v = TORCH_OPS[op](v, None)
    return v


autograd_variants("elementwise_chain", wrt=("x",), eager=chain)
