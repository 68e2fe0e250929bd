"""Attention's library rival: `torch.nn.functional.scaled_dot_product_attention` on the same q, k, v.

On a GPU torch picks a flash or memory-efficient kernel; on the CPU its fused flash-attention kernel. The
launcher copies the result into the suite's output buffer (SDPA has no `out=`): one extra read and write of O,
small beside the K and V traffic, and the same on both devices. The ledger credits it with the least any
implementation must move: q, k, v read once and O written once.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from backends.torch import BACKEND
from suite.core.registry import Launcher, kernel


def _entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    causal = bool(params["causal"])
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream(), torch.no_grad():
            out.copy_(F.scaled_dot_product_attention(q, k, v, is_causal=causal))

    return launch


kernel(scenario="attention", backend="torch", variant="library", device="cpu")(_entry)
kernel(scenario="attention", backend="torch", variant="library", device="cuda")(_entry)
