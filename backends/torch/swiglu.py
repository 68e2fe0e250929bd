"""swiglu in torch: the decomposition op by op (`eager`: `aten.silu.out` into a temporary, then `mul.out`) and
through torch.compile (`compiled`), on the CPU and CUDA. torch has no library op for silu(a) · b (F.silu is one
step of it), so there is no `library` row here: the library rival is Liger's fused kernel (backend `liger`)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from backends.torch import BACKEND, DEVICES
from backends.torch.compiler import compiled
from suite.core.registry import Launcher, kernels


def eager(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    a, b = inputs["a"], inputs["b"]
    s = torch.empty_like(a)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            torch.ops.aten.silu.out(a, out=s)
            torch.mul(s, b, out=out)

    return launch


def compiled_variant(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    def decomposition(a: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        y.copy_(F.silu(a) * b)

    return compiled(
        decomposition, (inputs["a"], inputs["b"], out), out, opts, BACKEND.launch_stream(opts.get("stream"))
    )


kernels("swiglu", backend="torch", device=DEVICES, eager=eager, compiled=compiled_variant)
