"""Rope's torch rivals in the backward and train phases: autograd through the decomposition as torch ops.

`rope` is the forward of `backends.torch.rope`'s eager variant as a pure function: rotate(x) as Hugging Face's
rotate_half writes it (a neg of one member of every pair and a cat, or a stack for the interleaved pairing), x·cos,
rotate(x)·sin, the add, for q and then k, and a cat of q' and k' into y (autograd takes no `out=`, so the
forward-only variant's add into out's heads becomes this cat). The (seq_len, head_dim/2) tables broadcast over
each head viewed as (2, pairs) or (pairs, 2), so no widened table is made and MulBackward saves the input table
itself. `eager` differentiates it with eager autograd, `compiled` through torch.compile (AOTAutograd). torch has
no rotary-embedding op, so there is no `library` here (Liger's is CUDA only).

The pairing is a parameter of the case: the forward takes the case's params (`autograd_variants` hands them).
"""

from __future__ import annotations

from typing import Any

import torch

from backends.torch.rope import _pairs
from backends.torch.training import autograd_variants

WRT, UPSTREAM = ("q", "k"), ("dy",)


def _by_pair(x: torch.Tensor, pairing: str) -> torch.Tensor:
    """x (..., head_dim) viewed as (..., 2, pairs) or (..., pairs, 2): a table (seq_len, pairs) broadcasts over it."""
    h = x.shape[-1] // 2
    return x.unflatten(-1, (2, h) if pairing == "half" else (h, 2))


def _table(t: torch.Tensor, pairing: str) -> torch.Tensor:
    """(seq_len, pairs) against (batch, seq_len, heads, 2, pairs) or (batch, seq_len, heads, pairs, 2)."""
    return t[:, None, None, :] if pairing == "half" else t[:, None, :, None]


def rotate(x: torch.Tensor, pairing: str) -> torch.Tensor:
    """(x₁, x₂) -> (−x₂, x₁) for every pair: Hugging Face's rotate_half, or its interleaved form."""
    x1, x2 = _pairs(x, pairing)
    if pairing == "half":
        return torch.cat([-x2, x1], dim=-1)
    return torch.stack([-x2, x1], dim=-1).flatten(-2)


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, pairing: str) -> torch.Tensor:
    """x·cos + rotate(x)·sin for q and k, one torch op a step, q' and k' joined on the heads axis."""
    c, s = _table(cos, pairing), _table(sin, pairing)
    parts = []
    for x in (q, k):
        r = rotate(x, pairing)
        a = _by_pair(x, pairing) * c
        b = _by_pair(r, pairing) * s
        parts.append((a + b).flatten(-2))
    return torch.cat(parts, dim=2)


def rope_forward(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, params: dict) -> Any:
    """The forward of the case: its pairing from its params."""
    return rope(q, k, cos, sin, pairing=params["pairing"])


autograd_variants("rope", wrt=WRT, upstream=UPSTREAM, eager=rope_forward)
