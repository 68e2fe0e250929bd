"""The elementwise chain in torch: `eager` (one torch op per chain op) and `compiled` (the same ops, Inductor).

Eager stores each intermediate in the chain's dtype into a buffer allocated here, as the hand-written unfused
kernels do; the last op writes the suite's output. Compiled runs the same ops through torch.compile, which fuses
the chain into one loop writing the output. gelu is torch's tanh form (one kernel), whose constant √(2/π)
agrees with the scenario's 0.7978845608 to 4e-12, far below float32 rounding; every other constant is the
scenario's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from backends.torch import BACKEND, DEVICES
from backends.torch.compiler import compiled
from scenarios.elementwise_chain.ops import OPS
from suite.core.registry import Launcher, kernels

Op = Callable[[torch.Tensor, "torch.Tensor | None"], torch.Tensor]

TORCH_OPS: dict[str, Op] = {
    "scale": lambda v, out: torch.mul(v, 1.25, out=out) if out is not None else v * 1.25,
    "shift": lambda v, out: torch.add(v, 0.5, out=out) if out is not None else v + 0.5,
    "relu": lambda v, out: torch.clamp_min(v, 0.0, out=out) if out is not None else torch.relu(v),
    "square": lambda v, out: torch.mul(v, v, out=out) if out is not None else v * v,
    "tanh": lambda v, out: torch.tanh(v, out=out) if out is not None else torch.tanh(v),
    "sigmoid": lambda v, out: torch.sigmoid(v, out=out) if out is not None else torch.sigmoid(v),
    "silu": lambda v, out: torch.ops.aten.silu.out(v, out=out) if out is not None else torch.nn.functional.silu(v),
    "gelu": lambda v, out: (
        torch.ops.aten.gelu.out(v, approximate="tanh", out=out)
        if out is not None
        else torch.nn.functional.gelu(v, approximate="tanh")
    ),
}
"""Each op of the scenario's table (`OPS`) as one torch op, into `out` where given (eager) or as a new tensor."""
assert set(TORCH_OPS) == set(OPS)


def _eager(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    x, ops = inputs["x"], list(params["ops"])
    buffers = [torch.empty_like(out) for _ in ops[:-1]] + [out]
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            v = x
            for op, buf in zip(ops, buffers, strict=True):
                v = TORCH_OPS[op](v, buf)

    return launch


def _compiled(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    ops = tuple(params["ops"])

    def chain(x: torch.Tensor, y: torch.Tensor) -> None:
        v = x
        for op in ops:
            v = TORCH_OPS[op](v, None)
        y.copy_(v)

    return compiled(chain, (inputs["x"], out), out, opts, BACKEND.launch_stream(opts.get("stream")))


kernels("elementwise_chain", backend="torch", device=DEVICES, eager=_eager, compiled=_compiled)
