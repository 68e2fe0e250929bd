"""Liger's SiLU·mul (`LigerSiLUMulFunction`) in the backward and train phases: swiglu's `library` row on CUDA.

Liger's forward keeps a and b (the only tensors `LigerSiLUMulFunction` saves; silu(a) is recomputed, as the
suite's fused variant does) and its backward (`swiglu_backward`) is one kernel, `_swiglu_backward_kernel`, one
program per row of `calculate_settings(cols)` columns (Hopper's launch; Blackwell tiles wide rows): it reads dy,
a and b and writes da over a and db over b, in place. The suite's a and b are inputs and must stay as they are,
and a second launch must find them again, so each backward launch first copies a into da and b into db and the
kernel works there: 2·N·s read and written more than a model, whose saved activations are dead by then. The
forward is the forward row's kernel (`backends.liger.swiglu`) into y. Liger's SwiGLU kernels cast a scalar
argument in-kernel (`gate_multiplier.to(tl.float32)`), which Triton's interpreter cannot run: `Unsupported` there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from backends.liger import BACKEND, needs_gpu
from backends.liger.swiglu import library as forward_row
from suite.kit.training import Pass, training


def forward(inputs: dict[str, Any], y: torch.Tensor, params: dict, opts: dict) -> Pass:
    """The forward row's kernel into y; a and b kept."""
    run = forward_row(inputs, y, params, opts)
    return Pass(run, saved={"a": inputs["a"], "b": inputs["b"]})


def backward(inputs: dict[str, Any], saved: Mapping[str, Any], grads: Mapping[str, Any], params: dict, opts: dict):
    """a and b copied into da and db, which Liger's backward kernel overwrites with the gradients."""
    needs_gpu("SwiGLU backward")
    from liger_kernel.ops.swiglu import _swiglu_backward_kernel
    from liger_kernel.ops.utils import calculate_settings

    a, b, dy, da, db = saved["a"], saved["b"], inputs["dy"], grads["da"], grads["db"]
    rows, cols = dy.shape
    block, warps = calculate_settings(cols)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with on_stream():
            da.copy_(a)
            db.copy_(b)
            _swiglu_backward_kernel[(rows,)](
                dy, da, db, dy.stride(-2), 1.0, n_cols=cols, BLOCK_SIZE=block, num_warps=warps
            )

    return Pass(run)


training("swiglu", backend="liger", device="cuda", library=(forward, backward))
