"""Normalization's canonical decomposition as torch ops: variant `eager` walks it into buffers, `compiled` traces it.

Each `Step` of `scenarios.normalization.DECOMPOSITIONS` is one torch op reading the tensors it names and writing
its own, so eager runs exactly the kernels the hand-written unfused variants run: matrices stored in the case's
dtype, row statistics in float32 (reductions accumulate in float32 through `dtype=`). Where torch has no single
op for a step, the step's matrix pass is one op and what remains works on the rows-long statistic only: the row
mean of squares is `vector_norm` squared over cols, `normalize` takes rsqrt of the statistic first. Those
extra kernels touch rows·4 bytes each, nothing beside the matrix passes the ledger counts. A row max is stored
in the case's dtype (exact for any float) because torch's `amax` keeps its input's dtype.

Compiled runs the same ops, functionally, through torch.compile, writing the suite's output.
"""

from __future__ import annotations

from typing import Any

import torch

from backends.torch import BACKEND
from backends.torch.compiler import compiled
from scenarios.normalization import DECOMPOSITIONS, EPS
from scenarios.normalization.decomposition import ROW_STATS
from suite.core.decomposition import walk
from suite.core.registry import Launcher

F32 = torch.float32


def step(op: str, v: torch.Tensor, stat: torch.Tensor | None, env: dict[str, Any], out: torch.Tensor | None) -> Any:
    """One step on matrix `v` (and the row statistic `stat`, shaped (rows, 1)), into `out` when given."""
    cols = v.shape[-1]
    if op == "mean":
        return torch.mean(v, -1, dtype=F32, out=out)
    if op == "sum":
        return torch.sum(v, -1, dtype=F32, out=out)
    if op == "mean_square":
        norm = torch.linalg.vector_norm(v, 2, -1, dtype=F32, out=out)
        return norm.square_().div_(cols) if out is not None else norm.square() / cols
    if op == "max":
        return torch.amax(v, -1, out=out)
    assert stat is not None or op in ("exp", "scale", "scale_shift")
    if op in ("center", "shift"):
        return torch.sub(v, stat, out=out)
    if op == "normalize":
        return torch.mul(v, torch.rsqrt(stat + EPS), out=out)
    if op == "divide":
        return torch.mul(v, stat.reciprocal(), out=out)
    if op == "exp":
        return torch.exp(v, out=out)
    if op == "scale":
        return torch.mul(v, env["weight"], out=out)
    return torch.addcmul(env["bias"], v, env["weight"], out=out)


def _apply(st: Any, env: dict[str, Any], out: torch.Tensor | None) -> Any:
    stat = env[st.reads[1]][:, None] if len(st.reads) > 1 and st.reads[1] in ROW_STATS else None
    return step(st.op, env[st.reads[0]], stat, env, out)


def eager(op: str, inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    """One torch op per step, each writing a buffer allocated here (the last writes the suite's output)."""
    x = inputs["x"]
    env: dict[str, Any] = {**inputs, "y": out}
    stat = lambda dtype=F32: torch.empty(x.shape[0], dtype=dtype, device=x.device)
    if op == "softmax":  # the row max keeps x's dtype (see the module docstring)
        env["max"] = stat(x.dtype)
    steps = list(walk(DECOMPOSITIONS[op], env, stats=ROW_STATS, stat=stat, matrix=lambda: torch.empty_like(x)))
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            for st in steps:
                _apply(st, env, env[st.writes])

    return launch


def compiled_variant(op: str, inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    """The same steps, functionally, through torch.compile; the result is written into the output."""
    names = tuple(inputs)
    steps = DECOMPOSITIONS[op]

    def decomposition(*args: torch.Tensor) -> None:
        env: dict[str, Any] = dict(zip(names, args[:-1], strict=True))
        for st in steps:
            env[st.writes] = _apply(st, env, None)
        args[-1].copy_(env["y"])

    args = (*inputs.values(), out)
    return compiled(decomposition, args, out, opts, BACKEND.launch_stream(opts.get("stream")))
