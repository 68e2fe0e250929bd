"""swiglu's canonical decomposition and the traffic ledger derived from it.

Two steps, each one kernel reading every tensor it names once and writing its output once: silu(a) into a
temporary s stored in the case's dtype, then s · b into y. Fused, one kernel reads a and b and writes y: s never
exists, ΔQ = 2·N·s bytes, and the peak memory drops by the same N·s the temporary would have held.
"""

from __future__ import annotations

import numpy as np

from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.scenario import Params

INPUTS = ("a", "b")
SILU_FLOPS = 4
"""silu(v) = v / (1 + exp(−v)): a negation folded into exp, exp, add, divide and the multiply by v counted as the
elementwise chain's silu is (4)."""
STEPS: tuple[tuple[str, str, tuple[str, ...], str, int], ...] = (
    ("silu", "silu", ("a",), "s", SILU_FLOPS),
    ("product", "mul", ("s", "b"), "y", 1),
)
"""(name, op, reads, writes, FLOPs per element) of each unfused kernel."""


def swiglu_ledger(params: Params, dtype: str) -> dict[str, VariantLedger]:
    n, s = params["rows"] * params["cols"], np.dtype(dtype).itemsize
    unfused = tuple(KernelTraffic(name, len(reads) * n * s, n * s, flops * n) for name, _, reads, _, flops in STEPS)
    flops = sum(k.flops for k in unfused)
    removed = (Intermediate("s", n, s),)
    held = 3 * n * s  # a, b and y, alive throughout
    apart = live_peak(held, [(reads, (writes,)) for _, _, reads, writes, _ in STEPS], {"s": n * s})

    def one(name: str) -> KernelTraffic:
        return KernelTraffic(f"swiglu ({name})", 2 * n * s, n * s, flops)

    return {
        "unfused": VariantLedger("unfused", unfused, peak_bytes=apart),
        "eager": VariantLedger("eager", unfused, peak_bytes=apart),
        "fused": VariantLedger("fused", (one("fused"),), removed, held),
        "compiled": VariantLedger("compiled", (one("compiled"),), removed, held),
        "library": VariantLedger("library", (one("library"),), removed, held),
    }
