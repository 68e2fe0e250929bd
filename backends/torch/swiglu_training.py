"""swiglu's torch rivals in the backward and train phases: autograd of the eager decomposition, F.silu(a) · b
(what `backends.torch.swiglu`'s eager variant launches as `aten.silu.out` and `mul.out`), eagerly (`eager`: keeps
a, s and b, then runs the product's two backward kernels and silu's) and through torch.compile (`compiled`:
AOTAutograd keeps a and b and recomputes silu in one generated backward kernel). torch has no library op for
silu(a) · b, so there is no `library` row."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from backends.torch.training import autograd_variants


def decomposition(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.silu(a) * b


autograd_variants("swiglu", wrt=("a", "b"), eager=decomposition)
