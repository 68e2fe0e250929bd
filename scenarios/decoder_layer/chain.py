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

With the model's head (`lm_head`), [h2, down] goes on into a buffer of its own and the chain ends as a model's
forward pass does, in its loss (V = vocab):

    nf   (2, T, H)          add_rmsnorm(down, h2; norm_f) → [h3, y3], the final norm
    out  (1,)               linear_cross_entropy(y3, w_lm (H, V), targets): the mean token loss

The head is the linear_cross_entropy family's kernel: unfused, the logits of every token (T × V) then the loss;
fused, a chunk of tokens' logits at a time, never all of them. Its GEMM is that kernel's own, not a `Step`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scenarios.linear_cross_entropy.chunks import liger_chunk
from scenarios.normalization.scenario import tile_for
from suite.core.errors import ConfigError
from suite.core.registry import Unsupported
from suite.core.scenario import Params
from suite.kit.layer import Op, Step

OPS = ("add_rmsnorm", "rope", "attention", "swiglu")
"""The layer's fusable ops, by family: each has a fused and an unfused kernel; the layer runs add_rmsnorm twice."""
HEAD = "linear_cross_entropy"
"""The head's fusable op, with the model's head on (`lm_head`): the LM head's GEMM and the loss as one family."""
ALL_OPS = (*OPS, HEAD)
VARIANTS = ("unfused", "fused", *(f"fused_{op}" for op in ALL_OPS))
"""Every op unfused, every op fused, and each op fused alone (the rest unfused): what each fusion buys.
`fused_linear_cross_entropy` needs the head: a case without it has no such op to fuse (`op_variants`)."""
WEIGHTS = ("norm1", "wq", "wk", "wv", "wo", "norm2", "w_gate", "w_up", "w_down")
INPUTS = ("x", "residual", *WEIGHTS, "cos", "sin")
"""x (the previous sublayer's output) and the residual stream, the weights, and rope's tables (made once per
model step and shared by every layer, as the rope family takes them)."""
HEAD_INPUTS = ("norm_f", "w_lm", "targets")
"""The head's: the final norm's gain, the LM head's weight (hidden × vocab) and the next token of each position
(int64, some ignored, as the linear_cross_entropy family makes them)."""
BLOCK = 64
"""Attention's query and key tiles (the attention family's default presets)."""
HEAD_TILE = 2048
"""Columns of the logits the head's cross-entropy row kernel takes at a time (the linear_cross_entropy family's M
and L presets)."""


def head(params: Params) -> bool:
    """Whether the case ends in the model's head (a case without `lm_head` has none)."""
    return bool(params.get("lm_head", False))


def ops_of(params: Params) -> tuple[str, ...]:
    """The case's fusable op families: the layer's, and the head's where it has one."""
    return ALL_OPS if head(params) else OPS


def inputs_of(params: Params) -> tuple[str, ...]:
    """The case's inputs by name: the layer's, and the head's where it has one."""
    return (*INPUTS, *HEAD_INPUTS) if head(params) else INPUTS


def variants_of(params: Params) -> tuple[str, ...]:
    """The layer's variants a case compares: without the head, no `fused_linear_cross_entropy`."""
    return VARIANTS if head(params) else tuple(v for v in VARIANTS if v != f"fused_{HEAD}")


def op_variants(variant: str, params: Params) -> dict[str, str]:
    """The variant of each op's family that the layer's `variant` runs in the case `params`; ConfigError for a
    name not in VARIANTS, Unsupported for a variant that fuses an op the case does not have (the head's)."""
    if variant not in VARIANTS:
        raise ConfigError(f"unknown decoder_layer variant '{variant}'; valid: {', '.join(VARIANTS)}")
    if variant not in variants_of(params):
        raise Unsupported(f"{variant} fuses the LM head's op, and this case has no head (scenario.lm_head=false)")
    if variant in ("fused", "unfused"):
        return dict.fromkeys(ops_of(params), variant)
    return {op: "fused" if variant == f"fused_{op}" else "unfused" for op in ops_of(params)}


def op_params(params: Params) -> dict[str, Params]:
    """Each family's params at the layer's shapes: add_rmsnorm holds a row whole (its tile: the hidden size to a
    power of two), attention is causal in tiles of BLOCK, matmul counts the GEMMs (`gemms`). The head's (where the
    case has one) holds the logits of the chunk of tokens Liger-Kernel's fused linear cross-entropy picks (a
    chunk's logits about the size of the hidden states: what a model's fused loss holds), in rows of HEAD_TILE."""
    t, h, heads, kv, d = (params[k] for k in ("tokens", "hidden", "heads", "kv_heads", "head_dim"))
    out = {
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
    if head(params):
        v = params["vocab"]
        out[HEAD] = {"tokens": t, "hidden": h, "vocab": v, "chunk": liger_chunk(t, h, v), "tile": HEAD_TILE}
    return out


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


def head_shapes(params: Params) -> dict[str, tuple[int, ...]]:
    """The head's inputs (none without it): the final norm's gain, the LM head's (hidden, vocab), the targets."""
    if not head(params):
        return {}
    return {"norm_f": (params["hidden"],), "w_lm": (params["hidden"], params["vocab"]), "targets": (params["tokens"],)}


Gemm = Callable[[Any, Any, Any], Callable[[], None]]
"""gemm(a, w, out) -> a launcher writing a · w into out (2-D arrays; out a contiguous buffer or view of one)."""
Copy = Callable[[Any, Any], Callable[[], None]]
"""copy(dst, src) -> a launcher writing src (a, b, d), a view, into dst (b, a, d) with its first two axes swapped:
dst[j, i] = src[i, j]. Every layout copy of the chain is that one, so the backend transposes, not the chain: a
Numba device array has no transposed view of three axes, and torch's `transpose` swaps two axes, not NumPy's."""
Empty = Callable[[tuple[int, ...], Any], Any]
"""empty(shape, dtype) -> an uninitialised contiguous array on the backend's device."""


def steps(inputs: dict[str, Any], out: Any, params: Params, *, gemm: Gemm, copy: Copy, empty: Empty) -> list[Op | Step]:
    """The case's chain in order on buffers made with `empty` (every one before any launch): the layer's into
    `out`, or, with the head, the layer's into [h2, down] of its own and the head's into `out` (the loss)."""
    if not head(params):
        return layer_steps(inputs, out, params, gemm=gemm, copy=copy, empty=empty)
    t, h = params["tokens"], params["hidden"]
    layer_out, nf = empty((2, t, h), out.dtype), empty((2, t, h), out.dtype)
    norm = {"x": layer_out[1], "residual": layer_out[0], "weight": inputs["norm_f"]}
    lm = {"hidden": nf[1], "weight": inputs["w_lm"], "targets": inputs["targets"]}
    ops = op_params(params)
    return [
        *layer_steps(inputs, layer_out, params, gemm=gemm, copy=copy, empty=empty),
        Op("add_rmsnorm (final)", "add_rmsnorm", norm, nf, ops["add_rmsnorm"]),
        Op(f"{HEAD} (LM head)", HEAD, lm, out, ops[HEAD]),
    ]


def layer_steps(
    inputs: dict[str, Any], out: Any, params: Params, *, gemm: Gemm, copy: Copy, empty: Empty
) -> list[Op | Step]:
    """The layer's chain in order on buffers made with `empty` (every one before any launch), the module's table;
    `out` receives [h2, down]."""
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
