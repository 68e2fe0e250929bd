"""The backward pass of layernorm, rmsnorm and softmax: its unfused decomposition, what each variant's forward
saves for it, and the traffic ledger of both.

Gradients, per row (n = cols, x̂ the normalised row, g = dy ⊙ weight, sums over the row):
    layernorm: dx = rstd · (g − Σg/n − x̂ · Σ(g ⊙ x̂)/n),  dweight = Σ_rows dy ⊙ x̂,  dbias = Σ_rows dy
    rmsnorm:   dx = rstd · (g − x̂ · Σ(g ⊙ x̂)/n),          dweight = Σ_rows dy ⊙ x̂
    softmax:   dx = y ⊙ (dy − Σ dy ⊙ y)                    (from the saved output y)

Unfused (`BACKWARD_DECOMPOSITIONS`): each step one kernel reading its tensors from memory and writing its own;
the forward's decomposition already stored x̂ and the row's variance (mean square), which the backward reads.
A cross-row sum (dweight, dbias) is one kernel, parallel over blocks of columns, each summing its columns down
every row. Fused: one pass over the rows — layernorm and rmsnorm recompute x̂ from the saved x and the
float32 row statistics the fused forward also wrote, softmax reads its saved y — takes the row's sums, then
writes dx from the row held on chip (re-read from memory when cols > tile, as in the forward); dweight and
dbias are accumulated as float32 partial rows, one per block of rows (`partials`), which a second small
kernel sums: the partials' bytes (written by the first kernel, read by the second) are in the ledger.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scenarios.normalization.decomposition import (
    STAT_BYTES,
    FusedTraffic,
    Step,
    normalization_ledger,
    passes,
)
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.scenario import Params

BACKWARD_DECOMPOSITIONS: dict[str, tuple[Step, ...]] = {
    "layernorm": (
        Step("dbias = Σ_rows dy", "colsum", ("dy",), "dbias", 1),
        Step("dweight = Σ_rows dy·x̂", "colsum", ("dy", "xhat"), "dweight", 2),
        Step("dx̂ = dy·weight", "scale", ("dy", "weight"), "dxhat", 1),
        Step("row mean of dx̂", "row_mean", ("dxhat",), "m1", 1),
        Step("row mean of dx̂·x̂", "row_mean", ("dxhat", "xhat"), "m2", 2),
        Step("dx", "layernorm_dx", ("dxhat", "xhat", "var", "m1", "m2"), "dx", 4, 3),
    ),
    "rmsnorm": (
        Step("dweight = Σ_rows dy·x̂", "colsum", ("dy", "xhat"), "dweight", 2),
        Step("dx̂ = dy·weight", "scale", ("dy", "weight"), "dxhat", 1),
        Step("row mean of dx̂·x̂", "row_mean", ("dxhat", "xhat"), "m2", 2),
        Step("dx", "rmsnorm_dx", ("dxhat", "xhat", "ms", "m2"), "dx", 3, 3),
    ),
    "softmax": (
        Step("dy·y", "product", ("dy", "y"), "p", 1),
        Step("row sum of dy·y", "row_sum", ("p",), "s", 1),
        Step("dx", "softmax_dx", ("y", "dy", "s"), "dx", 2),
    ),
}
"""One kernel per step. x̂, var and ms are the forward decomposition's own tensors, saved; FLOPs as the
forward's (a mean's divide replaces its first add; rstd from var is 3 per row)."""

GRADS = {"layernorm": ("dx", "dweight", "dbias"), "rmsnorm": ("dx", "dweight"), "softmax": ("dx",)}
CROSS_ROW = ("dweight", "dbias")
"""Gradients summed across rows: column vectors, accumulated by the fused kernel as float32 partials."""
STATS = {"var", "ms", "m1", "m2", "s", "mean", "rstd"}
VECTORS = {"weight", "bias", "dweight", "dbias"}
RECOMPUTE_FLOPS = {"layernorm": 2, "rmsnorm": 1, "softmax": 0}
"""FLOPs per element the fused backward spends recomputing x̂ from x and the row's statistics."""
UNFUSED_SAVES = {"layernorm": ("xhat", "var", "weight"), "rmsnorm": ("xhat", "ms", "weight"), "softmax": ("y",)}
FUSED_SAVES = {"layernorm": ("x", "weight", "mean", "rstd"), "rmsnorm": ("x", "weight", "rstd"), "softmax": ("y",)}

MAX_PARTIALS, PARTIAL_ROWS = 128, 8
"""The fused backward's blocks of rows: at least PARTIAL_ROWS rows each, at most MAX_PARTIALS blocks (enough
to spread over the threads of a large host; fixed, so that the ledger does not depend on the machine)."""


def partials(rows: int) -> int:
    """Blocks of rows of the fused backward, each writing one float32 partial row per cross-row gradient."""
    return max(1, min(MAX_PARTIALS, -(-rows // PARTIAL_ROWS)))


def sizer(params: Params, dtype: str):  # type: ignore[no-untyped-def]
    """size(name) -> bytes: matrices rows·cols·s, row statistics rows·4, column vectors cols·s."""
    rows, cols, s = params["rows"], params["cols"], np.dtype(dtype).itemsize

    def size(name: str) -> int:
        if name in STATS:
            return rows * STAT_BYTES
        return cols * s if name in VECTORS else rows * cols * s

    return size


def saved_bytes(op: str, params: Params, dtype: str) -> dict[str, dict[str, int]]:
    """Per variant, the tensors its forward keeps and their bytes. Fused and unfused as documented above; the
    torch rivals as autograd keeps them with torch 2.13 (measured by `Launch.saves`, each storage once):
    - eager, the decomposition in torch ops: a half x minus a float32 statistic promotes to float32 (torch's
      type promotion), so its matrices after the first are float32 (4 bytes) whatever the case's dtype.
      layernorm: x − mean and x̂ (4N each; the square and the normalise both keep x − mean), the row norm and
      its rsqrt (4 rows each), weight. rmsnorm: x, x̂ (4N), norm and rsqrt, weight. softmax: x, the row max
      (x's dtype: amax keeps it), the exponentials (x's dtype), the sum's reciprocal (4 rows).
    - library: layer_norm keeps x, weight, bias and its mean and rstd (x's dtype on the CPU); rms_norm (a
      composite on the CPU) x in float32 (x itself, or an upcast copy), x̂ in float32, rstd, weight; softmax y.
    - compiled (AOTAutograd's partition): layernorm x, weight and the float32 mean (plus rstd in float32
      cases); rmsnorm x, weight and one float32 statistic; softmax x and the row max (plus the sum's
      reciprocal in float32 cases). It recomputes the rest in its backward kernel."""
    rows, cols, s = params["rows"], params["cols"], np.dtype(dtype).itemsize
    n, stat, vec = rows * cols, rows * STAT_BYTES, cols * s
    size = sizer(params, dtype)
    out = {
        "fused": {t: size(t) for t in FUSED_SAVES[op]},
        "unfused": {t: size(t) for t in UNFUSED_SAVES[op]},
    }
    half = s < 4
    if op == "layernorm":
        out["eager"] = {"xc": 4 * n, "norm": stat, "rsqrt": stat, "xhat": 4 * n, "weight": vec}
        out["library"] = {"x": n * s, "weight": vec, "bias": vec, "mean": rows * s, "rstd": rows * s}
        out["compiled"] = {"x": n * s, "weight": vec, "mean": stat, **({} if half else {"rstd": stat})}
    elif op == "rmsnorm":
        out["eager"] = {"x": n * s, "norm": stat, "rsqrt": stat, "xhat": 4 * n, "weight": vec}
        out["library"] = {"x32" if half else "x": 4 * n, "xhat": 4 * n, "rstd": stat, "weight": vec}
        out["compiled"] = {"x": n * s, "weight": vec, "ms": stat}
    else:
        out["eager"] = {"x": n * s, "max": rows * s, "e": n * s, "reciprocal": stat}
        out["library"] = {"y": n * s}
        out["compiled"] = {"x": n * s, "max": rows * s, **({} if half else {"reciprocal": stat})}
    return out


def backward_ledgers(op: str, params: Params, dtype: str, inputs: tuple[str, ...]) -> dict[str, VariantLedger]:
    """Per variant, the backward pass's kernels. Unfused walks `BACKWARD_DECOMPOSITIONS`; fused is its one row
    pass plus, for layernorm and rmsnorm, the sum of the partials; library and compiled are given the minimal
    traffic (what the fused kernel must read and write, no re-read, no partials), eager the unfused steps."""
    rows, cols, tile = params["rows"], params["cols"], params["tile"]
    s, n = np.dtype(dtype).itemsize, rows * cols
    size = sizer(params, dtype)
    steps = BACKWARD_DECOMPOSITIONS[op]
    grads = GRADS[op]
    cross = [g for g in grads if g in CROSS_ROW]
    unfused = tuple(
        KernelTraffic(st.name, sum(size(t) for t in st.reads), size(st.writes),
                      st.flops_per_element * n + st.flops_per_row * rows)
        for st in steps
    )  # fmt: skip
    flops = sum(k.flops for k in unfused) + RECOMPUTE_FLOPS[op] * n
    fused_reads = sum(size(t) for t in FUSED_SAVES[op]) + size("dy")
    written = sum(size(g) for g in grads)
    part = partials(rows) * cols * STAT_BYTES  # one float32 partial row per block, per cross-row gradient
    reread = (passes(cols, tile) - 1) * 2 * n * s  # the row's second pass re-reads (x or y) and dy
    row_pass = FusedTraffic(
        f"{op} backward (fused)", fused_reads + reread, size("dx") + len(cross) * part, flops, reread
    )
    fused = (row_pass,)
    if cross:
        fused += (KernelTraffic(f"{', '.join(cross)} from partials", len(cross) * part,
                                len(cross) * cols * s, len(cross) * partials(rows) * cols),)  # fmt: skip
    minimal = FusedTraffic(f"{op} backward (library)", fused_reads, written, flops)
    between = {st.writes: size(st.writes) for st in steps if st.writes not in grads}
    removed = tuple(Intermediate(t, rows if t in STATS else n, STAT_BYTES if t in STATS else s) for t in between)
    saved = saved_bytes(op, params, dtype)

    def held(variant: str) -> int:
        return sum(saved[variant].values()) + size("dy") + written

    apart = live_peak(held("unfused"), [(st.reads, (st.writes,)) for st in steps], between)
    fused_peak = live_peak(held("fused"), [((), ("partials",)), (("partials",), ())], {"partials": len(cross) * part})
    return {
        "unfused": VariantLedger("unfused", unfused, peak_bytes=apart),
        "fused": VariantLedger("fused", fused, removed, fused_peak),
        "library": VariantLedger("library", (minimal,), removed, held("library")),
        "eager": VariantLedger("eager", unfused, peak_bytes=held("eager")),
        "compiled": VariantLedger(
            "compiled", (replace(minimal, name=f"{op} backward (compiled)"),), removed, held("compiled")
        ),
    }


def forward_ledgers(op: str, params: Params, dtype: str, inputs: tuple[str, ...]) -> dict[str, VariantLedger]:
    """The forward of a training step: the forward's ledger, plus, for the variants given its minimal one-kernel
    ledger (fused, library, compiled), the write of every saved tensor that is neither an input nor y (the
    fused kernel's mean and rstd, the library's and the compiler's statistics); the unfused and eager
    decompositions already write what they keep."""
    ledgers = normalization_ledger(op, inputs, params, dtype)
    saved = saved_bytes(op, params, dtype)
    out = dict(ledgers)
    for variant in ("fused", "library", "compiled"):
        extra = sum(b for t, b in saved[variant].items() if t not in inputs and t != "y")
        lg = ledgers[variant]
        (kernel,) = lg.kernels
        grown = replace(kernel, bytes_written=kernel.bytes_written + extra)
        peak = lg.peak_bytes + extra if lg.peak_bytes is not None else None
        out[variant] = VariantLedger(variant, (grown,), lg.removed, peak)
    return out
