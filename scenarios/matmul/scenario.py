"""Matmul tiling: C = A·B, optionally C = gelu(A·B + bias) — what tiling buys, and how far a library still is.

A is M×K, B is K×N, C is M×N, stored in float32 or float16; every kernel accumulates in float32. The
arithmetic is fixed at 2·M·N·K FLOPs whatever the kernel does, so the variants differ only in how often each
operand byte crosses the device-memory boundary:

- `unblocked`: every output is computed from operands fetched from device memory, with no on-chip reuse by
  design: a row of A and a column of B per output, 2·M·N·K elements read.
- `tiled`: the output is cut into BM×BN tiles and K into BK slices; each step stages a BM×BK slice of A and a
  BK×BN slice of B on chip (shared memory on a GPU, cache-resident packed buffers on a CPU) and reuses every
  staged element BN (resp. BM) times. A is then read once per column of tiles and B once per row of tiles:
  M·K·⌈N/BN⌉ + K·N·⌈M/BM⌉ elements, which is M·N·K·(1/BN + 1/BM) when the tile divides the output.
- `library`: cuBLAS through CuPy on a GPU, NumPy's BLAS on the CPU, torch.matmul on both. Its own tiling is
  unknown, so the ledger counts the compulsory traffic: A and B read once, C written once — a lower bound.

The `bias_gelu` epilogue, C = gelu(A·B + bias) with the tanh gelu of the elementwise scenario and a bias of
length N broadcast over rows, is where fusion comes back: `unfused` is the tiled kernel writing A·B to device
memory and a separate elementwise kernel reading it back, `fused` applies the epilogue to the accumulator tile
before its single store, removing one M×N intermediate (2·M·N·s bytes), and `library` is the library matmul
followed by the backend's elementwise kernel. torch adds `eager` (mm, bias add and gelu, one op each: the
ledger counts its two M×N intermediates) and `compiled` (the same through torch.compile, credited with the
compulsory traffic and the epilogue fused, the best the compiler could do). Every entry accepts either epilogue (a variant of the other
family adds the separate epilogue kernel or none), but `variants_for` names the three variants a case compares.

Tolerance: a float32 sum of K products in any order is within about √K·u·Σ|a||b| of the exact one (u = 2⁻²⁴),
so the bound is computed per element from |A|·|B| and held against the same relative-error metric as every
other check; float16 storage adds the rounding NumPy itself makes when it stores in float16.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scenarios.elementwise_chain import FLOPS, OPS
from scenarios.matmul.config import VARIANTS_BY_EPILOGUE, MatmulConfig
from suite.core import dtypes
from suite.core.errors import ConfigError
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.numerics import FLOOR, rel_err
from suite.core.scenario import Params, Scenario, register
from suite.core.tolerances import Tolerance, per_dtype

if TYPE_CHECKING:
    import pandas as pd

EPILOGUES = ("none", "bias_gelu")
EPILOGUE_FLOPS = 1 + FLOPS["gelu"]
"""Per output element: the bias add and the gelu (counted as in the elementwise scenario)."""
TILE_SIZES = (16, 32, 64, 128, 256)
"""Allowed BM, BN, BK: powers of two (Triton's tl.arange) of at least 16 (Triton's tl.dot)."""
MAX_DIM = 2**16
MAX_OPERAND = 2**31 - 1
"""Kernels index an operand with 32-bit ints in places; beyond that the case is refused, not silently wrong."""
U32 = 2.0**-24
GELU_SLOPE = 1.13
"""max |gelu'(x)| (about 1.129 near x = 1.5): an error in A·B + bias reaches the output at most this much larger."""
LIMITS = Tolerance(ceiling=per_dtype(0.05, 0.25))
"""The usual floor; the ceiling in float16 with the epilogue: the unfused intermediate keeps half an ulp of A·B ≈ 1 (about 5e-4) that bias can
cancel down to nothing, and the metric weighs that against 1e-3 of the largest output: the decomposition's own
error reaches 0.05-0.1 there, so its tolerance (four times that) needs room above elementwise's 0.05."""

BF16_FLIP = "bfloat16 with the epilogue: a kernel summing A·B in another order may store its neighbour"
"""where NumPy's float32 product sits near a bfloat16 rounding boundary: one bfloat16 ulp (2⁻⁷ of |A·B|) that
bias then cancels is up to ~1 of the metric's floor (seen: 0.77 against the emulation's own 0.09 at 19×13×23).
float16's ulp is 8× finer and its four-times-own tolerance already holds such a flip; bfloat16's gets twice the
flip's bound (gelu's slope times one ulp of |A·B|, over the metric's denominator)."""

T1 = [16, 16, 16]
SMALL_TILES = [[32, 32, 32], [64, 64, 32]]
SWEEP = [[16, 16, 16], [32, 32, 32], [64, 64, 32], [64, 64, 64], [128, 128, 32], [128, 128, 64]]


def tiled_reads(m: int, n: int, k: int, bm: int, bn: int) -> int:
    """Operand elements a BM×BN tiling reads: A once per column of tiles, B once per row of tiles."""
    return m * k * math.ceil(n / bn) + k * n * math.ceil(m / bm)


def gelu(v: np.ndarray) -> np.ndarray:
    return OPS["gelu"](v)


@register
class Matmul(Scenario):
    name = "matmul"
    inputs = ("a", "b", "bias")
    variants = ("unblocked", "tiled", "unfused", "fused", "library", "eager", "compiled")
    baseline = "unfused"
    pairs = (
        ("tiled", "unblocked"),
        ("fused", "unfused"),
        ("tiled", "library"),
        ("fused", "library"),
        ("compiled", "eager"),
        ("library", "eager"),
    )
    rivals = (("fused", "compiled"), ("tiled", "compiled"))
    axes = ("m", "n", "k", "epilogue", "tile")
    list_axes = ("tile",)
    size_axis = "m"
    config = MatmulConfig
    model_tour = "model_matmul"
    gpu_check = "gpu_matmul"
    summary = {"m": 4096, "epilogue": "bias_gelu"}
    limits = LIMITS
    presets = {
        "S": {"m": [129], "n": [77], "k": [200], "epilogue": list(EPILOGUES), "tile": [T1, [32, 32, 32]]},
        "M": {"m": [256, 512], "n": [512], "k": [512], "epilogue": list(EPILOGUES), "tile": SMALL_TILES},
        "L": {"m": [1024], "n": [1024], "k": [1024], "epilogue": list(EPILOGUES), "tile": SWEEP},
    }

    checks = [
        {"m": 19, "n": 13, "k": 23, "epilogue": "none", "tile": T1},
        {"m": 19, "n": 13, "k": 23, "epilogue": "bias_gelu", "tile": T1},
        {"m": 33, "n": 18, "k": 40, "epilogue": "bias_gelu", "tile": [32, 16, 16]},
    ]

    def variants_for(self, params: Params) -> tuple[str, ...]:
        """The variants a case compares: unblocked/tiled/library without an epilogue, unfused/fused/library with."""
        return VARIANTS_BY_EPILOGUE[params["epilogue"]]

    def check(self, params: Params) -> None:
        for axis in ("m", "n", "k"):
            v = params[axis]
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_DIM:
                raise ConfigError(f"scenario.{axis}={v!r} must be an integer in 1..{MAX_DIM}")
        m, n, k = params["m"], params["n"], params["k"]
        if max(m * k, k * n, m * n) > MAX_OPERAND:
            raise ConfigError(f"matmul {m}×{n}×{k}: an operand exceeds {MAX_OPERAND} elements")
        if params["epilogue"] not in EPILOGUES:
            raise ConfigError(f"unknown scenario.epilogue={params['epilogue']!r}; valid: {', '.join(EPILOGUES)}")
        tile = params["tile"]
        if not isinstance(tile, list | tuple) or len(tile) != 3 or any(t not in TILE_SIZES for t in tile):
            raise ConfigError(
                f"scenario.tile={tile!r} must be [BM, BN, BK] (or a list of them), each one of: "
                f"{', '.join(map(str, TILE_SIZES))}"
            )

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        m, n, k = params["m"], params["n"], params["k"]
        return {"a": (m, k), "b": (k, n), "bias": (n,)}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A ~ U(-1, 1), B ~ U(-1, 1)·√(3/K): A·B stays near unit scale, where gelu bends, whatever K is."""
        m, n, k = params["m"], params["n"], params["k"]
        return {
            "a": rng.uniform(-1.0, 1.0, (m, k)).astype(dtype),
            "b": (rng.uniform(-1.0, 1.0, (k, n)) * math.sqrt(3.0 / k)).astype(dtype),
            "bias": rng.uniform(-1.0, 1.0, n).astype(dtype),
        }

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        c = inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)
        if params["epilogue"] == "bias_gelu":
            c = gelu(c + inputs["bias"].astype(np.float64))
        return c

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (params["m"], params["n"])

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """Per kernel, in elements × s: see the module docstring for the derivation of each count."""
        m, n, k = params["m"], params["n"], params["k"]
        bm, bn, _ = params["tile"]
        s = np.dtype(dtype).itemsize
        mnk2, mn = 2 * m * n * k, m * n
        unblocked = KernelTraffic("unblocked matmul", 2 * m * n * k * s, mn * s, mnk2)
        tiled = KernelTraffic(f"tiled matmul {bm}×{bn}", tiled_reads(m, n, k, bm, bn) * s, mn * s, mnk2)
        library = KernelTraffic("library matmul", (m * k + k * n) * s, mn * s, mnk2)
        held = (m * k + k * n + (n if params["epilogue"] == "bias_gelu" else 0) + mn) * s  # A, B, bias and C
        if params["epilogue"] == "none":
            kernels = {"unblocked": (unblocked,), "tiled": (tiled,), "library": (library,), "compiled": (library,)}
            out = {v: VariantLedger(v, kernels[v], peak_bytes=held) for v in kernels}
            return out | {v: VariantLedger(v, (tiled,), peak_bytes=held) for v in ("unfused", "fused", "eager")}
        epi_flops = EPILOGUE_FLOPS * mn
        epilogue = KernelTraffic("bias+gelu", (mn + n) * s, mn * s, epi_flops)
        fused = KernelTraffic(f"tiled matmul {bm}×{bn} + bias+gelu", tiled.bytes_read + n * s, mn * s, mnk2 + epi_flops)
        removed = (Intermediate("A·B", mn, s),)
        bias_add = KernelTraffic("bias add", (mn + n) * s, mn * s, mn)
        gelu_only = KernelTraffic("gelu", mn * s, mn * s, FLOPS["gelu"] * mn)
        compiled = KernelTraffic("library matmul + bias+gelu", (m * k + k * n + n) * s, mn * s, mnk2 + epi_flops)
        # Memory: A, B, bias and C throughout, plus the stored A·B while the separate epilogue reads it; eager's
        # bias add writes a second M×N tensor beside it, which gelu then reads into C.
        apart = live_peak(held, [((), ("ab",)), (("ab",), ())], {"ab": mn * s})
        eager = live_peak(held, [((), ("ab",)), (("ab",), ("h",)), (("h",), ())], {"ab": mn * s, "h": mn * s})
        return {
            "unblocked": VariantLedger("unblocked", (unblocked, epilogue), peak_bytes=apart),
            "tiled": VariantLedger("tiled", (tiled, epilogue), peak_bytes=apart),
            "unfused": VariantLedger("unfused", (tiled, epilogue), peak_bytes=apart),
            "fused": VariantLedger("fused", (fused,), removed, held),
            "library": VariantLedger("library", (library, epilogue), peak_bytes=apart),
            "eager": VariantLedger("eager", (library, bias_add, gelu_only), peak_bytes=eager),
            "compiled": VariantLedger("compiled", (compiled,), removed, held),
        }

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """The larger of a float32-accumulation bound and four times NumPy's own error in `dtype` storage.

        Accumulation: |error| ≤ max(4, √K)·u·(|A|·|B|) per element (times gelu's steepest slope with the
        epilogue), divided by the metric's denominator max(|ref|, 1e-3·max|ref|). Storage: the same matmul by
        NumPy in float32, rounded to `dtype` wherever a kernel stores (the unfused intermediate included).
        """
        a, b = inputs["a"], inputs["b"]
        k, epilogue = params["k"], params["epilogue"]
        bound = max(4.0, math.sqrt(k)) * U32 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
        if epilogue == "bias_gelu":
            bound *= GELU_SLOPE
        scale = float(np.max(np.abs(ref), initial=0.0))
        denom = np.maximum(np.abs(ref), max(FLOOR * scale, float(dtypes.finfo(dtype).tiny)))
        accum = float(np.max(bound / denom, initial=0.0))
        c = (a.astype(np.float32) @ b.astype(np.float32)).astype(dtype)
        if epilogue == "bias_gelu":
            c = gelu(c.astype(np.float32) + inputs["bias"].astype(np.float32)).astype(dtype)
        own = rel_err(c, ref)
        flip = 0.0
        if epilogue == "bias_gelu" and dtype == "bfloat16":  # see BF16_FLIP
            ab = np.abs(a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)
            flip = float(np.max(GELU_SLOPE * dtypes.eps(dtype) * ab / denom, initial=0.0))
        return self.limits.clip(dtype, max(accum, 4.0 * own, 2.0 * flip))

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """Each of M, N, K cut to an odd length (a multiple of no tile) so that A, B and C together stay within
        `max_elements`, and never above 63: the simulator runs every CUDA thread as a Python thread."""
        side = int(min(63, max(9, math.sqrt(max_elements / 3))))
        side -= 1 - side % 2
        return {**params, **{axis: min(params[axis], side) for axis in ("m", "n", "k")}}

    def charts(self, rows: pd.DataFrame, outdir: Path) -> list[Path]:
        """Tile sweep, GFLOP/s against the library, roofline (scenarios.matmul.charts)."""
        from scenarios.matmul.charts import matmul_charts

        return matmul_charts(rows, outdir)

    def report_sections(self, rows: pd.DataFrame) -> list[str]:
        from scenarios.matmul.report import matmul_section

        return [matmul_section(rows)]
