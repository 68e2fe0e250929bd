"""Liger's fused linear cross-entropy (`LigerFusedLinearCrossEntropyFunction`) in the backward and train phases:
linear_cross_entropy's `library` row on CUDA.

Liger computes both gradients in its forward (`fused_linear_cross_entropy_forward` with gradients on): chunk by
chunk of tokens (its own chunk, `scenarios.linear_cross_entropy.liger_chunk`), the chunk's logits (`torch.mm`),
its cross-entropy kernel turning them into the gradient of the mean loss in place, then dhidden[chunk] = g · W
and dW += gᵀ · hidden[chunk] into zeroed buffers of its own. Those two gradients are all its autograd function
keeps (T·H·s and V·H·s: the hidden states and the weight themselves are not saved), and its backward
(`fused_linear_cross_entropy_backward`) only scales them by the upstream gradient in place (`element_mul_kernel`
over each), after `torch.equal(dy, 1)` (a host sync) which skips that for a loss that is the last layer. So
nearly all of Liger's work is in its forward: the `train` row, forward and backward as one call, is the
comparison that counts; the `backward` row times the scaling alone.

Both rows call Liger's functions as its autograd function does (under no_grad, where its forward writes each
chunk's logits with `torch.mm(..., out=)`), their allocations and host syncs in the timed call as the forward
row has them. Its weight is the suite's W seen as (vocab, hidden), as nn.Linear keeps it: a transposed view,
no copy; its dW is then the transposed view of a (hidden, vocab) tensor, and the suite's dweight is seen the
same way. The upstream gradient is handed as autograd hands it to Liger's backward: a 0-dim float32 tensor (Liger's
loss is float32 at every dtype), converted from the suite's dy when the row is built.
- `backward`: Liger's forward runs once while the row is built; since its backward scales in place, each launch
  copies the saved gradients into the suite's dhidden and dweight and scales them there (the copy, T·H·s and
  H·V·s each way, is the suite's: a model scales its saved gradients where they are).
- `train`: Liger's forward and backward; its gradients are its own tensors (allocated by its forward), copied
  into the suite's buffers after the launch (`Launch.publish`), not in the timed call.
The cross-entropy and scaling kernels run in Triton's interpreter, so the numerics are checked there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from backends.liger import BACKEND, bfloat16_arithmetic
from scenarios.cross_entropy import IGNORE_INDEX
from suite.core.phases import BACKWARD, OUTPUT, TRAIN
from suite.core.registry import Launch, kernel
from suite.kit.training import nbytes


def _liger_forward(h: torch.Tensor, head: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(loss, dhidden, dweight as (vocab, hidden)) from Liger's forward, unscaled by dy."""
    from liger_kernel.ops.fused_linear_cross_entropy import fused_linear_cross_entropy_forward

    with torch.no_grad():
        loss, *_, dh, dw, _ = fused_linear_cross_entropy_forward(
            h, head, targets, ignore_index=IGNORE_INDEX, compute_gradients=True, weight_requires_grad=True
        )
    return loss, dh, dw


def _prepare(inputs: dict[str, Any], opts: dict) -> tuple:
    bfloat16_arithmetic("linear cross-entropy backward (element_mul)", inputs["hidden"].dtype)
    from liger_kernel.ops.fused_linear_cross_entropy import fused_linear_cross_entropy_backward

    h, head, targets = inputs["hidden"], inputs["weight"].t(), inputs["targets"]
    dy = inputs["dy"].to(torch.float32).reshape(())  # Liger's loss is float32: autograd hands it this gradient
    return h, head, targets, dy, fused_linear_cross_entropy_backward, BACKEND.launch_stream(opts.get("stream"))


def backward_entry(inputs: dict[str, Any], out: Mapping[str, Any], params: dict, opts: dict) -> Launch:
    h, head, targets, dy, liger_backward, on_stream = _prepare(inputs, opts)
    with on_stream():
        _, dh, dw = _liger_forward(h, head, targets)  # the forward, outside the timed region
    dhidden, dweight = out["dhidden"], out["dweight"].t()  # dweight as Liger's (vocab, hidden) view

    def run() -> None:
        with on_stream(), torch.no_grad():
            dhidden.copy_(dh)
            dweight.copy_(dw)
            liger_backward(dy, dhidden, dweight, None)

    notes = {"backward": "the saved gradients copied, then scaled by dy in place"}
    return Launch(run, notes=notes, saves=nbytes({"dhidden": dh, "dweight": dw}))


def train_entry(inputs: dict[str, Any], out: Mapping[str, Any], params: dict, opts: dict) -> Launch:
    h, head, targets, dy, liger_backward, on_stream = _prepare(inputs, opts)
    held: dict[str, torch.Tensor] = {}

    def run() -> None:
        with on_stream(), torch.no_grad():
            loss, dh, dw = _liger_forward(h, head, targets)
            out[OUTPUT].copy_(loss.reshape(1))
            held["dhidden"], held["dweight"], _ = liger_backward(dy, dh, dw, None)

    def publish() -> None:
        with on_stream(), torch.no_grad():
            out["dhidden"].copy_(held["dhidden"])
            out["dweight"].copy_(held["dweight"].t())

    run()  # one step while the row is built: what the forward keeps, measured on Liger's own tensors
    saves = nbytes({"dhidden": held["dhidden"], "dweight": held["dweight"]})
    notes = {"gradients": "Liger's own tensors, copied into the suite's after the launch"}
    return Launch(run, notes=notes, saves=saves, publish=publish)


kernel(scenario="linear_cross_entropy", backend="liger", variant="library", device="cuda", phase=BACKWARD)(
    backward_entry
)
kernel(scenario="linear_cross_entropy", backend="liger", variant="library", device="cuda", phase=TRAIN)(train_entry)
