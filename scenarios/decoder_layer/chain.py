"""The decoder layer's chain: its ops, the variant each layer variant picks for each, and the steps on buffers.

Four families are fusable ops of the layer; every other step is a library GEMM or a layout copy, the same in
every variant. `steps` lays the whole chain out on buffers the backend allocates (`empty`) and launchers it
builds (`gemm`, `copy`), so a backend serves the layer by saying how it multiplies, copies and allocates; the
ops themselves are looked up in the registry (`suite.kit.layer.compose`).

Buffers, for one sequence of T tokens (batch 1), H = hidden, nh/nkv query/key heads of d values, I = intermediate:

    n1   (2, T, H)          add_rmsnorm → [h1 = x + residual, y1 = rmsnorm(h1)·norm1]
    q, k, v                 y1 · wq, y1 · wk, y1 · wv: (1, T, nh, d), (1, T, nkv, d), (1, T, nkv, d)
    qk   (1, T, nh+nkv, d)  rope(q, k)
    qa   (1, nh, T, d)      q' heads-major (a copy)
    ka, va (1, nkv, T, d)   k' and v heads-major (copies), one per key head: grouped-query attention
    o    (1, nh, T, d)      causal attention, query head h reading key head h // (nh/nkv)
    ot   (T, nh·d)          o token-major (a copy), · wo → a (T, H)
    out  (2, T, H)          add_rmsnorm(a, h1) → [h2, y2]; y2 · w_gate → gate, y2 · w_up → up (T, I each);
                            swiglu → m (T, I); m · w_down → out[1], over y2, which nothing reads any more

The layer's output is out = [h2, down]: the residual stream and the MLP's output, the two inputs of the next
layer's add + RMSNorm. y2 lives in out[1] until the down projection overwrites it, so the layer allocates no
buffer for it. Every op reads and writes whole contiguous buffers (the Numba kernels reshape their arguments,
which of a strided view would silently copy): so Q, K and V are three GEMMs into three buffers rather than one
fused QKV GEMM split into strided views, and the layouts between rope's token-major output, attention's
heads-major inputs and the O projection are explicit copies, counted in the ledger.

Attention is grouped-query (the attention family's `kv_heads`): it reads the nkv heads of K and V in place,
each serving nh/nkv query heads, so K and V are never repeated to every query head (model code's
`repeat_interleave`); their copies only change the layout, nkv·T·d values each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scenarios.normalization.scenario import tile_for
from suite.core.errors import ConfigError
from suite.core.scenario import Params
from suite.kit.layer import Op, Step

OPS = ("add_rmsnorm", "rope", "attention", "swiglu")
"""The layer's fusable ops, by family: each has a fused and an unfused kernel; the layer runs add_rmsnorm twice."""
VARIANTS = ("unfused", "fused", *(f"fused_{op}" for op in OPS))
"""Every op unfused, every op fused, and each op fused alone (the rest unfused): what each fusion buys."""
WEIGHTS = ("norm1", "wq", "wk", "wv", "wo", "norm2", "w_gate", "w_up", "w_down")
INPUTS = ("x", "residual", *WEIGHTS, "cos", "sin")
"""x (the previous sublayer's output) and the residual stream, the weights, and rope's tables (made once per
model step and shared by every layer, as the rope family takes them)."""
BLOCK = 64
"""Attention's query and key tiles (the attention family's default presets)."""


def op_variants(variant: str) -> dict[str, str]:
    """The variant of each op's family that the layer's `variant` runs; ConfigError for a name not in VARIANTS."""
    if variant not in VARIANTS:
        raise ConfigError(f"unknown decoder_layer variant '{variant}'; valid: {', '.join(VARIANTS)}")
    if variant in ("fused", "unfused"):
        return dict.fromkeys(OPS, variant)
    return {op: "fused" if variant == f"fused_{op}" else "unfused" for op in OPS}


def op_params(params: Params) -> dict[str, Params]:
    """Each family's params at the layer's shapes: add_rmsnorm holds a row whole (its tile: the hidden size to a
    power of two), attention is causal in tiles of BLOCK, matmul counts the GEMMs (`gemms`)."""
    t, h, heads, kv, d = (params[k] for k in ("tokens", "hidden", "heads", "kv_heads", "head_dim"))
    return {
        "add_rmsnorm": {"rows": t, "cols": h, "tile": tile_for(h)},
        "rope": {
            "batch": 1,
            "seq_len": t,
            "heads": heads,
            "kv_heads": kv,
            "head_dim": d,
            "pairing": params["rope_pairing"],
        },
        "attention": {
            "batch": 1,
            "heads": heads,
            "kv_heads": kv,
            "seq_len": t,
            "head_dim": d,
            "causal": True,
            "block_m": BLOCK,
            "block_n": BLOCK,
        },
        "swiglu": {"rows": t, "cols": params["intermediate"]},
    }


def gemms(params: Params) -> list[tuple[str, int, int, int]]:
    """(name, m, n, k) of each projection, in the chain's order: out (m × n) = a (m × k) · w (k × n)."""
    t, h, heads, kv, d, i = (params[k] for k in ("tokens", "hidden", "heads", "kv_heads", "head_dim", "intermediate"))
    return [
        ("Q projection", t, heads * d, h),
        ("K projection", t, kv * d, h),
        ("V projection", t, kv * d, h),
        ("O projection", t, h, heads * d),
        ("gate projection", t, i, h),
        ("up projection", t, i, h),
        ("down projection", t, h, i),
    ]


def weight_shapes(params: Params) -> dict[str, tuple[int, ...]]:
    """The layer's weights (norm gains and the projections' (in, out) matrices)."""
    h, heads, kv, d, i = (params[k] for k in ("hidden", "heads", "kv_heads", "head_dim", "intermediate"))
    shapes = {
        "norm1": (h,),
        "wq": (h, heads * d),
        "wk": (h, kv * d),
        "wv": (h, kv * d),
        "wo": (heads * d, h),
        "norm2": (h,),
        "w_gate": (h, i),
        "w_up": (h, i),
        "w_down": (i, h),
    }
    return {name: shapes[name] for name in WEIGHTS}


Gemm = Callable[[Any, Any, Any], Callable[[], None]]
"""gemm(a, w, out) -> a launcher writing a · w into out (2-D arrays; out a contiguous buffer or view of one)."""
Copy = Callable[[Any, Any], Callable[[], None]]
"""copy(dst, src) -> a launcher writing src (a, b, d), a view, into dst (b, a, d) with its first two axes swapped:
dst[j, i] = src[i, j]. Every layout copy of the chain is that one, so the backend transposes, not the chain: a
Numba device array has no transposed view of three axes, and torch's `transpose` swaps two axes, not NumPy's."""
Empty = Callable[[tuple[int, ...], Any], Any]
"""empty(shape, dtype) -> an uninitialised contiguous array on the backend's device."""


def steps(inputs: dict[str, Any], out: Any, params: Params, *, gemm: Gemm, copy: Copy, empty: Empty) -> list[Op | Step]:
    """The layer's chain in order on buffers made with `empty` (every one before any launch), the module's table."""
    t, h, heads, kv, d, i = (params[k] for k in ("tokens", "hidden", "heads", "kv_heads", "head_dim", "intermediate"))
    dt, ops = out.dtype, op_params(params)
    n1 = empty((2, t, h), dt)
    q, k, v = empty((1, t, heads, d), dt), empty((1, t, kv, d), dt), empty((1, t, kv, d), dt)
    qk = empty((1, t, heads + kv, d), dt)
    qa, o = empty((1, heads, t, d), dt), empty((1, heads, t, d), dt)
    ka, va = empty((1, kv, t, d), dt), empty((1, kv, t, d), dt)
    ot, a = empty((t, heads * d), dt), empty((t, h), dt)
    gate, up, m = empty((t, i), dt), empty((t, i), dt), empty((t, i), dt)

    def to_heads(dst: Any, src: Any) -> Any:
        """(1, T, n, d) token-major -> dst (1, n, T, d) heads-major."""
        return copy(dst[0], src[0])

    def project(name: str, x: Any, w: str, into: Any) -> Step:
        return Step(name, gemm(x, inputs[w], into.reshape(t, -1)))

    y2 = out[1]
    return [
        Op(
            "add_rmsnorm (input)",
            "add_rmsnorm",
            {"x": inputs["x"], "residual": inputs["residual"], "weight": inputs["norm1"]},
            n1,
            ops["add_rmsnorm"],
        ),
        project("Q projection", n1[1], "wq", q),
        project("K projection", n1[1], "wk", k),
        project("V projection", n1[1], "wv", v),
        Op("rope", "rope", {"q": q, "k": k, "cos": inputs["cos"], "sin": inputs["sin"]}, qk, ops["rope"]),
        Step("q to heads-major", to_heads(qa, qk[:, :, :heads])),
        Step("k to heads-major", to_heads(ka, qk[:, :, heads:])),
        Step("v to heads-major", to_heads(va, v)),
        Op("attention", "attention", {"q": qa, "k": ka, "v": va}, o, ops["attention"]),
        Step("attention output to token-major", copy(ot.reshape(t, heads, d), o[0])),
        project("O projection", ot, "wo", a),
        Op(
            "add_rmsnorm (post-attention)",
            "add_rmsnorm",
            {"x": a, "residual": n1[0], "weight": inputs["norm2"]},
            out,
            ops["add_rmsnorm"],
        ),
        project("gate projection", y2, "w_gate", gate),
        project("up projection", y2, "w_up", up),
        Op("swiglu", "swiglu", {"a": gate, "b": up}, m, ops["swiglu"]),
        project("down projection", m, "w_down", out[1]),
    ]
