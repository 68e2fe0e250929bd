"""add_rmsnorm's torch rivals in the backward and train phases, differentiated by autograd.

`eager` and `compiled` take the family's decomposition as `backends.torch.add_rmsnorm`'s eager variant runs it,
written as a pure function: h = x + residual; the row mean of squares (vector_norm squared over cols, float32);
h · rsqrt(ms + eps) stored in the case's dtype; times weight; h and y stacked as the family's one output. `library`
is the add, then torch's own `F.rms_norm` on h. Autograd takes the upstream gradient of both halves (dy[0] flows
to h, dy[1] through the norm) and returns dx and dresidual, the same gradient of h twice.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from backends.torch.training import autograd_variants
from scenarios.normalization import EPS

F32 = torch.float32


def decomposition(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    h = x + residual
    ms = torch.linalg.vector_norm(h, 2, -1, dtype=F32).square() / h.shape[-1]
    hhat = (h * torch.rsqrt(ms[:, None] + EPS)).to(h.dtype)
    return torch.stack([h, hhat * weight])


def library(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    h = x + residual
    return torch.stack([h, F.rms_norm(h, (h.shape[-1],), weight, EPS)])


autograd_variants("add_rmsnorm", wrt=("x", "residual", "weight"), eager=decomposition, library=library)
