"""Elementwise chain: y = op_k(...op_2(op_1(x))) over n elements — the simplest case where fusion pays.

Unfused, each op is its own kernel: it reads the running value from device memory and writes its result back,
so a chain of k ops materialises k-1 intermediates of n elements. Fused, one kernel reads x once, applies every
op in float32 registers and writes y once. Every intermediate removed saves 2·n·s bytes (one write, one read):
for 10⁶ half-precision values that is 4,000,000 bytes. Elementwise ops do almost no arithmetic per byte, so
both variants are bound by memory bandwidth and the ledger predicts the speedup: k kernels' traffic over one's.
torch's `eager` runs the same unfused decomposition (one op per kernel) and `compiled` the same ops through
torch.compile; they get the unfused and the fused ledgers, so a compiler that fuses the chain is held to the
traffic of one kernel.

Exact meaning of each op on the running value v (fused kernels compute in float32; unfused kernels store each
intermediate in the chain's dtype):
    scale: 1.25·v     shift: v + 0.5     relu: max(v, 0)     square: v·v     tanh: tanh(v)
    sigmoid: 1/(1+exp(−v))     silu: v·sigmoid(v)     gelu: 0.5·v·(1+tanh(0.7978845608·(v+0.044715·v³)))
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scenarios.elementwise_chain.backward import ChainBackward
from scenarios.elementwise_chain.config import ElementwiseChainConfig
from scenarios.elementwise_chain.ops import ALL8, CHEAP4, FLOPS, OPS
from suite.core.errors import ConfigError
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.numerics import rel_err
from suite.core.scenario import Params, Scenario, register

if TYPE_CHECKING:
    import pandas as pd

MAX_CHAIN = 16
MAX_N = 2**31 - 1
"""Kernels index with 32-bit ints in places; beyond that the case is refused, not silently wrong."""


@register
class ElementwiseChain(Scenario):
    name = "elementwise_chain"
    inputs = ("x",)
    variants = ("fused", "unfused", "eager", "compiled")
    axes = ("n", "ops")
    list_axes = ("ops",)
    size_axis = "n"
    memory_bound = True
    size_unit = "elements"
    config = ElementwiseChainConfig
    model_tour = "model_elementwise"
    training = ChainBackward()
    train_tour = "train_elementwise"
    gpu_check = "gpu_elementwise"
    summary = {"n": 67108864}
    captions = {"speedup_vs_chain": "Speedup against chain length at the largest size"}
    presets = {
        "S": {"n": [1000, 4099], "ops": [["scale", "gelu"], ALL8]},
        "M": {
            "n": [2**16, 2**18, 2**20, 2**22, 2**24],
            "ops": [["scale"], ["scale", "shift"], CHEAP4, CHEAP4 + CHEAP4, ALL8],
        },
        "L": {"n": [2**22, 2**24, 2**26, 2**27], "ops": [["scale"], CHEAP4, CHEAP4 * 4, ALL8, ALL8 + ALL8]},
    }

    checks = [
        {"n": 1, "ops": ["gelu"]},
        {"n": 1000, "ops": ["scale", "gelu"]},
        {"n": 4099, "ops": ALL8},
    ]

    def check(self, params: Params) -> None:
        n, ops = params["n"], params["ops"]
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
            raise ConfigError(f"scenario.n={n!r} must be an integer in 1..{MAX_N}")
        if not isinstance(ops, list | tuple) or not 1 <= len(ops) <= MAX_CHAIN:
            raise ConfigError(f"scenario.ops={ops!r} must be a list of 1..{MAX_CHAIN} ops from: {', '.join(OPS)}")
        for op in ops:
            if op not in OPS:
                raise ConfigError(f"unknown op '{op}' in scenario.ops; valid: {', '.join(OPS)}")

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        return {"x": (params["n"],)}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"x": rng.uniform(-3.0, 3.0, params["n"]).astype(dtype)}

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        v = inputs["x"].astype(np.float64)
        for op in params["ops"]:
            v = OPS[op](v)
        return v

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (params["n"],)

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        n, ops = params["n"], params["ops"]
        s = np.dtype(dtype).itemsize
        unfused = tuple(KernelTraffic(op, n * s, n * s, FLOPS[op] * n) for op in ops)
        fused = (KernelTraffic("+".join(ops), n * s, n * s, sum(FLOPS[op] for op in ops) * n),)
        removed = tuple(Intermediate(f"after {op}", n, s) for op in ops[:-1])
        # Memory: x and y throughout; unfused, step i reads t(i-1) and writes t(i), so two intermediates coexist.
        names = ["x", *(f"t{i}" for i in range(1, len(ops))), "y"]
        steps = [((names[i],), (names[i + 1],)) for i in range(len(ops))]
        apart = live_peak(2 * n * s, steps, {name: n * s for name in names[1:-1]})
        return {
            "unfused": VariantLedger("unfused", unfused, peak_bytes=apart),
            "fused": VariantLedger("fused", fused, removed, 2 * n * s),
            "eager": VariantLedger("eager", unfused, peak_bytes=apart),
            "compiled": VariantLedger("compiled", fused, removed, 2 * n * s),
        }

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Four times the error of the unfused chain evaluated by NumPy in `dtype` storage, never below the floor
        of `limits` (the default: a few units in the last place), with no ceiling.

        The error a correct kernel makes depends on how the chain amplifies rounding (square doubles relative
        error, shift can cancel), so the tolerance is measured on the same inputs rather than guessed. Where
        storage in `dtype` overflows, no tolerance can rescue the case: the base one stands and the overflow
        shows as a mismatch.
        """
        v = inputs["x"]
        with np.errstate(over="ignore", invalid="ignore"):
            for op in params["ops"]:
                v = OPS[op](v.astype(np.float32)).astype(dtype)
            own = rel_err(v, ref)
        return self.limits.clip(dtype, 4.0 * own if np.isfinite(own) else 0.0)

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        return {**params, "n": min(params["n"], max_elements)}

    # In charts and the report a case is its chain: lines are labelled by their ops and sorted by length, and the
    # family adds the speedup against chain length (scenarios.elementwise_chain.charts).

    def series(self, params: Params, size_axis: str) -> str:
        """The ops joined by arrows ('scale→gelu'), after the size when it is kept ('n=1024, scale→gelu')."""
        parts = []
        for key, value in sorted(params.items()):
            if key != size_axis:
                parts.append("→".join(map(str, value)) if key == "ops" else f"{key}={value}")
        return ", ".join(parts) or "all"

    def title(self, params: Params, size_axis: str) -> str:
        return short_label(self.series(params, size_axis))

    def order(self, params: Params) -> float:
        """The chain's length: shorter chains first, and the x of the chain-length chart."""
        return len(params.get("ops", ()))

    def charts(self, rows: pd.DataFrame, outdir: Path) -> list[Path]:
        from scenarios.elementwise_chain.charts import chain_charts

        return chain_charts(rows, outdir)


def short_label(series: str, limit: int = 3) -> str:
    """A chain as a chart title: its length, and its ops when few ('2 ops: scale→gelu', '8 ops: a→…→z').

    A label with other axes in it ('n=1024, scale→gelu') is returned as it is."""
    if "=" in series or series == "all":
        return series
    ops = series.split("→")
    shown = series if len(ops) <= limit else f"{ops[0]}→…→{ops[-1]}"
    return f"{len(ops)} op{'s' * (len(ops) > 1)}: {shown}"
