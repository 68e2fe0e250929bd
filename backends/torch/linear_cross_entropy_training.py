"""Linear cross-entropy's backward and training step in torch autograd: `eager` differentiates the family's eager
forward (torch.matmul into every token's logits, then F.cross_entropy, as a model's loss reads), `compiled` the
same through torch.compile. The loss comes back as the suite's output has it, shape (1,), the case's dtype.

No `library`: torch has no linear cross-entropy of its own (the family's library is Liger-Kernel's, on CUDA).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from backends.torch.training import autograd_variants
from scenarios.cross_entropy import IGNORE_INDEX


def eager(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(hidden @ weight, targets, ignore_index=IGNORE_INDEX).reshape(1)


autograd_variants("linear_cross_entropy", wrt=("hidden", "weight"), eager=eager)
