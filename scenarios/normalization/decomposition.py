"""The canonical decomposition of each normalization op and the traffic ledger derived from it.

Each `Step` is one unfused kernel: the op it applies, the tensors it reads, the tensor it writes. Every backend
builds its unfused variant by walking `DECOMPOSITIONS`, so unfused and fused differ only in fusion; the ledger
counts, per step, every tensor it names read once and its output written once (see `scenario` for the model).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.scenario import Params

STAT_BYTES = 4
"""Row statistics (mean, variance, max, sum) are float32 in every variant: a half-precision mean would ruin x − mean."""


@dataclass(frozen=True)
class Step:
    """One kernel of an unfused decomposition: its op, the tensors it reads, the tensor it writes."""

    name: str
    op: str
    reads: tuple[str, ...]
    writes: str
    flops_per_element: int
    flops_per_row: int = 0


REDUCE = ("mean", "mean_square", "max", "sum")
"""Row reductions, written as float32 statistics: mean(v), mean(v²), max(v), sum(v)."""
ROWWISE = ("center", "normalize", "shift", "divide")
"""Elementwise with a row statistic s: v − s, v · 1/sqrt(s + eps), v − s, v · 1/s."""
MAP = ("exp",)
AFFINE = ("scale", "scale_shift")
"""v · weight, v · weight + bias."""

DECOMPOSITIONS: dict[str, tuple[Step, ...]] = {
    "layernorm": (
        Step("row mean", "mean", ("x",), "mean", 1),
        Step("centre", "center", ("x", "mean"), "xc", 1),
        Step("row variance", "mean_square", ("xc",), "var", 2),
        Step("normalise", "normalize", ("xc", "var"), "xhat", 1, 3),
        Step("scale and shift", "scale_shift", ("xhat", "weight", "bias"), "y", 2),
    ),
    "rmsnorm": (
        Step("row mean square", "mean_square", ("x",), "ms", 2),
        Step("normalise", "normalize", ("x", "ms"), "xhat", 1, 3),
        Step("scale", "scale", ("xhat", "weight"), "y", 1),
    ),
    "softmax": (
        Step("row max", "max", ("x",), "max", 1),
        Step("shift", "shift", ("x", "max"), "z", 1),
        Step("exp", "exp", ("z",), "e", 1),
        Step("row sum", "sum", ("e",), "sum", 1),
        Step("divide", "divide", ("e", "sum"), "y", 1),
    ),
}
"""FLOPs count each add, multiply, max, divide, sqrt and exp as one; a mean's divide replaces the first add.
softmax is the Triton tutorial's naive decomposition: read 5·N + 2·rows elements, write 3·N + 2·rows."""

VECTORS = ("weight", "bias")
ROW_STATS = {step.writes for steps in DECOMPOSITIONS.values() for step in steps if step.op in REDUCE}


def kind(op: str) -> str:
    """Which kernel template a step's op needs: reduce, rowwise, map or affine."""
    for name, ops in (("reduce", REDUCE), ("rowwise", ROWWISE), ("map", MAP), ("affine", AFFINE)):
        if op in ops:
            return name
    raise ValueError(f"unknown step op '{op}'")


def tensor_bytes(name: str, rows: int, cols: int, itemsize: int) -> int:
    if name in ROW_STATS:
        return rows * STAT_BYTES
    if name in VECTORS:
        return cols * itemsize
    return rows * cols * itemsize


def passes(cols: int, tile: int) -> int:
    """Reads of x a fused kernel makes: 1 while the row fits its tile, 2 (statistics, then output) beyond."""
    return 1 if cols <= tile else 2


@dataclass(frozen=True)
class FusedTraffic(KernelTraffic):
    """A fused kernel's traffic; `reread_bytes` (already in bytes_read) is what it pays for rows wider than its tile."""

    reread_bytes: int = 0


def normalization_ledger(op: str, inputs: tuple[str, ...], params: Params, dtype: str) -> dict[str, VariantLedger]:
    rows, cols, tile = params["rows"], params["cols"], params["tile"]
    s, n = np.dtype(dtype).itemsize, rows * cols
    steps = DECOMPOSITIONS[op]

    def size(name: str) -> int:
        return tensor_bytes(name, rows, cols, s)

    unfused = tuple(
        KernelTraffic(
            st.name, sum(size(t) for t in st.reads), size(st.writes), st.flops_per_element * n + st.flops_per_row * rows
        )
        for st in steps
    )
    flops = sum(k.flops for k in unfused)
    minimal = sum(size(t) for t in inputs)
    reread = (passes(cols, tile) - 1) * n * s
    removed = tuple(
        Intermediate(st.writes, rows if st.writes in ROW_STATS else n, STAT_BYTES if st.writes in ROW_STATS else s)
        for st in steps
        if st.writes != "y"
    )
    fused = FusedTraffic(f"{op} (fused)", minimal + reread, n * s, flops, reread)
    library = FusedTraffic(f"{op} (library)", minimal, n * s, flops)
    held = minimal + n * s  # the inputs and y, alive throughout; the steps' other tensors live between kernels
    between = {st.writes: size(st.writes) for st in steps if st.writes != "y"}
    apart = live_peak(held, [(st.reads, (st.writes,)) for st in steps], between)
    return {
        "unfused": VariantLedger("unfused", unfused, peak_bytes=apart),
        "fused": VariantLedger("fused", (fused,), removed, held),
        "library": VariantLedger("library", (library,), removed, held),
        "eager": VariantLedger("eager", unfused, peak_bytes=apart),
        "compiled": VariantLedger("compiled", (replace(library, name=f"{op} (compiled)"),), removed, held),
    }


def reread_bytes(ledger: VariantLedger) -> int:
    return sum(k.reread_bytes for k in ledger.kernels if isinstance(k, FusedTraffic))
