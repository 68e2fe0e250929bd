"""The decoder layer on Triton: the registry's Triton kernel of each op, torch.matmul for the projections.

The layer writes no kernel: `scenarios.decoder_layer.steps` lays its chain out, `suite.kit.layer.compose` looks
each op up among the Triton kernels in the variant the layer's variant picks. What this module adds is how the
Triton backend multiplies (`torch.matmul(a, w, out=)`: cuBLAS on a GPU, the library GEMM linear_cross_entropy
uses here too), copies (`dst.copy_` from a transposed view) and allocates (`torch.empty` on the output's device),
all on torch tensors. In the interpreter those tensors live on the host and the GEMMs are torch's CPU ones: the
layer's numerics, never its time. The whole chain runs in the suite's stream, the ops' kernels and the GEMMs
alike.
"""

from __future__ import annotations

from typing import Any

import torch

from backends.triton import BACKEND
from scenarios.decoder_layer import VARIANTS, op_variants, steps
from suite.core.registry import Launch, kernel
from suite.kit.layer import compose


def _gemm(a: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> Any:
    return lambda: torch.matmul(a, w, out=out)


def _copy(dst: torch.Tensor, src: torch.Tensor) -> Any:
    swapped = src.transpose(0, 1)
    return lambda: dst.copy_(swapped)


@kernel(scenario="decoder_layer", backend="triton", variant=VARIANTS, device="cuda")
def layer(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict, *, variant: str) -> Launch:
    """The layer's chain with each op's Triton kernel in the variant `variant` picks for it."""

    def empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=out.device)

    chain = steps(inputs, out, params, gemm=_gemm, copy=_copy, empty=empty)
    within = BACKEND.launch_stream(opts.get("stream"))
    return compose(chain, op_variants(variant, params), backend="triton", device="cuda", opts=opts, within=within)
