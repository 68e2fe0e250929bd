"""Liger's fused add + RMSNorm (`liger_kernel.ops.fused_add_rms_norm`) as add_rmsnorm's `library` row on CUDA.

Its forward kernel is launched as `fused_add_rms_norm_forward` launches it (one program per row, Liger's
`calculate_settings` for the block and warps, two stages), writing h into out[0] and y into out[1] instead of
tensors of its own; its per-row rstd (kept for the backward pass) goes to a float32 buffer allocated here, rows·4
bytes the ledger does not count. Casting mode "llama" (offset 0), Liger's choice for Llama: h = x + residual in
the storage dtype, rstd in float32, h·rstd rounded to the storage dtype before the weight multiplies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from backends.liger import BACKEND, needs_gpu
from scenarios.normalization import EPS
from suite.core.registry import Launcher, kernel


@kernel(scenario="add_rmsnorm", backend="liger", variant="library", device="cuda")
def library(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    needs_gpu("fused add + RMSNorm")
    x = inputs["x"]
    rstd = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    return launcher(inputs, out, rstd, opts)


def launcher(inputs: dict[str, Any], out: Sequence[torch.Tensor], rstd: torch.Tensor, opts: dict) -> Launcher:
    """Liger's forward kernel writing h into out[0], y into out[1] (one (2, rows, cols) tensor, or two) and each
    row's rstd into `rstd` (float32, one a row): the forward row's launch, the forward of a training step that
    keeps rstd (`backends.liger.add_rmsnorm_training`), and a model's add + norm (`backends.liger.decoder_layer`)."""
    from liger_kernel.ops import fused_add_rms_norm as liger
    from liger_kernel.ops.utils import calculate_settings

    x, res, w = inputs["x"], inputs["residual"], inputs["weight"]
    h, y = out[0], out[1]
    rows, cols = x.shape
    block, warps = calculate_settings(cols)
    mode = liger._str_to_casting_mode["llama"]
    mode = getattr(mode, "value", mode)
    on_stream = BACKEND.launch_stream(opts.get("stream"))
    args = (
        y,
        y.stride(0),
        h,
        h.stride(0),
        x,
        x.stride(0),
        res,
        res.stride(0),
        w,
        w.stride(0),
        rstd,
        rstd.stride(0),
        cols,
        EPS,
        0.0,
        mode,
    )

    def launch() -> None:
        with on_stream():
            liger._fused_add_rms_norm_forward_kernel[(rows,)](*args, BLOCK_SIZE=block, num_warps=warps, num_stages=2)

    return launch
