"""Matmul in torch: `library` (torch.matmul, or `addmm` with the bias then gelu), `eager` (mm, bias add, gelu as
three ops) and `compiled` (the same through torch.compile).

- library: cuBLAS on a GPU, oneDNN/MKL on the CPU. With the epilogue the bias is added by the library's GEMM
  (`addmm`, C = bias + A·B) and `gelu(approximate="tanh")` writes the output: the best two kernels eager torch
  offers. float32 products are full float32 on both devices: TF32 is off unless
  torch.backends.cuda.matmul.allow_tf32 is set, which this module never does.
- eager: the decomposition one op per kernel, A·B and A·B + bias stored in the case's dtype in buffers
  allocated here. Without an epilogue it is the library's one call, so matmul compares it only with one.
- compiled: the same ops, functionally; Inductor calls the library GEMM and may fuse the epilogue into one
  pointwise kernel (or, with `max-autotune`, into a GEMM template of its own).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from backends.torch import BACKEND, DEVICES
from backends.torch.compiler import compiled
from suite.core.registry import Launcher, kernels


def _library(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    epilogue = params["epilogue"] == "bias_gelu"
    mid = torch.empty_like(out) if epilogue else out
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            if epilogue:
                torch.addmm(bias, a, b, out=mid)
                torch.ops.aten.gelu.out(mid, approximate="tanh", out=out)
            else:
                torch.matmul(a, b, out=out)

    return launch


def _eager(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    epilogue = params["epilogue"] == "bias_gelu"
    product, shifted = (torch.empty_like(out), torch.empty_like(out)) if epilogue else (out, out)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            torch.mm(a, b, out=product)
            if epilogue:
                torch.add(product, bias, out=shifted)
                torch.ops.aten.gelu.out(shifted, approximate="tanh", out=out)

    return launch


def _compiled(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    epilogue = params["epilogue"] == "bias_gelu"

    def matmul(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, c: torch.Tensor) -> None:
        product = torch.mm(a, b)
        c.copy_(F.gelu(product + bias, approximate="tanh") if epilogue else product)

    args = (inputs["a"], inputs["b"], inputs["bias"], out)
    return compiled(matmul, args, out, opts, BACKEND.launch_stream(opts.get("stream")))


kernels("matmul", backend="torch", device=DEVICES, library=_library, eager=_eager, compiled=_compiled)
