"""Liger's fused linear cross-entropy (`liger_kernel.ops.fused_linear_cross_entropy`, behind
`LigerFusedLinearCrossEntropyLoss`) as linear_cross_entropy's `library` row on CUDA.

The library's own forward is called, as a model's loss calls it, forward only (`compute_gradients=False`, under
no_grad, where it writes each chunk's logits with `torch.mm(..., out=)` into one buffer): it picks its own chunk
(`scenarios.linear_cross_entropy.liger_chunk`: a chunk's logits no larger than the hidden states), takes the count
of counted tokens with a host sync, allocates a zeroed gradient buffer of the hidden states' size even without
gradients, and runs its cross-entropy kernel a chunk at a time; all of that is in the timed call, as it is in a
model's. Its weight is the suite's W seen as (vocab, hidden), as nn.Linear keeps it: a transposed view, no copy.
Its cross-entropy kernel runs in Triton's interpreter, so its numerics are checked there without a GPU.
"""

from __future__ import annotations

from typing import Any

import torch

from backends.liger import BACKEND
from scenarios.cross_entropy import IGNORE_INDEX
from suite.core.registry import Launcher, kernel


@kernel(scenario="linear_cross_entropy", backend="liger", variant="library", device="cuda")
def library(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    from liger_kernel.ops.fused_linear_cross_entropy import fused_linear_cross_entropy_forward

    h, head, targets = inputs["hidden"], inputs["weight"].t(), inputs["targets"]
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream(), torch.no_grad():
            loss = fused_linear_cross_entropy_forward(
                h, head, targets, ignore_index=IGNORE_INDEX, compute_gradients=False, weight_requires_grad=False
            )[0]
            out.copy_(loss.reshape(1))

    return launch
