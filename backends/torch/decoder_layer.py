"""The decoder layer as model code writes it in torch (`eager`), and that code through torch.compile (`compiled`).

The composed variants run the registry's kernels op by op; these rows are what a user has instead: the layer
written once as torch ops, Llama's way (Hugging Face's `LlamaDecoderLayer`, pre-norm, grouped-query):

    h1 = x + residual; y1 = rms_norm(h1)·norm1         (F.rms_norm, the add_rmsnorm family's eps and formula)
    q, k, v = y1 @ wq, y1 @ wk, y1 @ wv, viewed as heads (1, T, heads, d): views, no copy
    q', k' = q·cos + rotate(q)·sin, likewise k         (the tables widened to a head, as the rope family pairs)
    o = F.scaled_dot_product_attention(q', k', v, is_causal=True, enable_gqa=True), each transposed to
        (1, heads, T, d): views, no copy
    a = o transposed back to (T, heads·d) @ wo;  h2 = a + h1;  y2 = rms_norm(h2)·norm2
    down = (silu(y2 @ w_gate) · (y2 @ w_up)) @ w_down

and with the model's head (`lm_head`), as a causal LM's forward pass ends it:

    y3 = rms_norm(down + h2)·norm_f;  loss = F.cross_entropy(y3 @ w_lm, targets)   (every token's logits)

`eager` runs it op by op, writing h2 and down straight into the output (`out=`), so no copy of the result is
timed; with the head, the loss is copied into the output (one value). `compiled` is the whole function through torch.compile (`backends.torch.compiler`: compiled on the first
call, outside the timed region), the compiler free to fuse across every op boundary the composed layer keeps; as
every compiled row, it copies its results into the output, which Inductor folds into the kernels that make them.
Both on the CPU and CUDA, wherever torch runs.

The ops a kernel library replaces in model code (the add and RMSNorm, the rotation, the MLP's activation) are an
`Ops` value the eager layer is given, torch's own by default: a library patches its kernels in by passing its own
(`backends/liger/decoder_layer.py`, as Liger's `apply_liger_kernel_to_llama` swaps a model's modules), every other
line of the layer unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from backends.torch import BACKEND, DEVICES
from backends.torch.compiler import compiled
from scenarios.cross_entropy import IGNORE_INDEX
from scenarios.decoder_layer.chain import head, inputs_of
from scenarios.normalization import EPS
from suite.core.registry import Launch, Launcher, kernels


def _widen(table: torch.Tensor, pairing: str) -> torch.Tensor:
    """A (T, d/2) table to every value of a head, (T, d): each pair's angle on both of its members."""
    return torch.cat([table, table], dim=-1) if pairing == "half" else torch.repeat_interleave(table, 2, dim=-1)


def _rotate(x: torch.Tensor, pairing: str) -> torch.Tensor:
    """(x1, x2) -> (−x2, x1) for every pair: rotate_half (half) or its interleaved form."""
    if pairing == "half":
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([-x2, x1], dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([-x2, x1], dim=-1).flatten(-2)


@dataclass(frozen=True)
class Ops:
    """The layer's ops that a kernel library patches into model code; `TORCH`: model code's own."""

    add_norm: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    """(a, b, γ, h=None) -> (h, y): h = a + b (into `h` where given: the layer's output), y = rms_norm(h)·γ."""
    rope: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, str], tuple[torch.Tensor, torch.Tensor]]
    """(q, k, cos, sin, pairing) -> (q', k'): q and k token-major (1, T, heads, d), as the projections made them;
    the (T, d/2) tables."""
    act: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    """(gate, up) -> silu(gate)·up."""


def _add_norm(
    a: torch.Tensor, b: torch.Tensor, weight: torch.Tensor, h: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    h = a + b if h is None else torch.add(a, b, out=h)
    return h, F.rms_norm(h, (h.shape[-1],), weight, EPS)


def _rope(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str
) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin = _widen(cos, pairing).unsqueeze(1), _widen(sin, pairing).unsqueeze(1)  # (T, 1, d): every head
    return q * cos + _rotate(q, pairing) * sin, k * cos + _rotate(k, pairing) * sin


def _silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


TORCH = Ops(_add_norm, _rope, _silu_mul)


def _attention_block(w: dict[str, torch.Tensor], params: dict, ops: Ops) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, h1): the O projection's output and the residual stream after the first add."""
    t = w["x"].shape[0]
    heads, kv, d = params["heads"], params["kv_heads"], params["head_dim"]
    h1, y1 = ops.add_norm(w["x"], w["residual"], w["norm1"])
    q = (y1 @ w["wq"]).view(1, t, heads, d)
    k = (y1 @ w["wk"]).view(1, t, kv, d)
    v = (y1 @ w["wv"]).view(1, t, kv, d).transpose(1, 2)
    q, k = ops.rope(q, k, w["cos"], w["sin"], params["rope_pairing"])
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v, is_causal=True, enable_gqa=True)
    return o.transpose(1, 2).reshape(t, heads * d) @ w["wo"], h1


def _head(h2: torch.Tensor, down: torch.Tensor, w: dict[str, torch.Tensor], ops: Ops) -> torch.Tensor:
    """The final add + RMSNorm, the LM head's logits and their mean token loss (a 0-d tensor)."""
    _, y3 = ops.add_norm(down, h2, w["norm_f"])
    return F.cross_entropy(y3 @ w["w_lm"], w["targets"], ignore_index=IGNORE_INDEX)


def layer(inputs: dict[str, torch.Tensor], out: torch.Tensor, params: dict, ops: Ops = TORCH) -> None:
    """The layer once, as model code runs it with `ops`: h2 into out[0] and down into out[1] (`out=`, no copy);
    with the head, its loss into out."""
    a, h1 = _attention_block(inputs, params, ops)
    if head(params):
        h2, y2 = ops.add_norm(a, h1, inputs["norm2"])
        down = ops.act(y2 @ inputs["w_gate"], y2 @ inputs["w_up"]) @ inputs["w_down"]
        out.copy_(_head(h2, down, inputs, ops).reshape(1))
        return
    _, y2 = ops.add_norm(a, h1, inputs["norm2"], out[0])
    torch.matmul(ops.act(y2 @ inputs["w_gate"], y2 @ inputs["w_up"]), inputs["w_down"], out=out[1])


def _eager(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream(), torch.no_grad():
            layer(inputs, out, params)

    return launch


def _compiled(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launch:
    case = {k: params[k] for k in ("heads", "kv_heads", "head_dim", "rope_pairing")}
    names, with_head = inputs_of(params), head(params)

    def whole(*args: torch.Tensor) -> None:
        w, y = dict(zip(names, args[:-1], strict=True)), args[-1]
        a, h1 = _attention_block(w, case, TORCH)
        h2, y2 = _add_norm(a, h1, w["norm2"])
        down = _silu_mul(y2 @ w["w_gate"], y2 @ w["w_up"]) @ w["w_down"]
        if with_head:
            y.copy_(_head(h2, down, w, TORCH).reshape(1))
        else:
            y[0].copy_(h2)
            y[1].copy_(down)

    args = (*(inputs[name] for name in names), out)
    return compiled(whole, args, out, opts, BACKEND.launch_stream(opts.get("stream")))


kernels("decoder_layer", backend="torch", device=DEVICES, eager=_eager, compiled=_compiled)
