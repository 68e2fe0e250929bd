"""torch's layer_norm, rms_norm and softmax as variant `library` of the normalization family, CPU and CUDA, beside
the decomposition in torch ops (`eager`) and through torch.compile (`compiled`, see `normalization_steps`).

Each writes straight into the suite's output where torch has an out= form: `native_layer_norm.out` (its mean
and rstd go to buffers allocated here) and `_softmax.out`. rms_norm has none, so its result is copied into
the output: that copy (N·s read, N·s written) is in the measured time but not in the ledger, which gives the
library the fused variant's minimal traffic. On the CPU torch 2.13's rms_norm is itself a composite of
pow/mean/add/rsqrt/mul kernels; on CUDA it is one fused kernel.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from backends.torch import BACKEND, DEVICES
from backends.torch.normalization_steps import compiled_variant, eager
from scenarios.normalization import EPS
from suite.core.registry import Launcher, kernels


def layernorm(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    shape = (x.shape[-1],)
    on_stream = BACKEND.launch_stream(opts.get("stream"))
    with on_stream():
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, shape, w, b, EPS)  # shapes and dtypes of the stats
    mean, rstd = torch.empty_like(mean), torch.empty_like(rstd)

    def launch() -> None:
        with on_stream():
            torch.ops.aten.native_layer_norm.out(x, shape, w, b, EPS, out0=out, out1=mean, out2=rstd)

    return launch


def rmsnorm(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    x, w = inputs["x"], inputs["weight"]
    shape = (x.shape[-1],)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            out.copy_(F.rms_norm(x, shape, w, EPS))

    return launch


def softmax(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    x = inputs["x"]
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            torch.ops.aten._softmax.out(x, -1, False, out=out)

    return launch


LIBRARY = {"layernorm": layernorm, "rmsnorm": rmsnorm, "softmax": softmax}


def library(op: str, inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """torch's own kernel for `op`."""
    return LIBRARY[op](inputs, out, params, opts)


kernels(LIBRARY, backend="torch", device=DEVICES, library=library, eager=eager, compiled=compiled_variant)
