"""The elementwise chain's torch rivals in the backward and train phases: torch autograd of the chain as torch ops.

`eager` differentiates the chain written one torch op per chain op (`TORCH_OPS`, the forward's eager ops), so
autograd keeps what each op's backward formula needs (scale and shift nothing, relu, tanh and sigmoid their
output, square, silu and gelu their input) and runs one backward kernel per op (square: two multiplies and an
add; shift: none). `compiled` is the same chain through torch.compile, whose partitioner keeps x and recomputes
the chain in one fused backward kernel. torch has no op for a chain, so there is no `library` variant.

The chain depends on `params["ops"]`, which `backends.torch.training.autograd_variants` cannot pass to a forward
(its forward sees the inputs only); so each entry here builds the forward for its case's chain and hands it to
that module's entry builder, which does the rest (saved-tensor accounting, publish, torch.compile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from backends.torch import DEVICES
from backends.torch.elementwise_chain import TORCH_OPS
from backends.torch.training import _entry
from suite.core.phases import BACKWARD, TRAIN
from suite.core.registry import Launch, kernel


def chain_forward(ops: tuple[str, ...]) -> Callable[..., torch.Tensor]:
    """forward(x) -> y: the chain as torch ops, each a new tensor (autograd decides what to keep)."""

    def chain(x: torch.Tensor) -> torch.Tensor:
        v = x
        for op in ops:
            v = TORCH_OPS[op](v, None)
        return v

    return chain


def _variant(phase: str, compile_it: bool) -> Callable[..., Launch]:
    def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launch:
        made = _entry(chain_forward(tuple(params["ops"])), ("x",), ("dy",), phase, compile_it)
        return made(inputs, out, params, opts)

    return entry


for _phase in (BACKWARD, TRAIN):
    for _name, _compile in (("eager", False), ("compiled", True)):
        kernel(scenario="elementwise_chain", backend="torch", variant=_name, device=DEVICES, phase=_phase)(
            _variant(_phase, _compile)
        )
