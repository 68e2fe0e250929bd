"""Liger's rope (`LigerRopeFunction`) in the backward and train phases: rope's `library` row on CUDA.

Liger's forward rotates q and k in place and keeps cos and sin (the only tensors `LigerRopeFunction` saves); its
backward (`rope_backward`) runs the same kernel, `_triton_rope` with BACKWARD_PASS, which rotates the upstream
gradients dq and dk in place by −θ: one program per token, every query and key head of it. The forward here is
the forward row's (`backends.liger.rope`: q and k copied into their heads of y, rotated there, since the suite's
inputs must stay unchanged). The backward does the same with the gradient: the suite's dy (dq's and dk's heads
side by side, an input) is copied into dq and dk and the kernel rotates them there, so the row moves the
gradient twice where a model, rotating autograd's gradient tensors in place, moves it once (the family's
backward ledger for `library` counts the copy). Half pairing only, as the forward row; the tables are the
suite's (seq_len, head_dim/2), passed with rotary_dim = head_dim.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from backends.liger import BACKEND, bfloat16_arithmetic
from backends.liger.rope import library as forward_row
from backends.liger.rope import rope_args
from suite.core.registry import Unsupported
from suite.kit.training import Pass, training


def forward(inputs: dict[str, Any], y: torch.Tensor, params: dict, opts: dict) -> Pass:
    """The forward row's launch into y; cos and sin kept."""
    run = forward_row(inputs, y, params, opts)
    return Pass(run, saved={"cos": inputs["cos"], "sin": inputs["sin"]})


def backward(inputs: dict[str, Any], saved: Mapping[str, Any], grads: Mapping[str, Any], params: dict, opts: dict):
    """dy's heads copied into dq and dk, rotated there by Liger's backward kernel."""
    if params["pairing"] != "half":
        raise Unsupported(f"Liger's rope pairs value j with j + head_dim/2 (half) only, not {params['pairing']}")
    bfloat16_arithmetic("rope", grads["dq"].dtype)
    import triton
    from liger_kernel.ops.rope import _triton_rope

    dy, dq, dk, cos, sin = inputs["dy"], grads["dq"], grads["dk"], saved["cos"], saved["sin"]
    batch, seq_len, heads, _ = dq.shape
    kv = dk.shape[2]
    pad = triton.next_power_of_2
    args = rope_args(dq, dq.stride(1), dk, dk.stride(1), cos, sin)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with on_stream():
            dq.copy_(dy[:, :, :heads])
            dk.copy_(dy[:, :, heads:])
            _triton_rope[(batch * seq_len,)](*args, BLOCK_SIZE=max(pad(heads), pad(kv)), BACKWARD_PASS=True)

    return Pass(run)


training("rope", backend="liger", device="cuda", library=(forward, backward))
