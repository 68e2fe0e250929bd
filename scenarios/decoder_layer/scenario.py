"""decoder_layer: a pre-norm transformer decoder layer composed from the registry's own kernels.

    h1, y1 = add_rmsnorm(x, residual; norm1)        (x: the previous sublayer's output)
    q, k, v = y1·wq, y1·wk, y1·wv;  q', k' = rope(q, k)
    o = causal attention(q', k', v) per query head  (grouped-query: head h reads K/V head h // (heads/kv_heads))
    h2, y2 = add_rmsnorm(o·wo, h1; norm2)
    down = swiglu(y2·w_gate, y2·w_up)·w_down        output: [h2, down], the next layer's add + RMSNorm inputs

Every family's kernel measures one op; the layer measures what each fusion buys inside a step, between GEMMs
that dwarf it in FLOPs and evict its operands from cache. The fusable ops are the families `add_rmsnorm`, `rope`,
`attention` and `swiglu`, each run as the backend registers it, so a family's better kernel makes the layer
better without an edit here. Variants: `unfused` (every op's unfused kernel), `fused` (every op's fused kernel)
and `fused_<op>` (that op fused alone, the rest unfused), which attributes the gain op by op. The projections are
the backend's library GEMM in every variant, so variants differ only in the fusable ops. The rivals are torch's
(`backends/torch/decoder_layer.py`): `eager`, the layer as model code writes it in torch (F.rms_norm,
scaled_dot_product_attention with enable_gqa, silu(gate)·up), and `compiled`, that code through torch.compile,
the compiler's own fusion across every op boundary; the composed `fused` is paired with both. Liger-Kernel's
`library` (`backends/liger/decoder_layer.py`, CUDA only) is that model code with Liger's kernels patched in (its
fused add + RMSNorm, rope and SiLU·mul): what a user gets by installing a library, shown beside the rivals as every
family's `library` row is.

How it is composed (`chain`, `suite.kit.layer`): the chain is a list of steps on buffers every one of which is
allocated before the first launch — each op a run of its family's registered kernel (looked up in the registry
for the backend and device at hand, in the variant the layer's variant picks for its family), each projection
and layout copy a launcher the backend builds. A backend serves the layer by registering one entry that names
its GEMM, its copy and its allocator (`backends/numba/on_cpu/decoder_layer.py`, and a `decoder_layer.py` of
Triton, CuPy and Numba CUDA each); the layer's variants are `Unsupported` wherever that backend lacks one of the
ops' kernels.

One sequence of `tokens` positions (batch 1) from position 0, causal. Attention is the family's grouped-query
form: it reads the `kv_heads` heads of K and V in place, never repeated to every query head. The layouts between
ops (rope's token-major output, attention's heads-major inputs and output) are copies, which the ledger counts.

Ledger (`ledger`): the sum of the ops' own ledgers at the layer's shapes, plus the GEMMs as the matmul family
counts its library kernel, plus the copies. Reference (`reference`): the same chain in float64, each op its
family's float64 reference. Tolerance: four times the error of the chain done in float32 with every stored
activation rounded to the case's dtype, at least the chain's depth times the usual floor: nine ops stand one
after another between x and the output (two norms, four GEMMs, rope, attention, swiglu), each may add its
floor's worth of reordered float32 sums, and a well-conditioned chain adds those errors up rather than
multiplying them.

With the model's head (`lm_head=true`, over a vocabulary of `vocab`), the case goes on past the layer as a
model's forward pass ends: the final add + RMSNorm of [h2, down] (add_rmsnorm a third time), then the LM head and
its cross-entropy as the linear_cross_entropy family's kernel (unfused: every token's logits, then the loss;
fused: a chunk of tokens' logits at a time, never all tokens × vocab of them). The output is then that family's,
the mean token loss over targets drawn from the case's seed (about one in eight ignored); the layer's variants
pick the head's kernel as they pick every op's, and `fused_linear_cross_entropy` fuses the head alone, a variant
only a case with the head compares. The reference's logits exist a block of W's columns at a time, as the
family's do; the tolerance is at least the family's own for its op on the chain's hidden states, and its floor
counts three more ops (the norm, the GEMM, the loss). A case with the head carries `lm_head` and `vocab` in its
params; one without carries neither.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from scenarios.cross_entropy import make_targets
from scenarios.decoder_layer.chain import (
    HEAD,
    HEAD_INPUTS,
    INPUTS,
    OPS,
    VARIANTS,
    head,
    head_shapes,
    op_params,
    variants_of,
    weight_shapes,
)
from scenarios.decoder_layer.config import DecoderLayerConfig
from scenarios.decoder_layer.ledger import RIVALS, host_bytes, layer_ledger
from scenarios.decoder_layer.reference import FLOAT64, forward, run, storage
from scenarios.rope.decomposition import PAIRINGS
from scenarios.rope.scenario import tables
from suite.core.errors import ConfigError
from suite.core.host_memory import guard
from suite.core.ledger import VariantLedger
from suite.core.numerics import rel_err
from suite.core.scenario import Params, Scenario, get, register
from suite.core.tolerances import FLOOR, Tolerance, per_dtype

DEPTH = 9
"""Ops one after another on the longest path from x to the output: norm, QKV, rope, attention, O, norm, gate/up,
swiglu, down."""
HEAD_DEPTH = 3
"""Ops the head adds to that path: the final norm, the LM head's GEMM, the loss."""
HEAD_AXES = ("lm_head", "vocab")
MAX_HEAD_DIM = 256
CEILING = per_dtype(1e-2, 1.0)


def limits_for(params: Params) -> Tolerance:
    """The floor: the chain's depth (with the head's ops where it has one) times the usual floor."""
    depth = DEPTH + (HEAD_DEPTH if head(params) else 0)
    return Tolerance(floor={d: depth * f for d, f in FLOOR.items()}, ceiling=CEILING)


@register
class DecoderLayer(Scenario):
    name = "decoder_layer"
    config = DecoderLayerConfig
    model_tour = "model_decoder_layer"
    composes = (*OPS, HEAD)
    """The report's prediction reads these families' rows at the layer's shapes where the run has them (the model
    tour times each op alone beside the layer)."""
    gpu_check = "gpu_decoder_layer"
    summary = {"tokens": 1024, "rope_pairing": "half"}
    """The M preset's longer sequence, the GPU check's shorter one (conf/experiment/gpu_decoder_layer.yaml), in
    Llama's pairing: the case the GPU check keeps when its budget is short."""
    limits = limits_for({})
    """Floor: the chain's depth times the usual floor (module docstring; with the head, `limits_for`). Ceiling:
    float32 storage cannot excuse more than 1e-2 after nine ops; half precision stores every activation in 11
    bits, and the attention family's own ceiling is higher still."""
    captions = {
        "steps": "Each variant's time per launch, stacked by op, GEMM and copy (each step's median inside the layer)"
    }
    inputs = (*INPUTS, *HEAD_INPUTS)
    variants = (*VARIANTS, *RIVALS)
    baseline = "unfused"
    pairs = (*((v, "unfused") for v in VARIANTS if v != "unfused"), ("compiled", "eager"))
    rivals = (("fused", "compiled"), ("fused", "eager"))
    axes = ("tokens", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "rope_pairing", *HEAD_AXES)
    size_axis = "tokens"
    size_unit = "tokens"
    presets = {
        # S: tests and smoke runs — an odd token count, grouped-query heads (4:2), both pairings; milliseconds.
        "S": {
            "tokens": [33],
            "hidden": [64],
            "heads": [4],
            "kv_heads": [2],
            "head_dim": [16],
            "intermediate": [96],
            "rope_pairing": ["half", "interleaved"],
            "lm_head": [False],
            "vocab": [781],
        },
        # M: the default run — a 1B-class layer (hidden 1024, 16 query and 4 key heads of 64, intermediate 2816):
        # 23 GFLOP of GEMMs at 1,024 tokens, a quarter of a second a call on two cores; the activations (tens of
        # MB) outgrow the host's caches only at the longer sequence.
        "M": {
            "tokens": [256, 1024],
            "hidden": [1024],
            "heads": [16],
            "kv_heads": [4],
            "head_dim": [64],
            "intermediate": [2816],
            "rope_pairing": ["half"],
            "lm_head": [False],
            "vocab": [32000],
        },
        # L: Llama-3-8B's layer: 0.9 TFLOP a call at 2,048 tokens, seconds on a CPU.
        "L": {
            "tokens": [2048, 4096],
            "hidden": [4096],
            "heads": [32],
            "kv_heads": [8],
            "head_dim": [128],
            "intermediate": [14336],
            "rope_pairing": ["half"],
            "lm_head": [False],
            "vocab": [128256],
        },
    }

    checks = [
        {
            "tokens": 7,
            "hidden": 40,
            "heads": 3,
            "kv_heads": 1,
            "head_dim": 16,
            "intermediate": 24,
            "rope_pairing": "interleaved",
        },
    ]
    """Seven tokens (a ragged attention tile), three query heads on one key head, a hidden size that is not
    heads × head_dim (the O projection maps 48 values back to 40), an intermediate narrower than the hidden."""

    def cases(self, axes: dict[str, list]) -> list[Params]:
        """Every combination, checked; a case without the head keeps neither `lm_head` nor `vocab` (a vocabulary
        nothing reads would split one case into several alike), so its params are the layer's alone."""
        out: list[Params] = []
        for params in super().cases(axes):
            case = params if head(params) else {k: v for k, v in params.items() if k not in HEAD_AXES}
            if case not in out:
                out.append(case)
        return out

    def variants_for(self, params: Params) -> tuple[str, ...]:
        """Without the head, no `fused_linear_cross_entropy` (no such op to fuse)."""
        return (*variants_of(params), *RIVALS)

    def check(self, params: Params) -> None:
        """The layer's own rules and the memory the case needs, then each op's family's at the layer's shapes (so
        every kernel can run it)."""
        for key in ("tokens", "hidden", "heads", "kv_heads", "head_dim", "intermediate"):
            value = params[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"scenario.{key}={value!r} must be a positive integer")
        heads, kv, d = params["heads"], params["kv_heads"], params["head_dim"]
        if heads % kv:
            raise ConfigError(f"scenario.kv_heads={kv} must divide scenario.heads={heads}")
        if d % 2 or d > MAX_HEAD_DIM:
            raise ConfigError(f"scenario.head_dim={d} must be even and at most {MAX_HEAD_DIM}")
        if params["rope_pairing"] not in PAIRINGS:
            raise ConfigError(
                f"unknown pairing '{params['rope_pairing']}' in scenario.rope_pairing; valid: {', '.join(PAIRINGS)}"
            )
        if params.get("lm_head", False) not in (False, True):
            raise ConfigError(f"scenario.lm_head={params['lm_head']!r} must be true or false")
        if head(params) and (not isinstance(v := params["vocab"], int) or isinstance(v, bool) or v < 1):
            raise ConfigError(f"scenario.vocab={v!r} must be a positive integer")
        guard(host_bytes(params), self.what(params))
        for family, p in op_params(params).items():
            get(family).check(p)

    @staticmethod
    def what(params: Params) -> str:
        """The case as the memory guard names it."""
        if head(params):
            return f"decoder_layer with its LM head at {params['tokens']} tokens × {params['vocab']} vocab"
        return f"decoder_layer at {params['tokens']} tokens"

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        t, h, half = params["tokens"], params["hidden"], params["head_dim"] // 2
        shapes = {"x": (t, h), "residual": (t, h), **weight_shapes(params), "cos": (t, half), "sin": (t, half)}
        return shapes | head_shapes(params)

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """x and residual uniform in [−3, 3) as add_rmsnorm's; gains in [0.5, 1.5); each projection uniform with
        variance 1/fan_in, so every activation stays of order one; rope's tables for positions 0..tokens−1. The
        head's, drawn after the layer's (a case's layer inputs are the same with or without it): the final gain,
        the LM head's weight scaled by 3/√hidden as linear_cross_entropy's W (logits of standard deviation about
        1.8), the targets as that family's (about one in eight ignored)."""
        out = {}
        for name, shape in self.input_shapes(params).items():
            if name in HEAD_INPUTS:
                continue
            if name in ("x", "residual"):
                out[name] = rng.uniform(-3.0, 3.0, shape).astype(dtype)
            elif len(shape) == 1:
                out[name] = rng.uniform(0.5, 1.5, shape).astype(dtype)
            elif name.startswith("w"):
                out[name] = (rng.uniform(-1.0, 1.0, shape) * np.sqrt(3.0 / shape[0])).astype(dtype)
        out["cos"], out["sin"] = tables(params["tokens"], params["head_dim"], 0, dtype)
        for name, shape in head_shapes(params).items():
            if name == "targets":
                out[name] = make_targets(params["tokens"], params["vocab"], rng)
            elif len(shape) == 1:
                out[name] = rng.uniform(0.5, 1.5, shape).astype(dtype)
            else:
                out[name] = (rng.uniform(-1.0, 1.0, shape) * (3.0 / np.sqrt(shape[0]))).astype(dtype)
        return out

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        return forward(inputs, params, FLOAT64)

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (1,) if head(params) else (2, params["tokens"], params["hidden"])

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        return layer_ledger(params, dtype)

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Four times the error of the chain in `dtype` storage, within `limits_for(params)` (module docstring);
        with the head, at least what the linear_cross_entropy family allows its op on the chain's stored hidden
        states (its GEMM's float32 sums over `hidden`, its rows' and mean's over `vocab` and `tokens`)."""
        out, lm = run(inputs, params, storage(dtype))
        derived = 4.0 * rel_err(out, ref)
        if lm is not None:
            derived = max(derived, get(HEAD).tolerance(lm, op_params(params)[HEAD], dtype, ref))
        return limits_for(params).clip(dtype, derived)

    def report_sections(self, rows: pd.DataFrame) -> list[str]:
        """The layer op by op: speedups, each op's share of the time, the gain the ops predict (`report`)."""
        from scenarios.decoder_layer.report import layer_section

        return [text for text in [layer_section(rows)] if text]

    def charts(self, rows: pd.DataFrame, outdir: Path) -> list[Path]:
        """Each variant's time stacked by op, GEMM and copy (`charts`)."""
        from scenarios.decoder_layer.charts import steps_chart

        return steps_chart(rows, outdir)

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """Fewer tokens, as many as keep the widest activation within budget (the widths shape the kernels); with
        the head, a vocabulary within budget too (the unfused head's logits are tokens × vocab)."""
        widest = max(params["hidden"], params["intermediate"], params["heads"] * params["head_dim"])
        out = dict(params)
        if head(params):
            out["vocab"] = min(params["vocab"], max_elements)
            widest = max(widest, out["vocab"])
        return {**out, "tokens": max(1, min(params["tokens"], max_elements // widest))}
