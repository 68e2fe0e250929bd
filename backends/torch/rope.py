"""Rope in torch: `eager` (the decomposition one torch op per step) and `compiled` (the same ops, Inductor).

torch has no rotary-embedding kernel of its own, so there is no `library` variant. Eager writes each step into
buffers allocated here, as the hand-written unfused kernels do: rotate(x) (a negation into one member of every
pair and a copy into the other: the model code's cat), x·cos, rotate(x)·sin, and the add into q's or k's heads
of out. The (seq_len, head_dim/2) tables broadcast over a view of each head as (pairs, 2) or (2, pairs), so
no widened table is made. Compiled runs Hugging Face's expression (x·cos + rotate_half(x)·sin, with the tables
widened by cat or repeat_interleave) through torch.compile, into out.
"""

from __future__ import annotations

from typing import Any

import torch

from backends.torch import BACKEND, DEVICES
from backends.torch.compiler import compiled
from suite.core.registry import Launcher, kernels


def _pairs(x: torch.Tensor, pairing: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The two members of every pair of x (..., head_dim), as views (..., head_dim/2)."""
    h = x.shape[-1] // 2
    if pairing == "half":
        return x[..., :h], x[..., h:]
    two = x.unflatten(-1, (h, 2))
    return two[..., 0], two[..., 1]


def _table(t: torch.Tensor) -> torch.Tensor:
    """(seq_len, head_dim/2) broadcast against (batch, seq_len, heads, head_dim/2)."""
    return t[:, None, :]


def _eager(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    pairing, heads = params["pairing"], params["heads"]
    cos, sin = _table(inputs["cos"]), _table(inputs["sin"])
    r, a, b = (torch.empty_like(inputs["q"]) for _ in range(3))  # sized for q, reused for k
    plan = []
    for name, part in (("q", out[:, :, :heads]), ("k", out[:, :, heads:])):
        x = inputs[name]
        views = [buf.view(-1)[: x.numel()].view(x.shape) for buf in (r, a, b)]
        plan.append((x, *views, part))
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            for x, rx, ax, bx, part in plan:
                x1, x2 = _pairs(x, pairing)
                r1, r2 = _pairs(rx, pairing)
                torch.neg(x2, out=r1)
                r2.copy_(x1)
                for src, dst, table in ((x, ax, cos), (rx, bx, sin)):
                    s1, s2 = _pairs(src, pairing)
                    d1, d2 = _pairs(dst, pairing)
                    torch.mul(s1, table, out=d1)
                    torch.mul(s2, table, out=d2)
                torch.add(ax, bx, out=part)

    return launch


def _compiled(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    pairing, heads = params["pairing"], params["heads"]

    def widen(t: torch.Tensor) -> torch.Tensor:
        wide = torch.cat([t, t], dim=-1) if pairing == "half" else torch.repeat_interleave(t, 2, dim=-1)
        return wide[:, None, :]

    def rotate(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = _pairs(x, pairing)
        if pairing == "half":
            return torch.cat([-x2, x1], dim=-1)
        return torch.stack([-x2, x1], dim=-1).flatten(-2)

    def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, y: torch.Tensor) -> None:
        c, s = widen(cos), widen(sin)
        y[:, :, :heads].copy_(q * c + rotate(q) * s)
        y[:, :, heads:].copy_(k * c + rotate(k) * s)

    args = (inputs["q"], inputs["k"], inputs["cos"], inputs["sin"], out)
    return compiled(rope, args, out, opts, BACKEND.launch_stream(opts.get("stream")))


kernels("rope", backend="torch", device=DEVICES, eager=_eager, compiled=_compiled)
