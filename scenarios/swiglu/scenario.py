"""swiglu: the gated activation of Llama-style MLPs, y = silu(a) · b, where silu(v) = v / (1 + exp(−v)).

a and b are the gate and up projections of the same tokens, (rows, cols) each with cols the intermediate size.
They are two inputs rather than one (rows, 2·cols) gate-up matrix split in half: that is how Hugging Face's
Llama MLP and Liger's `LigerSiLUMulFunction` take them (two projections), every kernel then reads two contiguous
matrices with no row stride to carry, and a merged gate-up projection would only change where the two halves
start, not the bytes moved. Every kernel computes in float32 and stores in the case's dtype.

Unfused: silu(a) into a temporary s (N elements of the case's dtype, written and read back), then s · b. Fused:
one kernel reads a and b once and writes y: ΔQ = 2·N·s, one launch fewer, and the temporary's N·s never
allocated (peak memory 3·N·s against 4·N·s). The ratio the ledger predicts is 5 : 3, at any size. torch has no
library op for it (the `library` variant is Liger's fused kernel, backend `liger`, on CUDA); its eager
decomposition (`aten.silu.out`, then `mul.out`) and torch.compile of it are the rivals on every device.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scenarios.swiglu.backward import SwiGLUBackward
from scenarios.swiglu.config import SwiGLUConfig
from scenarios.swiglu.decomposition import INPUTS, swiglu_ledger
from suite.core.errors import ConfigError
from suite.core.host_memory import guard
from suite.core.ledger import VariantLedger
from suite.core.numerics import rel_err
from suite.core.scenario import Params, Scenario, register
from suite.core.tolerances import Tolerance, per_dtype

if TYPE_CHECKING:
    import pandas as pd

MAX_ELEMENTS = 2**31 - 1


def silu32(v: np.ndarray) -> np.ndarray:
    one = np.float32(1)
    return v / (one + np.exp(-v))


def emulate(inputs: dict[str, np.ndarray], dtype: str) -> np.ndarray:
    """The unfused decomposition in float32 with the temporary rounded to `dtype`: what storage precision costs."""
    with np.errstate(over="ignore"):
        s = silu32(inputs["a"].astype(np.float32)).astype(dtype).astype(np.float32)
    return (s * inputs["b"].astype(np.float32)).astype(dtype)


@register
class SwiGLU(Scenario):
    name = "swiglu"
    config = SwiGLUConfig
    model_tour = "model_swiglu"
    limits = Tolerance(ceiling=per_dtype(1e-3, 2e-2))
    """The usual floor; a cap low as an elementwise op of two roundings has no long sum to excuse more."""
    inputs = INPUTS
    training = SwiGLUBackward()
    train_tour = "train_swiglu"
    gpu_check = "gpu_swiglu"
    summary = {"rows": 4096, "cols": 14336}
    variants = ("fused", "unfused", "library", "eager", "compiled")
    axes = ("rows", "cols")
    size_axis = "cols"
    memory_bound = True
    presets = {
        # S: smoke runs and tests — awkward tokens and widths.
        "S": {"rows": [33], "cols": [193, 781]},
        # M: the default run — 1823 awkward tokens by intermediate sizes up to 8192: fused moves 3 matrices,
        # 22 to 180 MB at float32, well past the host's caches.
        "M": {"rows": [1823], "cols": [1024, 2816, 8192]},
        # L: many tokens at Llama-2-7B's and Llama-3-8B's intermediate sizes.
        "L": {"rows": [16384], "cols": [11008, 14336]},
    }
    checks = [
        {"rows": 1, "cols": 1},
        {"rows": 7, "cols": 193},
        {"rows": 3, "cols": 1000},
    ]
    """One element; 7 × 193 = 1351 elements, no multiple of a block or a vector; 3000 across several blocks."""

    def check(self, params: Params) -> None:
        rows, cols = params["rows"], params["cols"]
        for key, value in (("rows", rows), ("cols", cols)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"scenario.{key}={value!r} must be a positive integer")
        if rows * cols > MAX_ELEMENTS:
            raise ConfigError(f"scenario.rows·cols = {rows * cols:,} exceeds {MAX_ELEMENTS:,} elements")
        need = rows * cols * (4 * 4 + 3 * 8)  # a, b, y, s; the float64 reference and its temporaries
        guard(need, f"swiglu of {rows} × {cols}")

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        return {name: (params["rows"], params["cols"]) for name in INPUTS}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        shape = (params["rows"], params["cols"])
        a = rng.random(shape, dtype=np.float32) * np.float32(12.0) - np.float32(6.0)  # silu's bend and both tails
        b = rng.random(shape, dtype=np.float32) * np.float32(6.0) - np.float32(3.0)
        return {"a": a.astype(dtype, copy=False), "b": b.astype(dtype, copy=False)}

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (params["rows"], params["cols"])

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        a = inputs["a"].astype(np.float64)
        return a / (1.0 + np.exp(-a)) * inputs["b"].astype(np.float64)

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        return swiglu_ledger(params, dtype)

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Four times the error of the unfused decomposition done in `dtype` storage, within per-dtype limits
        (no reduction: the error does not grow with the shape)."""
        return self.limits.clip(dtype, 4.0 * rel_err(emulate(inputs, dtype), ref))

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """Fewer rows; a row wider than the budget is cut to it (elementwise: nothing depends on the width)."""
        rows, cols = params["rows"], params["cols"]
        if cols <= max_elements:
            return {**params, "rows": max(1, min(rows, max_elements // cols))}
        return {**params, "rows": 1, "cols": max_elements}

    def report_sections(self, rows: pd.DataFrame) -> list[str]:
        from scenarios.swiglu.report import fusion_section

        return [fusion_section(rows)]

    def charts(self, rows: pd.DataFrame, outdir: Path) -> list[Path]:
        return []
