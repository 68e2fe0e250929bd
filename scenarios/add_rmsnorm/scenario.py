"""add_rmsnorm: the residual add and the RMSNorm after it, the pair every pre-norm transformer layer runs twice.

    h = x + residual                      (written out: the next layer's residual stream)
    y = h / sqrt(mean(h²) + eps) · weight (eps = 1e-5, over the last axis)

Every kernel computes in float32 and stores h and y in the case's dtype. Unfused, the add is its own kernel and
writes h; rmsnorm's three steps then read h back (twice: once for the mean square, once to normalise), write a
row statistic and a normalised matrix, and read that again to scale it. Fused, one kernel per row reads x,
residual and weight once and writes h and y once: the statistic and the normalised matrix never exist, and h is
never read back. So fusion removes more than its intermediates' 2·N·s + 2·rows·4 bytes: also the two re-reads of
h, 4·N·s in all of the unfused 8·N·s + cols·s + 8·rows against the fused 4·N·s + cols·s. A row wider than the
kernel's `tile` is walked twice and its second pass reads x and residual again (see `decomposition`).

Two outputs, one buffer: the suite gives a family one output array (`output_shape`), which it poisons, checks
and saves. The two outputs are stacked in it as out[0] = h and out[1] = y, a (2, rows, cols) array whose halves
are contiguous (row-major), so every kernel writes each through a plain view and the numerics check covers both
with one relative error. Inputs draw x and residual from [−3, 3], so h and y have the same order of magnitude and
the error floor the check takes from the largest reference value (1e-3 of it) is as fine for y as for h.

The library variant is torch's residual add followed by `F.rms_norm` on h (two kernels; on the CPU torch's
rms_norm is itself a composite); torch.compile of the decomposition is `compiled`, given the fused ledger.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scenarios.add_rmsnorm.backward import AddRMSNormBackward
from scenarios.add_rmsnorm.config import AddRMSNormConfig
from scenarios.add_rmsnorm.decomposition import INPUTS, add_rmsnorm_ledger
from scenarios.normalization import EPS, RowNormalization, emulate
from suite.core.ledger import VariantLedger
from suite.core.numerics import rel_err
from suite.core.scenario import Params, register

if TYPE_CHECKING:
    import pandas as pd


def emulate_add_rmsnorm(inputs: dict[str, np.ndarray], dtype: str) -> np.ndarray:
    """The unfused decomposition in float32 with h and every later matrix rounded to `dtype` (rmsnorm's steps
    as the rmsnorm family emulates them, 8-lane sums): what storage precision and row length alone cost."""
    h = (inputs["x"].astype(np.float32) + inputs["residual"].astype(np.float32)).astype(dtype)
    return np.stack([h, emulate("rmsnorm", {"x": h, "weight": inputs["weight"]}, dtype)])


@register
class AddRMSNorm(RowNormalization):
    """Rows, cols and tile as the normalization family's (its checks of an input and its emulated slices too)."""

    name = "add_rmsnorm"
    config = AddRMSNormConfig
    model_tour = "model_add_rmsnorm"
    inputs = INPUTS
    training = AddRMSNormBackward()
    train_tour = "train_add_rmsnorm"
    gpu_check = "gpu_add_rmsnorm"
    summary = {"rows": 2048, "cols": 16384}
    presets = {
        # S: smoke runs and tests — an awkward row that fits the tile and one that does not.
        "S": {"rows": [33], "cols": [193, 781], "tile": [256]},
        # M: the default run — a model's hidden sizes on 1823 awkward tokens, every row held whole: fused moves
        # 4 matrices, 30 to 240 MB at float32, well past the host's caches.
        "M": {"rows": [1823], "cols": [1024, 4096, 8192], "tile": [8192]},
        # L: many tokens, with the rows fitting a tile of 8192 and exceeding one of 4096 (x, residual re-read).
        "L": {"rows": [16384], "cols": [4096, 8192], "tile": [4096, 8192]},
    }
    checks = [
        {"rows": 1, "cols": 1, "tile": 64},
        {"rows": 7, "cols": 193, "tile": 64},
        {"rows": 3, "cols": 300, "tile": 512},
    ]
    """cols = 1; 193 = 3 tiles of 64 and one column (the two-pass path, ragged last chunk); 300 in one tile."""

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        rows, cols = params["rows"], params["cols"]
        return {"x": (rows, cols), "residual": (rows, cols), "weight": (cols,)}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        rows, cols = params["rows"], params["cols"]
        x = rng.random((rows, cols), dtype=np.float32) * np.float32(6.0) - np.float32(3.0)
        residual = rng.random((rows, cols), dtype=np.float32) * np.float32(6.0) - np.float32(3.0)
        weight = rng.uniform(0.5, 1.5, cols)
        return {
            "x": x.astype(dtype, copy=False),
            "residual": residual.astype(dtype, copy=False),
            "weight": weight.astype(dtype),
        }

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (2, params["rows"], params["cols"])

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        h = inputs["x"].astype(np.float64) + inputs["residual"].astype(np.float64)
        y = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + EPS) * inputs["weight"].astype(np.float64)
        return np.stack([h, y])

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        return add_rmsnorm_ledger(params, dtype)

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Four times the error of the unfused decomposition done in `dtype` storage, within rmsnorm's limits."""
        own = rel_err(emulate_add_rmsnorm(inputs, dtype), ref)
        return self.limits.clip(dtype, 4.0 * own)

    def charts(self, rows: pd.DataFrame, outdir: Path) -> list[Path]:
        return []

    def report_sections(self, rows: pd.DataFrame) -> list[str]:
        from scenarios.add_rmsnorm.report import fusion_section

        return [fusion_section(rows)]
