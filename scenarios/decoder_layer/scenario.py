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
the compiler's own fusion across every op boundary; the composed `fused` is paired with both.

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
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from scenarios.decoder_layer.chain import INPUTS, VARIANTS, op_params, weight_shapes
from scenarios.decoder_layer.config import DecoderLayerConfig
from scenarios.decoder_layer.ledger import RIVALS, held_bytes, layer_ledger
from scenarios.decoder_layer.reference import FLOAT64, forward, storage
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
MAX_HEAD_DIM = 256


@register
class DecoderLayer(Scenario):
    name = "decoder_layer"
    config = DecoderLayerConfig
    model_tour = "model_decoder_layer"
    gpu_check = "gpu_decoder_layer"
    summary = {"tokens": 1024, "rope_pairing": "half"}
    """The M preset's longer sequence, the GPU check's shorter one (conf/experiment/gpu_decoder_layer.yaml), in Llama's
    pairing: the case the GPU check keeps when its budget is short."""
    limits = Tolerance(
        floor={d: DEPTH * f for d, f in FLOOR.items()},
        ceiling=per_dtype(1e-2, 1.0),
    )
    """Floor: the chain's depth times the usual floor (module docstring). Ceiling: float32 storage cannot excuse
    more than 1e-2 after nine ops; half precision stores every activation in 11 bits, and the attention family's
    own ceiling is higher still."""
    captions = {
        "steps": "Each variant's time per launch, stacked by op, GEMM and copy (each step's median inside the layer)"
    }
    inputs = INPUTS
    variants = (*VARIANTS, *RIVALS)
    baseline = "unfused"
    pairs = (*((v, "unfused") for v in VARIANTS if v != "unfused"), ("compiled", "eager"))
    rivals = (("fused", "compiled"), ("fused", "eager"))
    axes = ("tokens", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "rope_pairing")
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

    def check(self, params: Params) -> None:
        """The layer's own rules, then each op's family's at the layer's shapes (so every kernel can run it)."""
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
        for family, p in op_params(params).items():
            get(family).check(p)
        # float32 buffers, the float64 reference's activations and one head slab of its attention scores
        t, h, i = params["tokens"], params["hidden"], params["intermediate"]
        guard(held_bytes(params, 4) + 8 * (4 * t * h + 3 * t * i + 4 * t * heads * d), f"decoder_layer at {t} tokens")

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        t, h, half = params["tokens"], params["hidden"], params["head_dim"] // 2
        return {"x": (t, h), "residual": (t, h), **weight_shapes(params), "cos": (t, half), "sin": (t, half)}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """x and residual uniform in [−3, 3) as add_rmsnorm's; gains in [0.5, 1.5); each projection uniform with
        variance 1/fan_in, so every activation stays of order one; rope's tables for positions 0..tokens−1."""
        out = {}
        for name, shape in self.input_shapes(params).items():
            if name in ("x", "residual"):
                out[name] = rng.uniform(-3.0, 3.0, shape).astype(dtype)
            elif len(shape) == 1:
                out[name] = rng.uniform(0.5, 1.5, shape).astype(dtype)
            elif name.startswith("w"):
                out[name] = (rng.uniform(-1.0, 1.0, shape) * np.sqrt(3.0 / shape[0])).astype(dtype)
        out["cos"], out["sin"] = tables(params["tokens"], params["head_dim"], 0, dtype)
        return out

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        return forward(inputs, params, FLOAT64)

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (2, params["tokens"], params["hidden"])

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        return layer_ledger(params, dtype)

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Four times the error of the chain in `dtype` storage, within `limits` (module docstring)."""
        own = rel_err(forward(inputs, params, storage(dtype)), ref)
        return self.limits.clip(dtype, 4.0 * own)

    def report_sections(self, rows: pd.DataFrame) -> list[str]:
        """The layer op by op: speedups, each op's share of the time, the gain the ops predict (`report`)."""
        from scenarios.decoder_layer.report import layer_section

        return [text for text in [layer_section(rows)] if text]

    def charts(self, rows: pd.DataFrame, outdir: Path) -> list[Path]:
        """Each variant's time stacked by op, GEMM and copy (`charts`)."""
        from scenarios.decoder_layer.charts import steps_chart

        return steps_chart(rows, outdir)

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """Fewer tokens, as many as keep the widest activation within budget (the widths shape the kernels)."""
        widest = max(params["hidden"], params["intermediate"], params["heads"] * params["head_dim"])
        return {**params, "tokens": max(1, min(params["tokens"], max_elements // widest))}
