"""Matmul with torch: `torch.matmul` (cuBLAS on a GPU, oneDNN/MKL on the CPU) and torch's gelu, as `library`.

With the epilogue, A·B is stored in the case's dtype (as every backend's unfused intermediate is), the bias
is added in place and `gelu(approximate="tanh")` writes the output: two elementwise kernels where the ledger
counts one, which is what eager torch costs without a compiler. float32 products are full float32 on both
devices: TF32 is off unless torch.backends.cuda.matmul.allow_tf32 is set, which this module never does.
"""

from __future__ import annotations

from typing import Any

import torch

from backends.torch import BACKEND
from suite.core.registry import Launcher, kernel


def _library(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    epilogue = params["epilogue"] == "bias_gelu"
    mid = torch.empty_like(out) if epilogue else out
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            torch.matmul(a, b, out=mid)
            if epilogue:
                mid.add_(bias)
                torch.ops.aten.gelu.out(mid, approximate="tanh", out=out)

    return launch


kernel(scenario="matmul", backend="torch", variant="library", device="cpu")(_library)
kernel(scenario="matmul", backend="torch", variant="library", device="cuda")(_library)
