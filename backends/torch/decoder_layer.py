"""The decoder layer as model code writes it in torch (`eager`), and that code through torch.compile (`compiled`).

The composed variants run the registry's kernels op by op; these rows are what a user has instead: the layer
written once as torch ops, Llama's way (Hugging Face's `LlamaDecoderLayer`, pre-norm, grouped-query):

    h1 = x + residual; y1 = rms_norm(h1)·norm1         (F.rms_norm, the add_rmsnorm family's eps and formula)
    q, k, v = y1 @ wq, y1 @ wk, y1 @ wv, viewed as heads and transposed to (1, heads, T, d): views, no copy
    q', k' = q·cos + rotate(q)·sin, likewise k         (the tables widened to a head, as the rope family pairs)
    o = F.scaled_dot_product_attention(q', k', v, is_causal=True, enable_gqa=True)
    a = o transposed back to (T, heads·d) @ wo;  h2 = a + h1;  y2 = rms_norm(h2)·norm2
    down = (silu(y2 @ w_gate) · (y2 @ w_up)) @ w_down

and with the model's head (`lm_head`), as a causal LM's forward pass ends it:

    y3 = rms_norm(down + h2)·norm_f;  loss = F.cross_entropy(y3 @ w_lm, targets)   (every token's logits)

`eager` runs it op by op, writing h2 and down straight into the output (`out=`), so no copy of the result is
timed; with the head, the loss is copied into the output (one value). `compiled` is the whole function through torch.compile (`backends.torch.compiler`: compiled on the first
call, outside the timed region), the compiler free to fuse across every op boundary the composed layer keeps; as
every compiled row, it copies its results into the output, which Inductor folds into the kernels that make them.
Both on the CPU and CUDA, wherever torch runs.
"""

from __future__ import annotations

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


def _attention_block(w: dict[str, torch.Tensor], params: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, h1): the O projection's output and the residual stream after the first add."""
    t, hidden = w["x"].shape
    heads, kv, d = params["heads"], params["kv_heads"], params["head_dim"]
    h1 = w["x"] + w["residual"]
    y1 = F.rms_norm(h1, (hidden,), w["norm1"], EPS)
    q = (y1 @ w["wq"]).view(1, t, heads, d).transpose(1, 2)
    k = (y1 @ w["wk"]).view(1, t, kv, d).transpose(1, 2)
    v = (y1 @ w["wv"]).view(1, t, kv, d).transpose(1, 2)
    cos, sin = _widen(w["cos"], params["rope_pairing"]), _widen(w["sin"], params["rope_pairing"])
    q = q * cos + _rotate(q, params["rope_pairing"]) * sin
    k = k * cos + _rotate(k, params["rope_pairing"]) * sin
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return o.transpose(1, 2).reshape(t, heads * d) @ w["wo"], h1


def _mlp(y2: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """silu(y2 @ w_gate) · (y2 @ w_up), before the down projection."""
    return F.silu(y2 @ w["w_gate"]) * (y2 @ w["w_up"])


def _head(h2: torch.Tensor, down: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """The final add + RMSNorm, the LM head's logits and their mean token loss (a 0-d tensor)."""
    y3 = F.rms_norm(down + h2, (h2.shape[-1],), w["norm_f"], EPS)
    return F.cross_entropy(y3 @ w["w_lm"], w["targets"], ignore_index=IGNORE_INDEX)


def _eager(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launcher:
    hidden, on_stream = params["hidden"], BACKEND.launch_stream(opts.get("stream"))

    def layer() -> None:
        a, h1 = _attention_block(inputs, params)
        h2 = torch.add(a, h1, out=out[0])
        torch.matmul(_mlp(F.rms_norm(h2, (hidden,), inputs["norm2"], EPS), inputs), inputs["w_down"], out=out[1])

    def with_head() -> None:
        a, h1 = _attention_block(inputs, params)
        h2 = a + h1
        down = _mlp(F.rms_norm(h2, (hidden,), inputs["norm2"], EPS), inputs) @ inputs["w_down"]
        out.copy_(_head(h2, down, inputs).reshape(1))

    run = with_head if head(params) else layer

    def launch() -> None:
        with on_stream(), torch.no_grad():
            run()

    return launch


def _compiled(inputs: dict[str, Any], out: torch.Tensor, params: dict, opts: dict) -> Launch:
    case = {k: params[k] for k in ("heads", "kv_heads", "head_dim", "rope_pairing")}
    names, with_head = inputs_of(params), head(params)

    def layer(*args: torch.Tensor) -> None:
        w, y = dict(zip(names, args[:-1], strict=True)), args[-1]
        a, h1 = _attention_block(w, case)
        h2 = a + h1
        down = _mlp(F.rms_norm(h2, (h2.shape[-1],), w["norm2"], EPS), w) @ w["w_down"]
        if with_head:
            y.copy_(_head(h2, down, w).reshape(1))
        else:
            y[0].copy_(h2)
            y[1].copy_(down)

    args = (*(inputs[name] for name in names), out)
    return compiled(layer, args, out, opts, BACKEND.launch_stream(opts.get("stream")))


kernels("decoder_layer", backend="torch", device=DEVICES, eager=_eager, compiled=_compiled)
