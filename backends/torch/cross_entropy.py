"""Cross-entropy in torch: `library` (F.cross_entropy), `eager` (log_softmax, gather, mean as torch ops into
buffers allocated here) and `compiled` (that decomposition through torch.compile), CPU and CUDA.

The library computes log_softmax and nll_loss (two kernels on CUDA, the log-softmax materialised), yet it is
given the fused ledger, as every library is: the question it answers is what a user gets by calling it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from backends.torch import BACKEND, DEVICES
from backends.torch.compiler import compiled
from scenarios.cross_entropy import IGNORE_INDEX
from suite.core.registry import Launcher, kernels


def decomposition(x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log-softmax, −logp[target] (0 where ignored), mean over the counted tokens; computed in float32."""
    logp = torch.log_softmax(x.float(), dim=-1)
    keep = targets != IGNORE_INDEX
    picked = logp.gather(1, torch.where(keep, targets, 0)[:, None])[:, 0]
    return -(picked * keep).sum() / keep.sum()


def _library(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    x, targets = inputs["logits"], inputs["targets"]
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            out.copy_(F.cross_entropy(x, targets, ignore_index=IGNORE_INDEX).reshape(1))

    return launch


def _eager(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    x, targets = inputs["logits"], inputs["targets"]
    logp, picked = torch.empty_like(x), torch.empty(x.shape[0], 1, dtype=x.dtype, device=x.device)
    keep = targets != IGNORE_INDEX
    index = torch.where(keep, targets, 0)[:, None]
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            torch.log_softmax(x, dim=-1, out=logp)
            torch.gather(logp, 1, index, out=picked)
            out.copy_(-(picked[:, 0].float() * keep).sum() / keep.sum())

    return launch


def _compiled(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    def loss(x: torch.Tensor, targets: torch.Tensor, y: torch.Tensor) -> None:
        y.copy_(decomposition(x, targets).reshape(1))

    args = (inputs["logits"], inputs["targets"], out)
    return compiled(loss, args, out, opts, BACKEND.launch_stream(opts.get("stream")))


kernels("cross_entropy", backend="torch", device=DEVICES, library=_library, eager=_eager, compiled=_compiled)
