"""The decoder layer's ledger: the sum of its ops' own ledgers, its GEMMs and its copies, in the chain's order.

Each fusable op is counted by its family's `ledger()` at the layer's shapes (`chain.op_params`) in the variant the
layer's variant picks for it, so the layer's account is exactly the families' and moves when theirs does;
add_rmsnorm twice. Each projection is counted as the matmul family counts its `library` kernel (A and B read
once, C written once, 2·m·n·k FLOPs). The copies (`copies`) read their source once and write their destination
once. Kernel names carry the op's label ('attention: scores'), so a row's kernels say where each comes from.

The torch rivals are counted with the same GEMMs and copies, each op as the family's variant that runs what the
rival's code runs (`RIVALS`). Eager: the add then F.rms_norm is add_rmsnorm's `library` (torch's add and
rms_norm); F.scaled_dot_product_attention with enable_gqa is attention's `library` (q, k, v read once, O written
once); silu(gate)·up is swiglu's `eager` (silu into a temporary, then the product); the rotation, written as
Hugging Face writes it (x·cos + rotate_half(x)·sin), is counted as rope's `eager`, the same passes (the rotated
tensor, two products, a sum) less what model code adds to them: its cat writes the negated half once more, and
the (T, d/2) tables are widened on every call, so eager's rope moves somewhat more than counted. Eager's layouts
are counted as the composed layer's four copies: q, k and v reach SDPA as transposed views, which torch may read
in place or copy inside, and O's transpose back is a copy. Compiled is counted as the fused layer (each op its
family's fused kernel), as every family counts the compiler's fusion: the least the compiler's kernels need to
move, whatever it fuses across the ops' boundaries on top (the row adds what its generated code kept). Library
(Liger's kernels patched into eager's code) is eager with Liger's ops: its fused add + RMSNorm is add_rmsnorm's
`fused` (x, residual and γ read once, h and y written once; its per-row rstd, rows·4 bytes, is not counted, as
in the family's row), its rope rotating the projections' q and k in place moves what rope's `fused` moves (the
family's `library` adds the copy its row makes to keep the suite's inputs unchanged; the layer's q and k are its
own), its SiLU·mul is swiglu's `library`, and SDPA and the layouts are eager's.

The head (`lm_head`) adds the final add + RMSNorm (add_rmsnorm a third time) and the linear_cross_entropy
family's ledger at the layer's shapes: the LM head's GEMM is that family's own kernel, counted there, no GEMM of
the layer's. Eager's head (the add and F.rms_norm, then logits = y @ w_lm and F.cross_entropy) is counted as
add_rmsnorm's `library` and linear_cross_entropy's `eager` (the logits, then a log-softmax written out, then
nll_loss); compiled's as that family counts torch.compile of the same code, its `compiled` (the library GEMM
into every token's logits, the loss fused into its reductions: the compiler does not chunk the tokens).

Peak memory: the layer allocates every buffer before it runs, so its inputs, weights, activations and output are
alive throughout (`held`); on top of them, at the worst op, what that op's variant holds beyond its own inputs
and outputs: its ledger's peak less its fused ledger's, which in every one of these families is exactly its
inputs and outputs (the unfused intermediates, S and P of attention). linear_cross_entropy's fused peak also holds
a chunk's logits and a loss per token, so its inputs and outputs are counted apart (`head_io`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scenarios.cross_entropy.blocked import BLOCK_BYTES
from scenarios.cross_entropy.constants import TARGET_BYTES
from scenarios.decoder_layer.chain import (
    HEAD,
    OPS,
    gemms,
    head,
    head_shapes,
    op_params,
    op_variants,
    ops_of,
    variants_of,
    weight_shapes,
)
from suite.core.ledger import KernelTraffic, VariantLedger
from suite.core.scenario import Params, get

RIVALS = {
    "eager": {"add_rmsnorm": "library", "rope": "eager", "attention": "library", "swiglu": "eager", HEAD: "eager"},
    "compiled": {**dict.fromkeys(OPS, "fused"), HEAD: "compiled"},
    "library": {"add_rmsnorm": "fused", "rope": "fused", "attention": "library", "swiglu": "library", HEAD: "eager"},
}
"""How the rivals (torch's `backends/torch/decoder_layer.py`, Liger's `backends/liger/decoder_layer.py`) are
counted, op by op (module docstring)."""
OpRun = tuple[str, str]
"""(label, family) of one op in the chain."""


def copies(params: Params, s: int) -> list[KernelTraffic]:
    """The layout copies: q' to heads-major, k' and v to heads-major (their kv_heads heads only: attention is
    grouped-query, nothing is repeated), attention's output back to token-major."""
    t, heads, kv, d = (params[k] for k in ("tokens", "heads", "kv_heads", "head_dim"))
    q, k = t * heads * d * s, t * kv * d * s
    return [
        KernelTraffic("q to heads-major", q, q, 0),
        KernelTraffic("k to heads-major", k, k, 0),
        KernelTraffic("v to heads-major", k, k, 0),
        KernelTraffic("attention output to token-major", q, q, 0),
    ]


def gemm_traffic(params: Params, dtype: str) -> list[KernelTraffic]:
    """Each projection as the matmul family's ledger counts its library kernel."""
    matmul = get("matmul")
    out = []
    for name, m, n, k in gemms(params):
        # the tile shapes only the tiled kernel's count; the library kernel reads A and B once whatever it is
        found = matmul.ledger({"m": m, "n": n, "k": k, "epilogue": "none", "tile": [32, 32, 32]}, dtype)
        out.append(replace(found["library"].kernels[0], name=name))
    return out


def held_bytes(params: Params, s: int) -> int:
    """Inputs, weights, every activation buffer and the output: all allocated before the layer runs. With the
    head: its gain, weight and int64 targets too, the layer's [h2, down] and the final norm's [h3, y3] as
    activations, and the loss as the output."""
    t, h, heads, kv, d, i = (params[k] for k in ("tokens", "hidden", "heads", "kv_heads", "head_dim", "intermediate"))
    inputs = 2 * t * h + 2 * t * (d // 2) + sum(int(np.prod(v)) for v in weight_shapes(params).values())
    activations = 2 * t * h + t * (heads + 2 * kv) * d + t * (heads + kv) * d + 2 * t * (heads + kv) * d
    activations += t * heads * d + t * h + 3 * t * i
    if not head(params):
        return (inputs + activations + 2 * t * h) * s
    shapes = head_shapes(params)
    inputs += int(np.prod(shapes["norm_f"])) + int(np.prod(shapes["w_lm"]))
    return (inputs + activations + 4 * t * h + 1) * s + t * TARGET_BYTES


def host_bytes(params: Params) -> int:
    """What a case holds on the host, for the memory guard: float32 buffers, the float64 reference's activations
    and one head slab of its attention scores; with the LM head, the unfused head's logits (tokens × vocab,
    float32), the float64 final norm's and hidden states, and the reference's blocks of logits."""
    t, h, i, hd = params["tokens"], params["hidden"], params["intermediate"], params["heads"] * params["head_dim"]
    need = held_bytes(params, 4) + 8 * (4 * t * h + 3 * t * i + 4 * t * hd)
    if head(params):
        need += 4 * t * params["vocab"] + 8 * 3 * t * h + 4 * BLOCK_BYTES
    return need


def head_io(params: Params, s: int) -> int:
    """linear_cross_entropy's inputs and output at the layer's shapes: hidden states, weight, targets, the loss."""
    t, h, v = params["tokens"], params["hidden"], params["vocab"]
    return (t * h + h * v + 1) * s + t * TARGET_BYTES


def in_order(params: Params, dtype: str) -> list[OpRun | KernelTraffic]:
    """The chain as the ledger walks it: each op as (label, family), each GEMM and copy as its traffic."""
    proj, moves = gemm_traffic(params, dtype), copies(params, np.dtype(dtype).itemsize)
    return [
        ("add_rmsnorm (input)", "add_rmsnorm"),
        *proj[:3],
        ("rope", "rope"),
        *moves[:3],
        ("attention", "attention"),
        moves[3],
        proj[3],
        ("add_rmsnorm (post-attention)", "add_rmsnorm"),
        *proj[4:6],
        ("swiglu", "swiglu"),
        proj[6],
        *([("add_rmsnorm (final)", "add_rmsnorm"), (f"{HEAD} (LM head)", HEAD)] if head(params) else []),
    ]


def picks(params: Params) -> dict[str, dict[str, str]]:
    """The family variant each op is counted as, for every variant of the case: the composed ones as they run
    (`chain.op_variants`), and the torch rivals as `RIVALS` says."""
    return {**{variant: op_variants(variant, params) for variant in variants_of(params)}, **RIVALS}


def layer_ledger(params: Params, dtype: str) -> dict[str, VariantLedger]:
    """Every variant the case compares (`chain.variants_of`) and the rivals, each the sum of its parts; see the
    module docstring."""
    shapes, order, s, ops = op_params(params), in_order(params, dtype), np.dtype(dtype).itemsize, ops_of(params)
    families = {f: get(f).ledger(shapes[f], dtype) for f in ops}
    runs = [item for item in order if not isinstance(item, KernelTraffic)]
    held = held_bytes(params, s)
    io = {f: families[f]["fused"].peak_bytes for f in OPS} | ({HEAD: head_io(params, s)} if head(params) else {})
    out = {}
    for variant, pick in picks(params).items():
        parts = {family: families[family][pick[family]] for family in ops}
        kernels: list[KernelTraffic] = []
        for item in order:
            if isinstance(item, KernelTraffic):
                kernels.append(item)
            else:
                label, family = item
                kernels += [replace(k, name=f"{label}: {k.name}") for k in parts[family].kernels]
        removed = tuple(i for _, family in runs for i in parts[family].removed)
        extra = max(parts[f].peak_bytes - io[f] for f in ops)
        out[variant] = VariantLedger(variant, tuple(kernels), removed, held + extra)
    return out
