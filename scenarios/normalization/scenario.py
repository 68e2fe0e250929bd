"""Row-wise normalization — layernorm, rmsnorm, softmax over a (rows, cols) matrix — where fusion matters most.

Each op reduces a row to one or two statistics and then rewrites the row with them. Unfused, every reduction and
every elementwise step is its own kernel: statistics and whole intermediate matrices go to device memory and come
back. Fused, one kernel reads a row, keeps it on chip while it computes the statistics, and writes the result:
x read once, y written once. That holds while the row fits the kernel's tile: `tile` columns, held in the
registers of one thread block (CuPy, Numba CUDA) or one program (Triton) on a GPU, and in L1/L2 on the CPU
(float32 rows in place, halves converted into a float32 buffer). A wider row is walked in chunks of `tile`
columns twice — once for the statistics (Chan's merge of chunk means and M2 for layernorm, an online max with
a rescaled sum for softmax), once to write — so the fused kernel re-reads x once, and the ledger counts it.
The library variant (torch's layer_norm, rms_norm, softmax) and the compiler's (torch.compile of the
decomposition) are given the fused kernel's minimal ledger; torch's eager decomposition the unfused one.

Exact meaning, over the last axis, eps = 1e-5 (every kernel computes in float32 and stores in the case's dtype):
    layernorm(x) = (x − mean) / sqrt(var + eps) · weight + bias      (biased variance)
    rmsnorm(x)   = x / sqrt(mean(x²) + eps) · weight
    softmax(x)   = exp(x − max) / sum(exp(x − max))

The canonical unfused decomposition is `DECOMPOSITIONS` (in `decomposition`): each step is one kernel, and every backend builds
its unfused variant by walking that table, so unfused and fused differ only in fusion. Matrices (x, y and the
intermediates) hold rows·cols elements of the case's dtype (s bytes); row statistics are float32 vectors of
`rows`; weight and bias are vectors of `cols` in the case's dtype.

The ledger counts the outer-memory boundary (HBM on cuda, DRAM on cpu) and assumes no cache reuse across
kernels or across a fused kernel's two passes: each step reads every tensor it names once and writes its output
once. A fused kernel reads x once, weight and bias once, writes y once, and reads x once more when cols > tile.
On a CPU a re-read row of cols·s bytes usually still sits in L2, so the re-read is cheap there; the ledger
still counts it, as the bytes the algorithm asks of memory. Removing a materialised matrix saves 2·N·s bytes
(N = rows·cols), a row statistic 2·rows·4; the unfused decomposition also reads x and some intermediates more
than once, which fusion removes as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scenarios.normalization.backward import Float32, NormBackward
from scenarios.normalization.config import LayerNormConfig, RMSNormConfig, SoftmaxConfig
from scenarios.normalization.decomposition import DECOMPOSITIONS, ROW_STATS, normalization_ledger
from suite.core.errors import ConfigError
from suite.core.host_memory import guard
from suite.core.ledger import VariantLedger
from suite.core.numerics import rel_err
from suite.core.scenario import Params, Scenario, register
from suite.core.tolerances import Tolerance, per_dtype

if TYPE_CHECKING:
    import pandas as pd

EPS = 1e-5
MAX_ELEMENTS = 2**31 - 1
"""rows·cols; kernels index rows with 32-bit grid coordinates, columns and offsets with 64-bit integers."""
TILE_MIN, TILE_MAX = 32, 16384
"""tile: a power of two in this range; on a GPU a tile of float32 per row must fit a block's registers."""


def tile_for(cols: int) -> int:
    """The tile that holds a row of `cols` whole: the next power of two, within TILE_MIN..TILE_MAX (a model's
    experiments set the tile from its widths through the resolver `fusebench_tile`)."""
    return min(max(TILE_MIN, 1 << (int(cols) - 1).bit_length()), TILE_MAX)


MAX_GRID_Y = 65535
"""Unfused elementwise kernels on a GPU launch one block per (row, chunk of `tile` columns) in grid dimension y."""
OFFSET = 80.0
"""Odd rows are shifted by +80: softmax is then stable only with the max subtracted (exp(83) · cols overflows
float32), and a one-pass variance E[x²] − E[x]² would cancel catastrophically."""


# Tolerance: the unfused decomposition evaluated by NumPy in the case's storage precision ------------------------

LIMITS = Tolerance(ceiling=per_dtype(0.05, 0.2))
"""The usual floor (a few units in the last place of the stored result) and a cap beyond which the storage
precision cannot be the excuse; add_rmsnorm's too."""
LANES = 8
"""Running sums of the emulated reductions (one AVX2 register of float32)."""
STAT_ULPS = 4
"""How far (in float32 units in the last place of their magnitude) a kernel's row statistic may be off."""


def _lane_sum(v: np.ndarray, lanes: int = LANES) -> np.ndarray:
    """Row sums in float32 the way a vectorised loop adds: `lanes` running sums, each one element after another,
    then the lanes added in turn. Worse than a GPU's tree, and than any kernel using more lanes."""
    rows, cols = v.shape
    padded = np.zeros((rows, -(-cols // lanes) * lanes), dtype=np.float32)
    padded[:, :cols] = v
    partial = np.cumsum(padded.reshape(rows, -1, lanes), axis=1, dtype=np.float32)[:, -1, :]
    return np.cumsum(partial, axis=-1, dtype=np.float32)[:, -1]


def _numpy_step(op: str, v: np.ndarray, stat: np.ndarray | None, env: dict[str, np.ndarray]) -> np.ndarray:
    """One step of a decomposition in float32 NumPy, the way the kernels compute it."""
    cols = np.float32(v.shape[-1])
    if op in ("mean", "mean_square", "sum"):
        total = _lane_sum(v * v if op == "mean_square" else v)
        return total if op == "sum" else total / cols
    if op == "max":
        return v.max(axis=-1)
    if op in ("center", "shift"):
        return v - stat
    if op == "normalize":
        return v * (np.float32(1) / np.sqrt(stat + np.float32(EPS)))
    if op == "divide":
        return v * (np.float32(1) / stat)
    if op == "exp":
        return np.exp(v)
    return v * env["weight"] + env["bias"] if op == "scale_shift" else v * env["weight"]


def emulate(op: str, inputs: dict[str, np.ndarray], dtype: str) -> np.ndarray:
    """Walk the decomposition in float32, rounding every stored matrix to `dtype`, summing in 8 lanes.

    The error of this against the float64 reference is what storage precision and row length alone cost; the
    tolerance is a multiple of it, so it grows with cols (a sum of 65,536 halves is not exact) and with
    conditioning (rows far from zero), as a correct kernel's error does.
    """
    env = {name: a.astype(np.float32) for name, a in inputs.items()}
    for st in DECOMPOSITIONS[op]:
        stat = env[st.reads[1]][:, None] if len(st.reads) > 1 and st.reads[1] in ROW_STATS else None
        out = _numpy_step(st.op, env[st.reads[0]], stat, env)
        env[st.writes] = out if st.writes in ROW_STATS else out.astype(dtype).astype(np.float32)
    return env["y"].astype(dtype)


FLOAT32 = Float32(EPS, STAT_ULPS, _numpy_step, _lane_sum)
"""The float32 numerics above, for the backward pass's tolerance (`backward`, which this module imports)."""


class RowNormalization(Scenario):
    """What the three ops share: axes, presets, checks, inputs, ledger and tolerance; subclasses add the math."""

    variants = ("fused", "unfused", "library", "eager", "compiled")
    limits = LIMITS
    resolvers = {"tile": tile_for}
    axes = ("rows", "cols", "tile")
    size_axis = "cols"
    memory_bound = True
    presets = {
        # S: smoke runs and tests — an awkward row that fits the tile and one that does not.
        "S": {"rows": [33], "cols": [193, 781], "tile": [256]},
        # M: the default run — cols across the 4096-column tile (8192 and 16384 are re-read), 1823 awkward rows.
        "M": {"rows": [1823], "cols": [256, 781, 4096, 8192, 16384], "tile": [4096]},
        # L: the CPU performance shape (65,536 × 1,024), and the same rows fitting or exceeding a smaller tile.
        "L": {"rows": [65536], "cols": [1024, 2048, 4096], "tile": [1024, 4096]},
    }
    checks = [
        {"rows": 1, "cols": 1, "tile": 64},
        {"rows": 7, "cols": 193, "tile": 64},
        {"rows": 3, "cols": 300, "tile": 512},
    ]
    """cols = 1; 193 = 3 tiles of 64 and one column (chunked path, ragged last chunk); 300 in one tile of 512."""

    def check(self, params: Params) -> None:
        rows, cols, tile = params["rows"], params["cols"], params["tile"]
        for key, value in (("rows", rows), ("cols", cols), ("tile", tile)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"scenario.{key}={value!r} must be a positive integer")
        if rows * cols > MAX_ELEMENTS:
            raise ConfigError(f"scenario.rows·cols = {rows * cols:,} exceeds {MAX_ELEMENTS:,} elements")
        if tile & (tile - 1) or not TILE_MIN <= tile <= TILE_MAX:
            raise ConfigError(f"scenario.tile={tile} must be a power of two in {TILE_MIN}..{TILE_MAX}")
        if -(-cols // tile) > MAX_GRID_Y:
            raise ConfigError(f"scenario.cols={cols} needs more than {MAX_GRID_Y} tiles of {tile}; raise scenario.tile")
        need = rows * cols * (4 * 4 + 3 * 8)  # x, y, two intermediates; the float64 reference and its temporaries
        guard(need, f"{self.name} of {rows} × {cols}")

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        rows, cols = params["rows"], params["cols"]
        return {name: (rows, cols) if name == "x" else (cols,) for name in self.inputs}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        rows, cols = params["rows"], params["cols"]
        x = rng.random((rows, cols), dtype=np.float32) * np.float32(6.0) - np.float32(3.0)
        x[1::2] += np.float32(OFFSET)
        vectors = {
            "weight": rng.uniform(0.5, 1.5, cols),
            "bias": rng.uniform(-0.1, 0.1, cols),
        }
        out = {"x": x.astype(dtype, copy=False)}
        out.update({name: vectors[name].astype(dtype) for name in self.inputs if name in vectors})
        return out

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (params["rows"], params["cols"])

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        return normalization_ledger(self.name, self.inputs, params, dtype)

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Four times the error of the unfused decomposition done in `dtype` storage, at least what statistics
        off by a few units in their last place would cost (`slack`), within per-dtype limits."""
        with np.errstate(over="ignore", invalid="ignore"):
            own = rel_err(emulate(self.name, inputs, dtype), ref)
        return self.limits.clip(dtype, max(4.0 * own, self.slack(inputs, ref)))

    def slack(self, inputs: dict[str, np.ndarray], ref: np.ndarray) -> float:
        """The error that row statistics off by STAT_ULPS float32 ulps would cause; 0 where that is negligible."""
        return 0.0

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """Fewer rows; a row wider than the budget shrinks too, but stays wider than its (possibly smaller) tile."""
        rows, cols, tile = params["rows"], params["cols"], params["tile"]
        if cols <= max_elements:
            return {**params, "rows": max(1, min(rows, max_elements // cols))}
        if cols <= tile:
            return {**params, "rows": 1, "cols": max_elements}
        small = max(TILE_MIN, min(tile, 1 << max(0, (max_elements // 2).bit_length() - 1)))
        return {**params, "rows": 1, "cols": max(max_elements - 1, small + 1), "tile": small}

    def _x64(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        return inputs["x"].astype(np.float64)

    # What the report adds for the three: effective bandwidth against cols with the tile marked, and where fusion
    # stopped paying with the ledger's reason (the re-read past the tile) beside it.

    def charts(self, rows: pd.DataFrame, outdir: Path) -> list[Path]:
        from scenarios.normalization.charts import effective_bandwidth_chart

        return effective_bandwidth_chart(rows, outdir)

    def report_sections(self, rows: pd.DataFrame) -> list[str]:
        from scenarios.normalization.report import fusion_section

        return [fusion_section(rows)]


@register
class LayerNorm(RowNormalization):
    name = "layernorm"
    config = LayerNormConfig
    model_tour = "model_layernorm"
    inputs = ("x", "weight", "bias")
    training = NormBackward("layernorm", FLOAT32)
    train_tour = "train_layernorm"
    gpu_check = "gpu_layernorm"
    summary = {"rows": 16384, "cols": 8192}

    def slack(self, inputs: dict[str, np.ndarray], ref: np.ndarray) -> float:
        """A mean off by STAT_ULPS ulps of mean|x| shifts y by that · rstd · |weight|: with rows far from zero
        (x ≈ 80, σ ≈ 1.7) that is the error one emulated draw may happen to miss, and any kernel can make."""
        x = self._x64(inputs)
        scale = np.spacing(np.abs(x).mean(axis=-1).astype(np.float32)).astype(np.float64)
        shift = STAT_ULPS * scale / np.sqrt(x.var(axis=-1) + EPS)
        err = shift[:, None] * np.abs(inputs["weight"].astype(np.float64))[None, :]
        return rel_err(ref + err, ref)

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        x = self._x64(inputs)
        xc = x - x.mean(axis=-1, keepdims=True)
        var = np.mean(xc * xc, axis=-1, keepdims=True)
        return xc / np.sqrt(var + EPS) * inputs["weight"].astype(np.float64) + inputs["bias"].astype(np.float64)


@register
class RMSNorm(RowNormalization):
    name = "rmsnorm"
    config = RMSNormConfig
    model_tour = "model_rmsnorm"
    inputs = ("x", "weight")
    training = NormBackward("rmsnorm", FLOAT32)
    train_tour = "train_rmsnorm"
    gpu_check = "gpu_rmsnorm"
    summary = {"rows": 16384, "cols": 8192}

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        x = self._x64(inputs)
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * inputs["weight"].astype(np.float64)


@register
class Softmax(RowNormalization):
    name = "softmax"
    config = SoftmaxConfig
    model_tour = "model_softmax"
    inputs = ("x",)
    training = NormBackward("softmax", FLOAT32)
    train_tour = "train_softmax"
    gpu_check = "gpu_softmax"
    summary = {"rows": 16384, "cols": 8192}

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        x = self._x64(inputs)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
