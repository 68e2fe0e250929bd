"""add_rmsnorm in torch: the decomposition op by op (`eager`), through torch.compile (`compiled`), and torch's
own kernels (`library`: the add, then `F.rms_norm` on h), on the CPU and CUDA.

Eager walks the family's steps: `torch.add` into h = out[0], then rmsnorm's steps as the rmsnorm family runs
them in torch (`normalization_steps.step`), intermediates in buffers allocated here, y = out[1]. Compiled is the
same steps, functionally, through torch.compile, copying h and y into the output. F.rms_norm has no out= form,
so the library's y is copied into out[1]: that copy is timed but not in the ledger (as for rmsnorm). torch has
no fused add + RMSNorm op; Liger's is the `liger` backend's.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from backends.torch import BACKEND, DEVICES
from backends.torch.compiler import compiled
from backends.torch.normalization_steps import step
from scenarios.add_rmsnorm import ROW_STATS, STEPS
from scenarios.normalization import EPS
from suite.core.decomposition import walk
from suite.core.registry import Launcher, kernels


def _apply(st: Any, env: dict[str, Any], out: torch.Tensor | None) -> Any:
    if st.op == "add":
        return torch.add(env["x"], env["residual"], out=out)
    stat = env[st.reads[1]][:, None] if len(st.reads) > 1 and st.reads[1] in ROW_STATS else None
    return step(st.op, env[st.reads[0]], stat, env, out)


def eager(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    """One torch op per step (a step torch has no single op for as the rmsnorm family's), into buffers."""
    x = inputs["x"]
    env: dict[str, Any] = {**inputs, "h": out[0], "y": out[1]}
    steps = list(
        walk(
            STEPS,
            env,
            stats=ROW_STATS,
            matrix=lambda: torch.empty_like(x),
            stat=lambda: torch.empty(x.shape[0], dtype=torch.float32, device=x.device),
        )
    )
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            for st in steps:
                _apply(st, env, env[st.writes])

    return launch


def compiled_variant(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    """The same steps, functionally, through torch.compile; h and y are copied into the output."""
    names = tuple(inputs)

    def decomposition(*args: torch.Tensor) -> None:
        env: dict[str, Any] = dict(zip(names, args[:-1], strict=True))
        for st in STEPS:
            env[st.writes] = _apply(st, env, None)
        args[-1][0].copy_(env["h"])
        args[-1][1].copy_(env["y"])

    return compiled(decomposition, (*inputs.values(), out), out, opts, BACKEND.launch_stream(opts.get("stream")))


def library(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    """torch.add into h, then torch's rms_norm of h copied into y."""
    x, res, w = inputs["x"], inputs["residual"], inputs["weight"]
    h, y, shape = out[0], out[1], (x.shape[-1],)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            torch.add(x, res, out=h)
            y.copy_(F.rms_norm(h, shape, w, EPS))

    return launch


kernels("add_rmsnorm", backend="torch", device=DEVICES, eager=eager, compiled=compiled_variant, library=library)
