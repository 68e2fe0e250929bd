"""Liger's cross-entropy (`LigerCrossEntropyFunction`) in the backward and train phases: cross_entropy's `library`
row on CUDA, beside torch's autograd of F.cross_entropy.

Liger's forward is a training step's forward: its one row kernel (`liger_cross_entropy_kernel` with gradients on,
launched as `cross_entropy_forward` launches it: one program per token, blocks of min(32768, next power of two of
vocab) columns, 32 warps as on Hopper) writes each token's loss and, in its second walk over the row, the
gradient of the mean loss over the logits themselves, in place (ignored tokens' rows zeroed). It keeps that
gradient (n·s, the only tensor `LigerCrossEntropyFunction` saves) and its backward scales it by the upstream
gradient in place (`cross_entropy_backward`: `element_mul_kernel`, one program per token, 32 warps). So the
gradient comes out of the forward, and a forward-only comparison would leave out the half of Liger's work that
its rivals do in their backward: the `train` row, forward and backward as one call, is the fair one.

What the rows do differently from a model's call, each because the suite's buffers must stay as they are and
every launch must give the same answer:
- Liger overwrites its input, the logits, with the gradient; the suite's logits are an input, so the forward
  first copies them into the gradient's buffer and the kernel works there (n·s read and written more than a
  model, which has no further use for its logits).
- Its backward scales its saved gradient in place, so a second launch would scale it twice: in the `backward`
  phase, where the forward ran once while the row was built, each launch copies the saved gradient into the
  suite's dlogits and scales it there (the copy, n·s each way, is the fused variant's own backward-phase copy).
  In `train` the forward writes straight into dlogits and the backward scales it there, no copy.
- The host syncs Liger makes on every call (the count of counted tokens, `.item()`; its bound checks on the
  targets; `torch.equal(dy, 1)`, which skips the scaling for a loss that is the last layer) are taken once when
  the row is built, as the forward row takes the count.
Per-token losses are in the logits' dtype, as Liger keeps them, summed into the loss by torch.sum.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from backends.liger import BACKEND, bfloat16_arithmetic
from backends.liger.cross_entropy import row_kernel_args
from scenarios.cross_entropy import IGNORE_INDEX
from suite.kit.training import Pass, training

NUM_WARPS = 32
"""Liger's choice on Hopper and older GPUs, for its row kernel and for `element_mul_kernel` alike."""


def _block(vocab: int) -> int:
    import triton
    from liger_kernel.ops.cross_entropy import MAX_FUSED_SIZE

    return min(MAX_FUSED_SIZE, triton.next_power_of_2(vocab))


def forward(inputs: dict[str, Any], y: torch.Tensor, params: dict, opts: dict, grads: Mapping | None = None) -> Pass:
    """The loss into y and the unscaled gradient of the mean loss into dlogits (the train step's buffer, or one
    of its own in the backward phase), which it keeps."""
    bfloat16_arithmetic("cross-entropy backward (element_mul)", inputs["logits"].dtype)
    from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel

    x, targets = inputs["logits"], inputs["targets"]
    tokens, vocab = x.shape
    g = grads["dlogits"] if grads is not None else torch.empty_like(x)
    losses = torch.zeros(tokens, dtype=x.dtype, device=x.device)  # ignored tokens' stay 0, as Liger's do
    counted = int((targets != IGNORE_INDEX).sum())
    args, flags = row_kernel_args(g, targets, losses, counted, vocab, gradients=True)
    block = _block(vocab)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with on_stream():
            g.copy_(x)  # Liger turns its input into the gradient; the suite's logits stay as they are
            liger_cross_entropy_kernel[(tokens,)](*args, BLOCK_SIZE=block, num_warps=NUM_WARPS, **flags)
            torch.sum(losses, dim=0, keepdim=True, out=y)

    return Pass(run, saved={"dlogits": g}, notes={"dlogits": "written by Liger's forward (its row kernel)"})


def backward(inputs: dict[str, Any], saved: Mapping[str, Any], grads: Mapping[str, Any], params: dict, opts: dict):
    """dlogits scaled by dy in place (`element_mul_kernel`), after a copy of the saved gradient into it where the
    forward kept it elsewhere (the backward phase)."""
    from liger_kernel.ops.utils import element_mul_kernel

    g, dlogits, dy = saved["dlogits"], grads["dlogits"], inputs["dy"]
    tokens, vocab = dlogits.shape
    block = _block(vocab)
    copy = g.data_ptr() != dlogits.data_ptr()
    scale = not torch.equal(dy.reshape(()), torch.tensor(1.0, dtype=dy.dtype, device=dy.device))
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with on_stream():
            if copy:
                dlogits.copy_(g)
            if scale:
                element_mul_kernel[(tokens,)](
                    dlogits, dlogits.stride(0), dy, vocab, BLOCK_SIZE=block, num_warps=NUM_WARPS
                )

    steps = (["the saved gradient copied into dlogits"] if copy else []) + [
        "scaled by dy in place" if scale else "not scaled (dy = 1, which Liger skips)"
    ]
    return Pass(run, notes={"backward": ", then ".join(steps)})


training("cross_entropy", backend="liger", device="cuda", library=(forward, backward))
