"""Liger's rope (`liger_kernel.ops.rope`, behind `LigerRopeFunction`) as rope's `library` row on CUDA.

Liger rotates q and k in place: one program per token runs every query and key head of it, half pairing only
(Hugging Face's rotate_half; an interleaved case is `Unsupported`). The suite's inputs must stay unchanged, so
each call first copies q and k into their heads of the output and Liger's kernel rotates them there: the row
moves the tensors twice (the ledger's `library` counts the copy), where a model rotating its projection's output
in place moves them once. Its tables are the suite's (seq_len, head_dim/2) ones, passed with `rotary_dim =
head_dim` (Liger then reads head_dim/2 values a position, as it does from Hugging Face's widened tables).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from backends.liger import BACKEND, bfloat16_arithmetic
from suite.core.registry import Launcher, Unsupported, kernel


def rope_args(q: Any, q_stride: int, k: Any, k_stride: int, cos: Any, sin: Any) -> tuple:
    """`_triton_rope`'s arguments as Liger's rope launches it, on q (batch, seq_len, heads, d) and k (…, kv heads, d),
    each given with its row stride (a slice of the suite's output keeps the whole row's): rotated in place."""
    import triton

    batch, seq_len, heads, d = q.shape
    kv, pad = k.shape[2], triton.next_power_of_2
    return (q, q_stride, k, k_stride, cos, cos.stride(0), sin, sin.stride(0), seq_len, batch, 1, heads, kv, d,
            pad(heads), pad(kv), pad(d), pad(d), d)  # fmt: skip


def rotation(q: Any, q_stride: int, k: Any, k_stride: int, cos: Any, sin: Any) -> Callable[[], None]:
    """Liger's rope kernel rotating q and k in place (as `rope_args` takes them), its arguments built once: the
    rope row's launch after its copies, and the rotation of a model's q and k (`backends.liger.decoder_layer`)."""
    import triton
    from liger_kernel.ops.rope import _triton_rope

    batch, seq_len, heads, _ = q.shape
    grid, block = (batch * seq_len,), max(triton.next_power_of_2(heads), triton.next_power_of_2(k.shape[2]))
    args = rope_args(q, q_stride, k, k_stride, cos, sin)
    return lambda: _triton_rope[grid](*args, BLOCK_SIZE=block, BACKWARD_PASS=False)


def half_only(pairing: str) -> None:
    """Raise `Unsupported` for a pairing other than Liger's."""
    if pairing != "half":
        raise Unsupported(f"Liger's rope pairs value j with j + head_dim/2 (half) only, not {pairing}")


@kernel(scenario="rope", backend="liger", variant="library", device="cuda")
def library(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    half_only(params["pairing"])
    bfloat16_arithmetic("rope", out.dtype)
    q, k, cos, sin = inputs["q"], inputs["k"], inputs["cos"], inputs["sin"]
    heads = q.shape[2]
    q_out, k_out = out[:, :, :heads], out[:, :, heads:]
    rotate = rotation(q_out, out.stride(1), k_out, out.stride(1), cos, sin)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            q_out.copy_(q)
            k_out.copy_(k)
            rotate()

    return launch
