"""Attention: O = softmax(Q·Kᵀ / √d + mask) · V — the headline case for fusion, and for a tuned library rival.

Input q has shape (batch, heads, seq_len, head_dim), k and v (batch, kv_heads, seq_len, head_dim): grouped-query
attention, where each K/V head serves a group of g = heads/kv_heads query heads, query head h reading K/V head
h // g (Hugging Face's `repeat_kv`, torch SDPA's `enable_gqa`); kv_heads = heads is multi-head attention. Write
N = batch·heads, N_kv = batch·kv_heads, L = seq_len, d = head_dim, s = bytes per element. With `causal`, query
i sees only keys j ≤ i.

Unfused, three kernels run one after another, and the two L×L tensors between them live in device memory:
    scores   S = Q·Kᵀ/√d, masked                 (stored in the case's dtype)
    softmax  P = row softmax of S                 (stored in the case's dtype)
    pv       O = P·V
Writing and reading S and P costs 2·N·L²·s bytes each, against 4·N·L·d·s for q, k, v and O (less with fewer K/V
heads): L/d times as much, 32× at L = 2048 and d = 64. The footprint grows as L² too, until the case no longer fits.

Fused, one flash-style kernel takes a tile of `block_m` queries, streams K and V through in tiles of `block_n`
keys and keeps a running row maximum and sum (the online softmax), so nothing L×L ever reaches memory; its
price is reading K and V once per query tile instead of once. Both variants accumulate in float32.

Tiles are a program per (batch·head, query tile) in every backend, fused or not: the scores and pv kernels of
the unfused variant stream K (resp. P and V) through the same tiles, so the two variants differ only in fusion.
Under the causal mask, query tile t needs keys [0, min(L, (t+1)·block_m)) only, and the unfused kernels store
and read only the unmasked elements of S and P (i ≥ j): L(L+1)/2 per head instead of L².

Grouped-query attention: the program of (batch b, query head h) indexes K/V head b·kv_heads + h // g in place;
no kernel copies K or V. The ledger counts each query head's stream of its group's K/V at the memory boundary,
as with a K/V head per query head: the g heads of a group read the same tiles, and when their programs run
close together the later reads may hit in cache, so for g > 1 the tiled kernels' K/V traffic is an upper
bound. The library reads K and V once (N_kv·L·d·s each). The eager rival expands K and V to every query head
first, as model code does (`repeat_interleave`): two more kernels, each reading N_kv·L·d·s and writing
N·L·d·s, and two N·L·d·s copies in its peak memory (and the compiled one's, whose input is eager's code); with
kv_heads = heads there is nothing to expand, and nothing is counted.

FLOPs count the two matmuls, 2·d per unmasked score each (4·N·L²·d, about half under the mask), which is the
convention behind attention TFLOP/s figures; the softmax's ~5 operations per score are not counted.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scenarios.attention.config import AttentionConfig
from suite.core.errors import ConfigError
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.numerics import rel_err
from suite.core.scenario import Params, Scenario, register
from suite.core.tolerances import Tolerance, per_dtype

if TYPE_CHECKING:
    import pandas as pd

AXES = ("batch", "heads", "kv_heads", "seq_len", "head_dim", "causal", "block_m", "block_n")
MAX_HEAD_DIM = 256
TILES = (16, 32, 64, 128, 256)
"""Allowed tile sizes: powers of two (Triton's block shapes), at least 16 (the smallest `tl.dot`)."""
MAX_ELEMENTS = 2**31 - 1
"""q, k, v and O are indexed with 32-bit ints in places; beyond that the case is refused."""
SLAB = 2**23
"""Scores the reference holds at once (all heads together): 64 MiB in float64, whatever the case."""


def itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def kv_heads(params: Params) -> int:
    """K/V heads of a case; rows recorded before grouped-query attention was modeled have none: one per head."""
    value = params.get("kv_heads")
    return params["heads"] if value is None else value


def tiles(params: Params) -> tuple[int, int]:
    return int(params["block_m"]), int(params["block_n"])


def key_extent(q0: int, rows: int, seq_len: int, causal: bool) -> int:
    """Keys a query tile starting at row q0 with `rows` rows reads: all of them, or those up to its last row."""
    return min(seq_len, q0 + rows) if causal else seq_len


def key_rows_streamed(seq_len: int, block_m: int, causal: bool) -> int:
    """Rows of K (and of V) one head's query tiles read in total: each tile streams its whole key extent."""
    return sum(key_extent(q0, min(block_m, seq_len - q0), seq_len, causal) for q0 in range(0, seq_len, block_m))


def slabs(params: Params) -> list[slice]:
    """Query rows in slabs small enough that N·rows·L scores fit in SLAB."""
    n, seq_len = params["batch"] * params["heads"], params["seq_len"]
    step = max(1, SLAB // (n * seq_len))
    return [slice(q0, min(q0 + step, seq_len)) for q0 in range(0, seq_len, step)]


def scores_per_head(seq_len: int, causal: bool) -> int:
    """Unmasked scores of one head: every (i, j), or those with j ≤ i."""
    return seq_len * (seq_len + 1) // 2 if causal else seq_len * seq_len


def eager_kernels(n: int, n_kv: int, seq_len: int, d: int, s: int, causal: bool) -> tuple[KernelTraffic, ...]:
    """The unfused decomposition as a framework's batched matmuls run it: every one of the L² scores per head
    is computed, stored in S and P and read back (no masked score is skipped), K and V are read once per head,
    and a causal mask is one more pass over S. With fewer K/V heads (n_kv < n), K and V are first expanded to
    one per query head, as model code does (`repeat_interleave`): read once, written n/n_kv times over."""
    qkvo, kv, e = n * seq_len * d * s, n_kv * seq_len * d * s, n * seq_len * seq_len
    flops = 2 * d * e
    mask = (KernelTraffic("mask", e * s, e * s, 0),) if causal else ()
    expand = (KernelTraffic("repeat_k", kv, qkvo, 0), KernelTraffic("repeat_v", kv, qkvo, 0)) if n_kv < n else ()
    return (
        *expand,
        KernelTraffic("scores", 2 * qkvo, e * s, flops),
        *mask,
        KernelTraffic("softmax", e * s, e * s, 0),
        KernelTraffic("pv", e * s + qkvo, qkvo, flops),
    )


@register
class Attention(Scenario):
    name = "attention"
    inputs = ("q", "k", "v")
    variants = ("fused", "unfused", "library", "eager", "compiled")
    axes = AXES
    size_axis = "seq_len"
    config = AttentionConfig
    model_tour = "model_attention"
    gpu_check = "gpu_attention"
    summary = {"seq_len": 4096, "head_dim": 128, "causal": True}
    limits = Tolerance(per_dtype(2.5e-4, 2e-3), ceiling=4.0)
    """Floor: float32 kernels that order their sums differently (torch's, tiled ones) land within a few 1e-5 of
    each other on small cases, where a maximum over few elements is a noisy measure, and the Numba CUDA simulator's
    float32 (its own exponential and order of sums) reached 1.2e-4 on the default sweep's case of seq_len 512 as
    the simulator runs it (shrunk), where four times NumPy's own error came to 1.1e-4. Ceiling, every dtype: an
    error of 4× the smallest judged magnitude (suite.core.numerics' floor) still tells a correct output from a
    wrong mask, scale or tile, which are off by orders of magnitude more."""
    presets = {
        "S": {
            "batch": [1],
            "heads": [2],
            "kv_heads": [2],
            "seq_len": [64, 193],
            "head_dim": [64],
            "causal": [False, True],
            "block_m": [64],
            "block_n": [64],
        },
        "M": {
            "batch": [1],
            "heads": [4],
            "kv_heads": [4],
            "seq_len": [128, 256, 512, 1024, 2048],
            "head_dim": [64],
            "causal": [False, True],
            "block_m": [64],
            "block_n": [64],
        },
        "L": {
            "batch": [1],
            "heads": [16],
            "kv_heads": [16],
            "seq_len": [1024, 2048, 4096, 8192, 16384],
            "head_dim": [64, 128],
            "causal": [False, True],
            "block_m": [64],
            "block_n": [64],
        },
    }
    # Presets stay multi-head (kv_heads = heads), so that runs recorded before grouped-query attention compare;
    # the checks hold two grouped cases: 4 heads on 2 (query heads 1 and 2 read different K/V heads, which a
    # mapping h % kv_heads would swap) and 3 heads on 1 in two batches (an odd group).
    checks = [
        {"batch": 1, "heads": 2, "kv_heads": 2, "seq_len": 19, "head_dim": 16, "causal": True, "block_m": 16,
         "block_n": 16},
        {"batch": 1, "heads": 1, "kv_heads": 1, "seq_len": 33, "head_dim": 64, "causal": False, "block_m": 16,
         "block_n": 32},
        {"batch": 2, "heads": 1, "kv_heads": 1, "seq_len": 37, "head_dim": 24, "causal": True, "block_m": 32,
         "block_n": 16},
        {"batch": 1, "heads": 4, "kv_heads": 2, "seq_len": 21, "head_dim": 16, "causal": False, "block_m": 16,
         "block_n": 16},
        {"batch": 2, "heads": 3, "kv_heads": 1, "seq_len": 17, "head_dim": 16, "causal": True, "block_m": 16,
         "block_n": 16},
    ]  # fmt: skip

    def check(self, params: Params) -> None:
        for axis in ("batch", "heads", "kv_heads", "seq_len", "head_dim"):
            value = params[axis]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"scenario.{axis}={value!r} must be a positive integer")
        if params["heads"] % params["kv_heads"]:
            raise ConfigError(f"scenario.kv_heads={params['kv_heads']} must divide scenario.heads={params['heads']}")
        if params["head_dim"] > MAX_HEAD_DIM:
            raise ConfigError(f"scenario.head_dim={params['head_dim']} must be at most {MAX_HEAD_DIM}")
        if not isinstance(params["causal"], bool):
            raise ConfigError(f"scenario.causal={params['causal']!r} must be true or false")
        for axis in ("block_m", "block_n"):
            if params[axis] not in TILES or isinstance(params[axis], bool):
                raise ConfigError(f"scenario.{axis}={params[axis]!r} must be one of {', '.join(map(str, TILES))}")
        n = params["batch"] * params["heads"] * params["seq_len"] * params["head_dim"]
        if n > MAX_ELEMENTS:
            raise ConfigError(f"q has {n:,} elements (batch·heads·seq_len·head_dim); at most {MAX_ELEMENTS:,}")

    def shape(self, params: Params) -> tuple[int, int, int, int]:
        return params["batch"], params["heads"], params["seq_len"], params["head_dim"]

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        kv = (params["batch"], kv_heads(params), params["seq_len"], params["head_dim"])
        return {"q": self.shape(params), "k": kv, "v": kv}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Standard normal q, k, v: scores q·k/√d are then of unit variance, a softmax neither flat nor one-hot."""
        shapes = self.input_shapes(params)
        return {name: rng.standard_normal(shapes[name], dtype=np.float32).astype(dtype) for name in self.inputs}

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        """float64, a slab of queries at a time so that memory stays bounded (SLAB scores) at any seq_len; the
        query heads of a group are stacked on a K/V head (`grouped`), so K and V are broadcast, never repeated."""
        q, k, v = grouped({n: inputs[n].astype(np.float64) for n in self.inputs})
        seq_len, out = params["seq_len"], np.empty(q.shape)
        kt = np.swapaxes(k, -1, -2) / math.sqrt(params["head_dim"])
        for rows in slabs(params):
            s = q[..., rows, :] @ kt
            if params["causal"]:
                i, j = np.arange(rows.start, rows.stop)[:, None], np.arange(seq_len)[None, :]
                s = np.where(j <= i, s, -np.inf)
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            out[..., rows, :] = (p @ v) / p.sum(axis=-1, keepdims=True)
        return out.reshape(inputs["q"].shape)

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return self.shape(params)

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """Bytes and FLOPs of each kernel at the device-memory boundary; derivation in the module docstring.

        qkvo: one read of q (or one write of O), N·L·d·s. kv: one read of K (or V), N_kv·L·d·s. streamed: K (or
        V) as the query tiles read it, N·d·s per key row, key_rows_streamed rows: every query head's tiles
        stream their group's K/V, counted at the memory boundary although the group's other heads may find
        those tiles in cache (an upper bound where kv_heads < heads). e: unmasked scores, each stored in S and
        P once.
        """
        n, seq_len, d, s = params["batch"] * params["heads"], params["seq_len"], params["head_dim"], itemsize(dtype)
        n_kv, causal = params["batch"] * kv_heads(params), params["causal"]
        block_m, _ = tiles(params)
        qkvo, kv = n * seq_len * d * s, n_kv * seq_len * d * s
        streamed = n * d * s * key_rows_streamed(seq_len, block_m, causal)
        e = n * scores_per_head(seq_len, causal)
        flops = 2 * d * e
        unfused = (
            KernelTraffic("scores", qkvo + streamed, e * s, flops),
            KernelTraffic("softmax", e * s, e * s, 0),
            KernelTraffic("pv", e * s + streamed, qkvo, flops),
        )
        fused = (KernelTraffic("flash", qkvo + 2 * streamed, qkvo, 2 * flops),)
        library = (KernelTraffic("sdpa", qkvo + 2 * kv, qkvo, 2 * flops),)
        removed = (Intermediate("S", e, s), Intermediate("P", e, s))
        io, square = 2 * qkvo + 2 * kv, n * seq_len * seq_len * s
        # Memory: q, k, v and O throughout; S and P are full L×L (a causal mask skips work, not storage), both
        # alive while the softmax reads S and writes P (eager's masked copy of S, likewise, beside S). The
        # library's workspace is not known; like the fused kernel it keeps no L×L tensor (flash or
        # memory-efficient attention), so it is counted as fused. The compiler's is counted as unfused until the
        # row reads what its generated code allocates (`suite.run.peak_memory`): the guard must not let it run out.
        # Eager's expanded K and V (N·L·d·s each, with fewer K/V heads) live beside S and P throughout, and are
        # counted for the compiler's too, whose input is eager's code.
        steps = [(tuple(r), tuple(w)) for r, w in [((), ("S",)), ("S", "P"), ("P", ())]]
        apart = live_peak(io, steps, {"S": square, "P": square})
        expanded = live_peak(io + (2 * qkvo if n_kv < n else 0), steps, {"S": square, "P": square})
        return {
            "unfused": VariantLedger("unfused", unfused, peak_bytes=apart),
            "fused": VariantLedger("fused", fused, removed, io),
            "library": VariantLedger("library", library, removed, io),
            "eager": VariantLedger("eager", eager_kernels(n, n_kv, seq_len, d, s, causal), peak_bytes=expanded),
            "compiled": VariantLedger("compiled", (replace(library[0], name="compiled"),), removed, expanded),
        }

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Four times the error of the unfused decomposition done by NumPy in float32 with S, P and O stored in
        `dtype`, within limits, measured on the same inputs rather than guessed.

        The output is a weighted average of values of both signs, so many of its elements nearly cancel: an
        error in the weights of relative size ε moves such an element by about ε·Σ_j p_j·|v_j|, far more than
        ε·|o|. Relative to the metric's floor (1e-3 of the largest |o|) that is about 1e-4 in float32 and
        0.1 to 0.5 in float16 storage, where S alone carries a rounding error of 2⁻¹¹·|s| per score; it grows
        with seq_len as the largest |o| shrinks. The fused kernels, which keep S and P in float32, do far
        better; the tolerance is the decomposition's, so that the unfused kernels are held to what their
        storage allows.
        """
        own = rel_err(storage_precision(inputs, params, dtype), ref)
        return self.limits.clip(dtype, 4.0 * own)

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """One K/V head and its group of query heads, tiles of 16, at most half of `max_elements` in q and a
        quarter in the group's S (the simulator runs a Python thread per CUDA thread: its time grows as
        seq_len²·head_dim); seq_len is kept off a multiple of the tile, so that the ragged last tile is still
        exercised, and the group is kept, so that the shrunk case still shares K/V as the full one does."""
        n, seq_len, d = params["batch"] * params["heads"], params["seq_len"], params["head_dim"]
        if 2 * n * seq_len * max(seq_len, d) <= max_elements:
            return params
        group = params["heads"] // kv_heads(params)
        budget = max(1, max_elements // group)
        short = min(seq_len, max(17, min(budget // (2 * d), math.isqrt(budget) // 2)))
        if short < seq_len and short % 16 == 0:
            short -= 1
        shrunk = {"batch": 1, "heads": group, "kv_heads": 1, "seq_len": short, "block_m": 16, "block_n": 16}
        return {**params, **shrunk}

    def charts(self, rows: pd.DataFrame, outdir: Path) -> list[Path]:
        """TFLOP/s and ledger traffic with footprints against seq_len (scenarios.attention.charts)."""
        from scenarios.attention.charts import tflops_chart, traffic_chart

        return tflops_chart(rows, outdir) + traffic_chart(rows, outdir, self)

    def report_sections(self, rows: pd.DataFrame) -> list[str]:
        from scenarios.attention.report import fitting_section

        return [fitting_section(rows)]


def storage_precision(inputs: dict[str, np.ndarray], params: Params, dtype: str) -> np.ndarray:
    """The unfused decomposition in float32 arithmetic, rounding S, P and O to `dtype` as the kernels store them."""
    q, k, v = grouped({n: inputs[n].astype(np.float32) for n in ("q", "k", "v")})
    seq_len, out = params["seq_len"], np.empty(q.shape, dtype=dtype)
    kt = np.swapaxes(k, -1, -2) * np.float32(1.0 / math.sqrt(params["head_dim"]))
    with np.errstate(over="ignore", invalid="ignore"):
        for rows in slabs(params):
            s = (q[..., rows, :] @ kt).astype(dtype).astype(np.float32)
            if params["causal"]:
                i, j = np.arange(rows.start, rows.stop)[:, None], np.arange(seq_len)[None, :]
                s = np.where(j <= i, s, np.float32(-np.inf))
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            p = (p / p.sum(axis=-1, keepdims=True)).astype(dtype).astype(np.float32)
            out[..., rows, :] = p @ v
    return out.reshape(inputs["q"].shape)


def grouped(inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q as (batch, kv_heads, group, L, d), the query heads of a K/V head together (head h = kv·group + g, so
    h // group is its K/V head), and k, v as (batch, kv_heads, 1, L, d): views that matmul broadcasts."""
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    b, heads, seq_len, d = q.shape
    kv = k.shape[1]
    return q.reshape(b, kv, heads // kv, seq_len, d), k[:, :, None], v[:, :, None]
