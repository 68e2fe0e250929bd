"""Attention in torch: `library` (scaled_dot_product_attention), `eager` (scores → masked softmax → P·V as torch
ops) and `compiled` (the same ops through torch.compile).

- library: on a GPU torch picks a flash or memory-efficient kernel; on the CPU its fused flash-attention
  kernel; `enable_gqa=True` lets it read a K/V head for its whole group of query heads (kv_heads < heads).
  SDPA has no `out=`, so the launcher copies the result into the suite's output: one extra read and
  write of O, small beside the K and V traffic, and the same on both devices. The ledger credits it with the
  least any implementation must move: q, k, v read once and O written once.
- eager: with fewer K/V heads than query heads, K and V are first expanded to one per query head on every call,
  as model code does (Hugging Face's `repeat_kv`, i.e. `repeat_interleave` on dim 1), into buffers allocated
  here; with as many, nothing is copied (`repeat_kv` returns its input). Then the unfused decomposition with S
  and P (L×L per head, the case's dtype) in buffers allocated here: S = Q·Kᵀ/√d in one batched matmul
  (`baddbmm`, the scale applied as its alpha), the causal mask as one more pass over S (`masked_fill_`),
  P = softmax(S), O = P·V written into the output. The library computes every score, masked or not, so the
  ledger counts L² per head for eager (and the mask's pass when causal).
- compiled: the same ops (the expansion included), functionally; Inductor may keep the L² scores in memory or
  match the pattern to its own fused attention, and the row's `extra.compiler` says which.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from backends.torch import BACKEND, DEVICES
from backends.torch.compiler import compiled
from suite.core.registry import Launcher, kernels


def _library(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    causal = bool(params["causal"])
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream(), torch.no_grad():
            out.copy_(F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True))

    return launch


def _mask(params: dict, device: torch.device) -> torch.Tensor | None:
    """True above the diagonal (keys after the query) when causal; None otherwise."""
    if not params["causal"]:
        return None
    seq_len = params["seq_len"]
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)


def _expansion(kv: torch.Tensor, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(source, buffer): a K or V of kv_heads heads as a broadcast view over its query heads, and the buffer of
    `heads` heads that copying it fills with what `kv.repeat_interleave(heads // kv_heads, dim=1)` returns."""
    batch, kv_heads, seq_len, head_dim = kv.shape
    view = kv[:, :, None].expand(batch, kv_heads, heads // kv_heads, seq_len, head_dim)
    return view, torch.empty(view.shape, dtype=kv.dtype, device=kv.device)


def _eager(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    batch, heads, seq_len, head_dim = q.shape
    n = batch * heads
    copies = [_expansion(k, heads), _expansion(v, heads)] if k.shape[1] < heads else []
    if copies:
        k, v = (buffer for _, buffer in copies)
    q3, kt, v3 = (
        q.reshape(n, seq_len, head_dim),
        k.reshape(n, seq_len, head_dim).transpose(1, 2),
        v.reshape(n, seq_len, head_dim),
    )
    scores = torch.empty((n, seq_len, seq_len), dtype=q.dtype, device=q.device)
    probs, o3 = torch.empty_like(scores), out.view(n, seq_len, head_dim)
    zero, mask, scale = (
        torch.zeros((), dtype=q.dtype, device=q.device),
        _mask(params, q.device),
        1 / math.sqrt(head_dim),
    )
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            for source, buffer in copies:
                buffer.copy_(source)
            torch.baddbmm(zero, q3, kt, beta=0, alpha=scale, out=scores)
            if mask is not None:
                scores.masked_fill_(mask, float("-inf"))
            torch.ops.aten._softmax.out(scores, -1, False, out=probs)
            torch.bmm(probs, v3, out=o3)

    return launch


def _compiled(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    q = inputs["q"]
    mask, scale = _mask(params, q.device), 1 / math.sqrt(q.shape[-1])

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor) -> None:
        group = q.shape[1] // k.shape[1]
        if group > 1:  # as model code expands K and V (repeat_kv); the compiler may fuse the copy away
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        s = torch.matmul(q, k.transpose(-2, -1)) * scale
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        o.copy_(torch.matmul(torch.softmax(s, dim=-1), v))

    args = (inputs["q"], inputs["k"], inputs["v"], out)
    return compiled(attention, args, out, opts, BACKEND.launch_stream(opts.get("stream")))


kernels("attention", backend="torch", device=DEVICES, library=_library, eager=_eager, compiled=_compiled)
