"""Cross-entropy's backward and training step in torch autograd: `eager` (and `compiled`) differentiate the
family's decomposition as torch ops (float32 log-softmax, the gather of −logp[target] over the counted tokens,
their mean; `backends.torch.cross_entropy.decomposition`), `library` differentiates F.cross_entropy.

Each returns the loss as the suite's output has it: shape (1,), the logits' dtype, so that `dy` (the same shape
and dtype) flows straight in. Only the logits get a gradient; the targets are integers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from backends.torch.cross_entropy import decomposition
from backends.torch.training import autograd_variants
from scenarios.cross_entropy import IGNORE_INDEX


def eager(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return decomposition(logits, targets).reshape(1).to(logits.dtype)


def library(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX).reshape(1)


autograd_variants("cross_entropy", wrt=("logits",), eager=eager, library=library)
