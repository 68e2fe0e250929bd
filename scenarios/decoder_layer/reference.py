"""The decoder layer computed by NumPy from its ops' own definitions, in two precisions.

`forward` writes the chain once, over an `Arithmetic`: `FLOAT64` is the reference (each op the float64 reference
of its family, the GEMMs in float64 a block of columns at a time, so that no float64 copy of a whole weight
exists), and `storage(dtype)` is the chain as the unfused kernels compute it, float32 arithmetic with every
stored activation rounded to the case's dtype (each op its family's own emulation), which sets the tolerance.

With the head, the chain goes on through the final add + RMSNorm into the linear_cross_entropy family's loss: in
float64 its reference (the logits a block of W's columns at a time, so that neither the float64 logits nor a
float64 copy of the LM head's weight exists at a model's vocabulary), in storage the same blocks rounded to the
case's dtype, as that family's tolerance rounds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scenarios.add_rmsnorm import emulate_add_rmsnorm
from scenarios.attention import storage_precision
from scenarios.cross_entropy.blocked import mean_loss_by_columns, spans
from scenarios.decoder_layer.chain import HEAD, head, op_params
from scenarios.rope.scenario import emulate as emulate_rope
from scenarios.swiglu.scenario import emulate as emulate_swiglu
from suite.core.scenario import Params, get

BLOCK = 1 << 22
"""Elements of a weight the float64 GEMM converts at once (32 MiB)."""

OpFn = Callable[[dict[str, np.ndarray], Params], np.ndarray]
"""One op of the chain: its family's inputs (by the family's names) and params -> its family's output."""


@dataclass(frozen=True)
class Arithmetic:
    """How each step of `forward` is computed."""

    gemm: Callable[[np.ndarray, np.ndarray], np.ndarray]
    add_rmsnorm: OpFn
    rope: OpFn
    attention: OpFn
    swiglu: OpFn
    head: OpFn
    """linear_cross_entropy's inputs (hidden, weight, targets) -> the mean token loss, shape (1,)."""


def gemm64(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a · w in float64, w converted a block of columns at a time."""
    a, out = a.astype(np.float64), np.empty((a.shape[0], w.shape[1]))
    step = max(1, BLOCK // w.shape[0])
    for c in range(0, w.shape[1], step):
        out[:, c : c + step] = a @ w[:, c : c + step].astype(np.float64)
    return out


FLOAT64 = Arithmetic(
    gemm=gemm64,
    add_rmsnorm=lambda inputs, p: get("add_rmsnorm").reference(inputs, p),
    rope=lambda inputs, p: get("rope").reference(inputs, p),
    attention=lambda inputs, p: get("attention").reference(inputs, p),
    swiglu=lambda inputs, p: get("swiglu").reference(inputs, p),
    head=lambda inputs, p: get(HEAD).reference(inputs, p),
)


def stored_loss(inputs: dict[str, np.ndarray], dtype: str) -> np.ndarray:
    """The mean loss from logits rounded to `dtype` (through float32), a block of W's columns at a time."""
    x, w = inputs["hidden"].astype(np.float64), inputs["weight"]
    blocks = (
        (a, (x @ w[:, a:b].astype(np.float64)).astype(np.float32).astype(dtype).astype(np.float64))
        for a, b in spans(w.shape[1], (x.shape[0] + x.shape[1]) * 8 * 2)
    )
    return np.array([mean_loss_by_columns(blocks, inputs["targets"])], dtype)


def storage(dtype: str) -> Arithmetic:
    """float32 arithmetic, every op's output stored in `dtype` (the GEMMs' too), as each family emulates its own."""
    return Arithmetic(
        gemm=lambda a, w: (a.astype(np.float32) @ w.astype(np.float32)).astype(dtype),
        add_rmsnorm=lambda inputs, p: emulate_add_rmsnorm(inputs, dtype),
        rope=lambda inputs, p: emulate_rope(inputs, p["pairing"], dtype),
        attention=lambda inputs, p: storage_precision(inputs, p, dtype).astype(dtype),
        swiglu=lambda inputs, p: emulate_swiglu(inputs, dtype),
        head=lambda inputs, p: stored_loss(inputs, dtype),
    )


def forward(inputs: dict[str, np.ndarray], params: Params, how: Arithmetic) -> np.ndarray:
    """The case's output: the layer's [h2, down] (2, tokens, hidden), or with the head the loss (1,)."""
    return run(inputs, params, how)[0]


def run(inputs: dict[str, np.ndarray], params: Params, how: Arithmetic) -> tuple[np.ndarray, dict | None]:
    """(the case's output, the head's inputs by linear_cross_entropy's names, or None without the head)."""
    h2, down = layer(inputs, params, how)
    if not head(params):
        return np.stack([h2, down]), None
    ops = op_params(params)
    _, y3 = how.add_rmsnorm({"x": down, "residual": h2, "weight": inputs["norm_f"]}, ops["add_rmsnorm"])
    lm = {"hidden": y3, "weight": inputs["w_lm"], "targets": inputs["targets"]}
    return how.head(lm, ops[HEAD]), lm


def layer(inputs: dict[str, np.ndarray], params: Params, how: Arithmetic) -> tuple[np.ndarray, np.ndarray]:
    """The layer's h2 and down, the chain of `chain`'s docstring without its copies (a layout changes no
    value)."""
    t, heads, d, ops = params["tokens"], params["heads"], params["head_dim"], op_params(params)

    def heads_major(x: np.ndarray) -> np.ndarray:
        """(1, T, n, d) -> (1, n, T, d); K and V keep their kv_heads heads (the family's reference groups them)."""
        return x.transpose(0, 2, 1, 3)

    h1, y1 = how.add_rmsnorm(
        {"x": inputs["x"], "residual": inputs["residual"], "weight": inputs["norm1"]}, ops["add_rmsnorm"]
    )
    q, k, v = (how.gemm(y1, inputs[w]).reshape(1, t, -1, d) for w in ("wq", "wk", "wv"))
    qk = how.rope({"q": q, "k": k, "cos": inputs["cos"], "sin": inputs["sin"]}, ops["rope"])
    qkv = {"q": heads_major(qk[:, :, :heads]), "k": heads_major(qk[:, :, heads:]), "v": heads_major(v)}
    o = how.attention(qkv, ops["attention"])
    a = how.gemm(o[0].transpose(1, 0, 2).reshape(t, heads * d), inputs["wo"])
    h2, y2 = how.add_rmsnorm({"x": a, "residual": h1, "weight": inputs["norm2"]}, ops["add_rmsnorm"])
    m = how.swiglu({"a": how.gemm(y2, inputs["w_gate"]), "b": how.gemm(y2, inputs["w_up"])}, ops["swiglu"])
    return h2, how.gemm(m, inputs["w_down"])
