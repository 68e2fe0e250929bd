"""Liger's fused add + RMSNorm (`LigerFusedAddRMSNormFunction`) in the backward and train phases: add_rmsnorm's
`library` row on CUDA, beside torch's autograd of the add and F.rms_norm.

Liger's forward is the forward row's kernel (`backends.liger.add_rmsnorm`: h into y[0], the norm into y[1], each
row's rstd into a float32 buffer) and it keeps h, γ and rstd, the tensors `LigerFusedAddRMSNormFunction` saves
(the suite's fused variant keeps the same). Its backward is `fused_add_rms_norm_backward` with Llama's casting
mode, launched as Liger launches it: `_fused_add_rms_norm_backward_kernel` on one program per SM, each walking
ceil(rows / SMs) rows: dh = dy[0] + rstd·(dy[1]·γ) − (rstd³/cols)·Σ(dy[1]·γ·h)·h into dx (dy[1] is the norm's
upstream gradient, dy[0] h's own, Liger's dS_out), γ's gradient summed per program into a float32 row of
partials; then torch's sum of the partials (and, below float32, its cast) into dweight. It writes dx only
(`in_place=False`, Liger's default: dy stays the caller's) and returns it as the residual's gradient too, one
tensor for both, as torch's autograd does for the library add; so, as for torch's row, the copy of dx into the
suite's dresidual is published after the launch, not timed. The partials' buffer is allocated when the row is
built (Liger allocates it on every call). Liger's RMSNorm kernels cast a scalar argument in-kernel
(`offset.to(tl.float32)`), which Triton's interpreter cannot run: `Unsupported` there.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import torch

from backends.liger import BACKEND, needs_gpu
from backends.liger.add_rmsnorm import launcher
from suite.core.phases import BACKWARD, TRAIN
from suite.core.registry import Launch, kernel
from suite.kit.training import Pass, backward_entry, train_entry

NUM_STAGES = 2
"""Liger's forward picks 2 and its backward reuses the forward's."""


def forward(inputs: dict[str, Any], y: torch.Tensor, params: dict, opts: dict) -> Pass:
    """The forward row's kernel into y (h, then the norm); h, rstd and γ kept."""
    needs_gpu("fused add + RMSNorm")
    x = inputs["x"]
    rstd = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    return Pass(launcher(inputs, y, rstd, opts), saved={"h": y[0], "rstd": rstd, "weight": inputs["weight"]})


def backward(inputs: dict[str, Any], saved: Mapping[str, Any], grads: Mapping[str, Any], params: dict, opts: dict):
    """dx from Liger's backward kernel, dweight from the sum of its per-program partials."""
    needs_gpu("fused add + RMSNorm backward")
    from liger_kernel.ops import fused_add_rms_norm as liger
    from liger_kernel.ops.utils import calculate_settings, torch_to_triton_dtype

    h, w, rstd, dy, dx, dw = saved["h"], saved["weight"], saved["rstd"], inputs["dy"], grads["dx"], grads["dweight"]
    rows, cols = h.shape
    block, warps = calculate_settings(cols)
    sms = torch.cuda.get_device_properties(h.device).multi_processor_count if h.device.type == "cuda" else 1
    partials = torch.empty((sms, cols), dtype=torch.float32, device=h.device)
    total = dw if dw.dtype == torch.float32 else torch.empty(cols, dtype=torch.float32, device=h.device)
    mode = liger._str_to_casting_mode["llama"]
    args = (
        dy[1],
        dy[1].stride(0),
        dy[0],
        dy[0].stride(0),
        dx,
        dx.stride(0),
        h,
        h.stride(0),
        torch_to_triton_dtype[h.dtype],
        w,
        w.stride(0),
        rstd,
        rstd.stride(0),
        partials,
        partials.stride(0),
        rows,
        cols,
        0.0,
        math.ceil(rows / sms),
        getattr(mode, "value", mode),
    )
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with on_stream():
            liger._fused_add_rms_norm_backward_kernel[(sms,)](
                *args, BLOCK_SIZE=block, num_warps=warps, num_stages=NUM_STAGES, has_dS_out=True, COMPUTE_DW=True
            )
            torch.sum(partials, dim=0, out=total)
            if total is not dw:
                dw.copy_(total)

    return Pass(run, notes={"dweight partials": sms})


def _publishing(entry: Any) -> Any:
    """`entry` with the copy of dx into dresidual as its `publish`: Liger returns one tensor for both."""

    def publishing(inputs: dict[str, Any], out: Mapping[str, Any], params: dict, opts: dict) -> Launch:
        launch = entry(inputs, out, params, opts)
        on_stream = BACKEND.launch_stream(opts.get("stream"))

        def publish() -> None:
            with on_stream():
                out["dresidual"].copy_(out["dx"])

        return dataclasses.replace(launch, publish=publish)

    return publishing


for _phase, _entry in (
    (BACKWARD, backward_entry(forward, backward, ("dy",))),
    (TRAIN, train_entry(forward, backward)),
):
    kernel(scenario="add_rmsnorm", backend="liger", variant="library", device="cuda", phase=_phase)(_publishing(_entry))
