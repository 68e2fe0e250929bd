"""Linear cross-entropy in torch: `eager` (torch.matmul into the logits of every token, then F.cross_entropy, as
a model's loss reads) and `compiled` (the LM head and the cross-entropy decomposition through torch.compile),
CPU and CUDA.

Inductor calls the library GEMM into the whole logits and fuses the loss into its reductions, so `compiled`
holds the logits as the unfused kernels do; torch itself has no chunked linear cross-entropy to call.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from backends.torch import BACKEND, DEVICES
from backends.torch.compiler import compiled
from backends.torch.cross_entropy import decomposition
from scenarios.cross_entropy import IGNORE_INDEX
from suite.core.registry import Launcher, kernels


def _eager(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    logits = torch.empty(h.shape[0], w.shape[1], dtype=h.dtype, device=h.device)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            torch.matmul(h, w, out=logits)
            out.copy_(F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX).reshape(1))

    return launch


def _compiled(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    def loss(h: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, y: torch.Tensor) -> None:
        y.copy_(decomposition(h @ w, targets).reshape(1))

    args = (inputs["hidden"], inputs["weight"], inputs["targets"], out)
    return compiled(loss, args, out, opts, BACKEND.launch_stream(opts.get("stream")))


kernels("linear_cross_entropy", backend="torch", device=DEVICES, eager=_eager, compiled=_compiled)
