"""Liger's cross-entropy (`liger_kernel.ops.cross_entropy`, behind `LigerCrossEntropyLoss`) as cross_entropy's
`library` row on CUDA, beside torch's `F.cross_entropy`.

Its kernel is launched as `cross_entropy_forward` launches it (one program per token, blocks of
min(32768, next power of two of vocab) columns, 32 warps as on Hopper, mean reduction: each token's loss
divided by the count of counted tokens, summed after), with no gradient. Two things differ from Liger's forward,
both outside the timed call: the count, which Liger takes with a host sync (`.item()`) on every call, is taken
once when the row is built; and the kernel runs on a copy of the logits made then. Liger's kernel zeroes the
logits of every ignored token in place (the gradient it would write there), and the suite's inputs must stay
unchanged; those rows are only written, never read, so every call on the copy computes the same loss.
Per-token losses are in the logits' dtype, as Liger keeps them; their sum is torch's.
"""

from __future__ import annotations

from typing import Any

import torch

from backends.liger import BACKEND
from scenarios.cross_entropy import IGNORE_INDEX
from suite.core.registry import Launcher, kernel

NUM_WARPS = 32
"""Liger's choice on Hopper and older GPUs for every dtype (bandwidth-bound, its comment says)."""


def row_kernel_args(
    x: torch.Tensor,
    targets: torch.Tensor,
    losses: torch.Tensor,
    counted: int,
    vocab: int,
    gradients: bool,
) -> tuple[tuple, dict[str, bool]]:
    """`liger_cross_entropy_kernel`'s arguments and flags as its mean-reduction forward passes them, for both
    Liger rows: logits `x` (where the kernel writes the gradient, in place, with `gradients`), per-token `losses`,
    `counted` tokens; no z-loss, accuracy, weight or softcapping."""
    args = (x, x.stride(0), targets, targets.stride(0), x, losses, losses, losses.stride(0), losses, 0, losses, 0,
            vocab, counted, counted, 0.0, IGNORE_INDEX, 0.0, 0.0, "mean", None)  # fmt: skip
    flags = {
        "RETURN_Z_LOSS": False,
        "RETURN_TOKEN_ACCURACY": False,
        "RETURN_PREDICTED_TOKENS": False,
        "HAS_WEIGHT": False,
        "HAS_SOFTCAPPING": False,
        "HAS_GRADIENTS": gradients,
    }
    return args, flags


@kernel(scenario="cross_entropy", backend="liger", variant="library", device="cuda")
def library(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    import triton
    from liger_kernel.ops.cross_entropy import MAX_FUSED_SIZE, liger_cross_entropy_kernel

    x, targets = inputs["logits"].clone(), inputs["targets"]
    tokens, vocab = x.shape
    losses = torch.zeros(tokens, dtype=x.dtype, device=x.device)  # ignored tokens' stay 0, as Liger's do
    counted = int((targets != IGNORE_INDEX).sum())
    block = min(MAX_FUSED_SIZE, triton.next_power_of_2(vocab))
    args, flags = row_kernel_args(x, targets, losses, counted, vocab, gradients=False)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            liger_cross_entropy_kernel[(tokens,)](*args, BLOCK_SIZE=block, num_warps=NUM_WARPS, **flags)
            torch.sum(losses, dim=0, keepdim=True, out=out)

    return launch
