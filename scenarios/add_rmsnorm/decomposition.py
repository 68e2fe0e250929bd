"""add_rmsnorm's canonical decomposition and the traffic ledger derived from it.

Unfused is the residual add (h = x + residual, written: the next layer reads it) followed by rmsnorm's own
steps reading h — the rmsnorm family's `Step`s with x renamed h, so every backend reuses its rmsnorm step
kernels. Each step reads every tensor it names once and writes its output once. The fused kernel reads x,
residual and weight once and writes h and y once; a row wider than its tile is walked twice and its second
pass reads x and residual again (h is recomputed in float32 rather than read back, so y never depends on h's
rounding to storage and no kernel reads what it wrote), which the ledger counts as `reread_bytes`.
"""

from __future__ import annotations

import numpy as np

from scenarios.normalization import STAT_BYTES, FusedTraffic, Step, passes
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.scenario import Params

INPUTS = ("x", "residual", "weight")
OUTPUTS = ("h", "y")
"""The two outputs, stacked in the suite's one output buffer as out[0] = h, out[1] = y."""

STEPS: tuple[Step, ...] = (
    Step("residual add", "add", ("x", "residual"), "h", 1),
    Step("row mean square", "mean_square", ("h",), "ms", 2),
    Step("normalise", "normalize", ("h", "ms"), "hhat", 1, 3),
    Step("scale", "scale", ("hhat", "weight"), "y", 1),
)
"""FLOPs as rmsnorm's (a mean's divide replaces its first add) plus one add per element."""
ROW_STATS = frozenset({"ms"})
NORM_STEPS = STEPS[1:]
"""The rmsnorm part, which the library variant runs as one torch op after its add."""


def tensor_bytes(name: str, rows: int, cols: int, itemsize: int) -> int:
    if name in ROW_STATS:
        return rows * STAT_BYTES
    if name == "weight":
        return cols * itemsize
    return rows * cols * itemsize


def add_rmsnorm_ledger(params: Params, dtype: str) -> dict[str, VariantLedger]:
    rows, cols, tile = params["rows"], params["cols"], params["tile"]
    s, n = np.dtype(dtype).itemsize, rows * cols

    def size(name: str) -> int:
        return tensor_bytes(name, rows, cols, s)

    def traffic(st: Step, name: str | None = None) -> KernelTraffic:
        flops = st.flops_per_element * n + st.flops_per_row * rows
        return KernelTraffic(name or st.name, sum(size(t) for t in st.reads), size(st.writes), flops)

    unfused = tuple(traffic(st) for st in STEPS)
    flops = sum(k.flops for k in unfused)
    reread = (passes(cols, tile) - 1) * 2 * n * s  # x and residual, once more
    minimal_read, written = sum(size(t) for t in INPUTS), 2 * n * s
    fused = FusedTraffic("add_rmsnorm (fused)", minimal_read + reread, written, flops, reread)
    compiled = FusedTraffic("add_rmsnorm (compiled)", minimal_read, written, flops)
    norm = KernelTraffic("rms_norm (library)", size("h") + size("weight"), size("y"), flops - n)
    removed = (Intermediate("ms", rows, STAT_BYTES), Intermediate("hhat", n, s))
    held = minimal_read + written  # inputs, h and y: alive throughout
    apart = live_peak(held, [(st.reads, (st.writes,)) for st in STEPS], {"ms": size("ms"), "hhat": size("hhat")})
    return {
        "unfused": VariantLedger("unfused", unfused, peak_bytes=apart),
        "fused": VariantLedger("fused", (fused,), removed, held),
        # torch's rms_norm has no out= form: its result is a fresh tensor copied into y (the copy is timed, not counted)
        "library": VariantLedger("library", (unfused[0], norm), removed, held + size("y")),
        "eager": VariantLedger("eager", unfused, peak_bytes=apart),
        "compiled": VariantLedger("compiled", (compiled,), removed, held),
    }
