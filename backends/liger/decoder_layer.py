"""Liger-Kernel patched into the decoder layer's model code: decoder_layer's `library` row on CUDA.

What a practitioner who installs Liger runs instead of writing kernels: torch's layer as model code writes it
(`backends.torch.decoder_layer`, the `eager` row), its ops replaced where Liger has a kernel for them, as Liger's
`apply_liger_kernel_to_llama` patches a Llama. Liger's fused add + RMSNorm does both residual adds and norms (the
add_rmsnorm row's launch, `backends.liger.add_rmsnorm`); its rope rotates the projections' q and k in place,
token-major as the GEMMs made them (the rope row's kernel without its copies, `backends.liger.rope`); its SiLU·mul
is the MLP's activation (`backends.liger.swiglu`). The projections, SDPA and the layouts stay torch's, so the row
differs from `eager` only in the ops Liger replaces. Each op allocates its outputs on every call (the norm's
per-row rstd too, float32), as Liger's autograd functions do. Half pairing only (Liger's rope); Liger's RMSNorm and
SwiGLU kernels cannot run in Triton's interpreter (`needs_gpu`), so the row's numerics wait for a GPU.
"""

from __future__ import annotations

from typing import Any

import torch

from backends.liger import BACKEND, needs_gpu
from backends.liger.add_rmsnorm import launcher as add_norm_launcher
from backends.liger.rope import half_only, rotation
from backends.liger.swiglu import forward as silu_mul_launcher
from backends.torch.decoder_layer import Ops, layer
from suite.core.registry import Launcher, kernel


def _add_norm(
    a: torch.Tensor, b: torch.Tensor, weight: torch.Tensor, h: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    h = torch.empty_like(a) if h is None else h
    y = torch.empty_like(a)
    rstd = torch.empty(a.shape[0], dtype=torch.float32, device=a.device)
    add_norm_launcher({"x": a, "residual": b, "weight": weight}, (h, y), rstd, {})()
    return h, y


def _rope(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """In place: q and k are the projections' own (1, T, heads, d) outputs, which nothing else reads."""
    rotation(q, q.stride(1), k, k.stride(1), cos, sin)()
    return q, k


def _silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    m = torch.empty_like(gate)
    silu_mul_launcher(gate, up, m)()
    return m


LIGER = Ops(_add_norm, _rope, _silu_mul)
"""The layer's ops as Liger's kernels."""


@kernel(scenario="decoder_layer", backend="liger", variant="library", device="cuda")
def library(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    half_only(params["rope_pairing"])
    needs_gpu("fused add + RMSNorm")
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream(), torch.no_grad():
            layer(inputs, out, params, LIGER)

    return launch
