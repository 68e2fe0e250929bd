"""torch autograd's backward and train phases for layernorm, rmsnorm and softmax: the rivals of the Numba kernels.

`eager` (and `compiled`, its torch.compile) differentiates the family's canonical decomposition written as the
same torch ops the forward's `eager` and `compiled` variants run (`normalization_steps._apply`, one op per step
of `scenarios.normalization.DECOMPOSITIONS`), functionally: what autograd keeps for the backward is whatever
those ops save. `library` differentiates torch's own op (F.layer_norm, F.rms_norm, F.softmax), whose backward is
torch's hand-written one. `scenarios.normalization.backward` models what each of them saves.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from backends.torch.normalization_steps import _apply
from backends.torch.training import autograd_variants
from scenarios.normalization import DECOMPOSITIONS, EPS


def decomposition(op: str) -> Any:
    """forward(**inputs) -> y: the decomposition's steps as torch ops, each producing a new tensor."""

    def forward(**inputs: torch.Tensor) -> torch.Tensor:
        env: dict[str, Any] = dict(inputs)
        for st in DECOMPOSITIONS[op]:
            env[st.writes] = _apply(st, env, None)
        return env["y"]

    forward.__name__ = f"{op}_decomposition"
    return forward


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, EPS)


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, EPS)


def softmax(x: torch.Tensor) -> torch.Tensor:
    return F.softmax(x, -1)


LIBRARY = {"layernorm": layer_norm, "rmsnorm": rms_norm, "softmax": softmax}
WRT = {"layernorm": ("x", "weight", "bias"), "rmsnorm": ("x", "weight"), "softmax": ("x",)}
"""The inputs each op is differentiated with respect to: every input (the gradients the family writes)."""

for _op, _library in LIBRARY.items():
    autograd_variants(_op, wrt=WRT[_op], eager=decomposition(_op), library=_library)
