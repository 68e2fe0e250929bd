"""Liger's SiLU·mul (`liger_kernel.ops.swiglu`, behind `LigerSiLUMulFunction`) as swiglu's `library` row on CUDA.

Its forward kernel is launched as `swiglu_forward` launches it on Hopper and older GPUs (one program per row of
`calculate_settings(cols)` columns), writing y into the suite's output rather than a tensor of its own: silu(a)
in float32, cast to b's dtype, times b. (On Blackwell, for rows of 16384 columns and more, Liger tiles the row
over a 2D grid; this row keeps the one-row kernel, which is what it runs on the H100/H200 the suite targets.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from backends.liger import BACKEND, needs_gpu
from suite.core.registry import Launcher, kernel


@kernel(scenario="swiglu", backend="liger", variant="library", device="cuda")
def library(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    needs_gpu("SwiGLU")
    silu_mul = forward(inputs["a"], inputs["b"], out)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            silu_mul()

    return launch


def forward(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> Callable[[], None]:
    """Liger's forward kernel on (rows, cols) a and b into out, one stride for all three, its settings chosen once:
    the swiglu row's launch, and a model's MLP activation (`backends.liger.decoder_layer`)."""
    from liger_kernel.ops.swiglu import _swiglu_forward_kernel
    from liger_kernel.ops.utils import calculate_settings

    rows, cols = a.shape
    block, warps = calculate_settings(cols)
    return lambda: _swiglu_forward_kernel[(rows,)](
        a, b, out, out.stride(-2), 1.0, n_cols=cols, BLOCK_SIZE=block, num_warps=warps
    )
