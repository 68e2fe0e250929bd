"""Rope's canonical unfused decomposition and the traffic ledger derived from it.

Each `RopeStep` is one unfused kernel over one of q and k (x below): the tensors it reads, the one it writes.
Every backend builds its unfused variant by walking `STEPS` for q, then for k, so unfused and fused differ only in
fusion. The ledger counts, per step, every tensor it names read once and its output written once; the cos and
sin tables (seq_len × head_dim/2 each) are read once by every step that names them, as a table that small stays
in cache while the step sweeps the heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.scenario import Params

PAIRINGS = ("half", "interleaved")
"""Which values rotate together: value j with j + head_dim/2 (`half`, rotate_half), or 2i with 2i + 1."""


@dataclass(frozen=True)
class RopeStep:
    """One unfused kernel: `op` on the tensors `reads` ('x' is q or k), writing `writes` ('y': its part of out)."""

    name: str
    op: str
    reads: tuple[str, ...]
    writes: str
    flops_per_element: float


STEPS = (
    RopeStep("rotate", "rotate", ("x",), "r", 0.5),
    RopeStep("x·cos", "mul_cos", ("x", "cos"), "a", 1),
    RopeStep("rotate(x)·sin", "mul_sin", ("r", "sin"), "b", 1),
    RopeStep("add", "add", ("a", "b"), "y", 1),
)
"""rotate: (x₁, x₂) -> (−x₂, x₁) for every pair (half the values negated: 0.5 FLOP an element); then
x·cos + rotate(x)·sin, the tables broadcast over batch and heads. Intermediates r, a, b are stored in the
case's dtype."""

INTERMEDIATES = tuple(st.writes for st in STEPS if st.writes != "y")


def sizes(params: Params) -> tuple[int, int, int]:
    """(elements of q, elements of k, elements of one table)."""
    tokens = params["batch"] * params["seq_len"]
    d = params["head_dim"]
    return tokens * params["heads"] * d, tokens * params["kv_heads"] * d, params["seq_len"] * d // 2


def rope_ledger(params: Params, dtype: str) -> dict[str, VariantLedger]:
    s = np.dtype(dtype).itemsize
    nq, nk, table = sizes(params)
    unfused, removed = [], []
    for x, n in (("q", nq), ("k", nk)):
        for st in STEPS:
            read = sum(table if t in ("cos", "sin") else n for t in st.reads) * s
            unfused.append(KernelTraffic(f"{st.name} ({x})", read, n * s, int(st.flops_per_element * n)))
        removed += [Intermediate(f"{t} ({x})", n, s) for t in INTERMEDIATES]
    flops = sum(k.flops for k in unfused)
    fused = KernelTraffic("rope q and k (fused)", (nq + nk + 2 * table) * s, (nq + nk) * s, flops)
    held = (2 * (nq + nk) + 2 * table) * s  # q, k, both tables and out, alive throughout
    # Unfused: r, a and b of one tensor live from the kernel that writes them to the add; the buffers of q's steps
    # serve k's after them, so the peak is q's three intermediates (the larger tensor's).
    accesses = [
        (
            tuple(f"{t}{x}" if t in INTERMEDIATES else t for t in st.reads),
            (f"{st.writes}{x}" if st.writes in INTERMEDIATES else st.writes,),
        )
        for x in ("q", "k")
        for st in STEPS
    ]
    between = {f"{t}{x}": n * s for x, n in (("q", nq), ("k", nk)) for t in INTERMEDIATES}
    apart = live_peak(held, accesses, between)
    compiled = KernelTraffic("rope q and k (compiled)", fused.bytes_read, fused.bytes_written, flops)
    # A library rotating in place (Liger's) runs on a copy of q and k in out, so its inputs stay unchanged.
    copy = KernelTraffic("copy q and k into out", (nq + nk) * s, (nq + nk) * s, 0)
    in_place = KernelTraffic("rope q and k in place (library)", fused.bytes_read, fused.bytes_written, flops)
    return {
        "unfused": VariantLedger("unfused", tuple(unfused), peak_bytes=apart),
        "fused": VariantLedger("fused", (fused,), tuple(removed), held),
        "eager": VariantLedger("eager", tuple(unfused), peak_bytes=apart),
        "compiled": VariantLedger("compiled", (compiled,), tuple(removed), held),
        "library": VariantLedger("library", (copy, in_place), tuple(removed), held),
    }
