"""The decoder layer computed by NumPy from its ops' own definitions, in two precisions.

`forward` writes the chain once, over an `Arithmetic`: `FLOAT64` is the reference (each op the float64 reference
of its family, the GEMMs in float64 a block of columns at a time, so that no float64 copy of a whole weight
exists), and `storage(dtype)` is the chain as the unfused kernels compute it, float32 arithmetic with every
stored activation rounded to the case's dtype (each op its family's own emulation), which sets the tolerance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scenarios.add_rmsnorm import emulate_add_rmsnorm
from scenarios.attention import storage_precision
from scenarios.decoder_layer.chain import op_params
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
)


def storage(dtype: str) -> Arithmetic:
    """float32 arithmetic, every op's output stored in `dtype` (the GEMMs' too), as each family emulates its own."""
    return Arithmetic(
        gemm=lambda a, w: (a.astype(np.float32) @ w.astype(np.float32)).astype(dtype),
        add_rmsnorm=lambda inputs, p: emulate_add_rmsnorm(inputs, dtype),
        rope=lambda inputs, p: emulate_rope(inputs, p["pairing"], dtype),
        attention=lambda inputs, p: storage_precision(inputs, p, dtype).astype(dtype),
        swiglu=lambda inputs, p: emulate_swiglu(inputs, dtype),
    )


def forward(inputs: dict[str, np.ndarray], params: Params, how: Arithmetic) -> np.ndarray:
    """The layer's output [h2, down] (2, tokens, hidden), the chain of `chain`'s docstring without its copies
    (a layout changes no value)."""
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
    return np.stack([h2, how.gemm(m, inputs["w_down"])])
