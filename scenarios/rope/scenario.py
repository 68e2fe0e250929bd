"""Rotary position embedding (RoPE) on q and k — a memory-bound elementwise op every decoder layer runs twice.

Rope rotates each pair of values (x₁, x₂) of a head by an angle that depends on the token's position and the
pair's frequency: (x₁·cos − x₂·sin, x₂·cos + x₁·sin), written as x·cos + rotate(x)·sin with rotate(x₁, x₂) =
(−x₂, x₁). Models pair values two ways (the `pairing` axis): `half` pairs value j with j + head_dim/2 (Hugging
Face's rotate_half, Llama, Mistral, Qwen), `interleaved` pairs 2i with 2i + 1 (GPT-J, Meta's original Llama).
The cos and sin tables (seq_len × head_dim/2, one angle per position and pair) are computed once per model step
and shared by every layer, so here they are inputs, made outside the timed call.

Unfused, as the textbook code reads: rotate(x), x·cos, rotate(x)·sin, then the sum — four kernels for q and four
for k, three intermediates of the tensor's size each, stored in the case's dtype (`decomposition.STEPS`). Fused:
one kernel reads q, k and the tables once and writes both results once. The work per byte is a few FLOPs, so
both are bound by memory and the ledger predicts the speedup: 11 tensor passes per tensor against 2. The
`library` is Liger-Kernel's (on CUDA): it rotates in place, so its row copies q and k into out first and its
ledger counts that copy.

One output buffer holds both results: out has shape (batch, seq_len, heads + kv_heads, head_dim), q' in heads
[0, heads) and k' in [heads, heads + kv_heads) — the layout of a fused QK projection's output, so the numerics
check covers both with one comparison and nothing is copied to build it.

Inputs q (batch, seq_len, heads, head_dim) and k (batch, seq_len, kv_heads, head_dim) of the case's dtype; every
kernel computes in float32 and stores in the case's dtype. The ledger counts the outer-memory boundary, each
step reading every tensor it names once and writing its output once (see `decomposition`).
"""

from __future__ import annotations

import numpy as np

from scenarios.rope.backward import RopeBackward
from scenarios.rope.config import RopeConfig
from scenarios.rope.decomposition import PAIRINGS, rope_ledger
from suite.core.errors import ConfigError
from suite.core.host_memory import guard
from suite.core.ledger import VariantLedger
from suite.core.numerics import rel_err
from suite.core.scenario import Params, Scenario, register
from suite.core.tolerances import Tolerance, per_dtype

BASE = 10000.0
"""The frequency base θ of Llama 2 and the original paper: pair i turns by position · θ^(−2i/head_dim)."""
MAX_HEAD_DIM = 256
"""GPU kernels hold a head's row in one program or block."""
MAX_ELEMENTS = 2**31 - 1
LIMITS = Tolerance(ceiling=per_dtype(1e-3, 1.0))
"""The usual floor and caps. In half precision an output that nearly cancels (x₁·cos ≈ x₂·sin) is judged against the floor of the
metric (1e-3 of the largest output), while the unfused steps round both products to 11 bits first: measured on
Llama's shapes that alone costs up to 0.4 at one element. The cap then only bounds the worst element; the
family's tests hold every element of the fused kernels to its own condition (`tests/test_rope.py`)."""


def tables(seq_len: int, head_dim: int, start: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of position · θ^(−2i/head_dim) for positions start..start+seq_len−1, pairs i < head_dim/2,
    computed in float64 and stored in `dtype` (as Hugging Face casts its float32 tables to the activations')."""
    inv_freq = BASE ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angle = np.arange(start, start + seq_len, dtype=np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)


def _split(x: np.ndarray, pairing: str) -> tuple[np.ndarray, np.ndarray]:
    """The two members of every pair, each (..., head_dim/2)."""
    h = x.shape[-1] // 2
    return (x[..., :h], x[..., h:]) if pairing == "half" else (x[..., 0::2], x[..., 1::2])


def _join(a: np.ndarray, b: np.ndarray, pairing: str) -> np.ndarray:
    if pairing == "half":
        return np.concatenate([a, b], axis=-1)
    return np.stack([a, b], axis=-1).reshape(*a.shape[:-1], 2 * a.shape[-1])


def full_table(t: np.ndarray, pairing: str) -> np.ndarray:
    """A (seq_len, head_dim/2) table widened to every value of a head, as (seq_len, 1, head_dim) for broadcasting."""
    wide = np.concatenate([t, t], axis=-1) if pairing == "half" else np.repeat(t, 2, axis=-1)
    return wide[:, None, :]


def rotate(x: np.ndarray, pairing: str) -> np.ndarray:
    x1, x2 = _split(x, pairing)
    return _join(-x2, x1, pairing)


def emulate(inputs: dict[str, np.ndarray], pairing: str, dtype: str) -> np.ndarray:
    """The unfused steps in float32, every intermediate rounded to `dtype`: what storage precision alone costs."""
    cos = full_table(inputs["cos"].astype(np.float32), pairing)
    sin = full_table(inputs["sin"].astype(np.float32), pairing)
    parts = []
    for name in ("q", "k"):
        x = inputs[name].astype(np.float32)
        a = (x * cos).astype(dtype).astype(np.float32)
        b = (rotate(x, pairing) * sin).astype(dtype).astype(np.float32)
        parts.append((a + b).astype(dtype))
    return np.concatenate(parts, axis=2)


@register
class Rope(Scenario):
    name = "rope"
    config = RopeConfig
    model_tour = "model_rope"
    limits = LIMITS
    training = RopeBackward()
    train_tour = "train_rope"
    gpu_check = "gpu_rope"
    summary = {"seq_len": 16384, "pairing": "half"}
    inputs = ("q", "k", "cos", "sin")
    variants = ("fused", "unfused", "library", "eager", "compiled")
    axes = ("batch", "seq_len", "heads", "kv_heads", "head_dim", "pairing")
    size_axis = "seq_len"
    memory_bound = True
    size_unit = "positions"
    presets = {
        # S: smoke runs — an odd sequence, grouped-query heads, both pairings.
        "S": {
            "batch": [1],
            "seq_len": [33],
            "heads": [4],
            "kv_heads": [2],
            "head_dim": [64],
            "pairing": ["half", "interleaved"],
        },
        # M: Llama-3-8B's heads (32 query, 8 key, 128 values); 1,024 and 4,096 tokens move 21 and 84 MB each way in
        # float32, past this machine's last-level cache.
        "M": {
            "batch": [1],
            "seq_len": [1024, 4096],
            "heads": [32],
            "kv_heads": [8],
            "head_dim": [128],
            "pairing": ["half", "interleaved"],
        },
        "L": {
            "batch": [4],
            "seq_len": [4096, 8192],
            "heads": [32],
            "kv_heads": [8],
            "head_dim": [128],
            "pairing": ["half", "interleaved"],
        },
    }
    checks = [
        {"batch": 1, "seq_len": 7, "heads": 4, "kv_heads": 1, "head_dim": 64, "pairing": "half"},
        {"batch": 3, "seq_len": 5, "heads": 2, "kv_heads": 2, "head_dim": 128, "pairing": "interleaved"},
    ]
    """Odd token counts (7, 15), key heads fewer than query heads (4:1) and as many, head_dim 64 and 128, both
    pairings; tests/test_rope.py adds 3:1 heads with the interleaved pairing at head_dim 64."""

    def check(self, params: Params) -> None:
        for key in ("batch", "seq_len", "heads", "kv_heads", "head_dim"):
            value = params[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"scenario.{key}={value!r} must be a positive integer")
        d, heads, kv = params["head_dim"], params["heads"], params["kv_heads"]
        if d % 2 or d > MAX_HEAD_DIM:
            raise ConfigError(f"scenario.head_dim={d} must be even and at most {MAX_HEAD_DIM}")
        if heads % kv:
            raise ConfigError(f"scenario.kv_heads={kv} must divide scenario.heads={heads}")
        if params["pairing"] not in PAIRINGS:
            raise ConfigError(
                f"unknown pairing '{params['pairing']}' in scenario.pairing; valid: {', '.join(PAIRINGS)}"
            )
        n = self.elements(params)
        if n > MAX_ELEMENTS:
            raise ConfigError(f"q and k hold {n:,} elements, more than {MAX_ELEMENTS:,}")
        need = n * (4 * 6 + 8 * 3)  # q, k, out and three intermediates; the float64 reference and its temporaries
        guard(need, f"rope of {n:,} elements")

    @staticmethod
    def elements(params: Params) -> int:
        """Values of q and k together (= of out)."""
        return params["batch"] * params["seq_len"] * (params["heads"] + params["kv_heads"]) * params["head_dim"]

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        b, s, d = params["batch"], params["seq_len"], params["head_dim"]
        return {
            "q": (b, s, params["heads"], d),
            "k": (b, s, params["kv_heads"], d),
            "cos": (s, d // 2),
            "sin": (s, d // 2),
        }

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """q and k uniform in [−3, 3); the tables for positions from a random start, so no run sees only the
        angles near zero where sin is tiny and cos is one."""
        shapes = self.input_shapes(params)
        out = {name: rng.uniform(-3.0, 3.0, shapes[name]).astype(dtype) for name in ("q", "k")}
        out["cos"], out["sin"] = tables(params["seq_len"], params["head_dim"], int(rng.integers(0, 4096)), dtype)
        return out

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        pairing = params["pairing"]
        cos = full_table(inputs["cos"].astype(np.float64), pairing)
        sin = full_table(inputs["sin"].astype(np.float64), pairing)
        parts = []
        for name in ("q", "k"):
            x = inputs[name].astype(np.float64)
            parts.append(x * cos + rotate(x, pairing) * sin)
        return np.concatenate(parts, axis=2)

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (params["batch"], params["seq_len"], params["heads"] + params["kv_heads"], params["head_dim"])

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        return rope_ledger(params, dtype)

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Four times the error of the unfused steps done in `dtype` storage, within per-dtype limits: each output
        is two rounded products and a rounded sum, and a sum that cancels is judged against the output's scale."""
        own = rel_err(emulate(inputs, params["pairing"], dtype), ref)
        return self.limits.clip(dtype, 4.0 * own)

    def title(self, params: Params, size_axis: str) -> str:
        """A facet's title short enough to sit above it: the pairing, the heads and head_dim ('half · 32/8 heads ·
        d=128'), and the batch where it is not 1; the case's full label is its series in the tables."""
        keep = {k: v for k, v in params.items() if k != size_axis}
        parts = [
            str(keep.get("pairing", "")),
            f"{keep.get('heads', '?')}/{keep.get('kv_heads', '?')} heads",
            f"d={keep.get('head_dim', '?')}",
        ]
        if keep.get("batch", 1) != 1:
            parts.append(f"batch={keep['batch']}")
        return " · ".join(p for p in parts if p)

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """One sequence, as many positions as fit; the heads and head_dim stay (they shape the kernels)."""
        per_position = (params["heads"] + params["kv_heads"]) * params["head_dim"]
        return {**params, "batch": 1, "seq_len": max(1, min(params["seq_len"], max_elements // per_position))}
