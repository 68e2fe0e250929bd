"""swiglu's backward pass: da = dy · b · silu′(a), db = dy · silu(a), with silu′(v) = σ(v)·(1 + v·(1 − σ(v))).

Unfused is the canonical decomposition differentiated op by op, as autograd runs it: the forward already writes
silu(a) into its temporary s and keeps it (with a and b) for the backward; the product's backward is two kernels
(db = dy · s, and ds = dy · b into a temporary), then silu's backward reads ds and a and writes da. Fused means one
backward kernel that reads a, b and dy once and writes da and db, recomputing σ(a) and silu(a) from a on the way:
nothing but the inputs is saved (s never exists in the forward either), the temporary ds never exists, and dy is
read once, not twice. Backward bytes: 9·N·s unfused against 5·N·s fused; a training step (forward + backward):
14·N·s against 8·N·s.

What each variant keeps from its forward (N = rows·cols elements of s bytes):
- fused: a and b (the inputs, 2·N·s): the backward recomputes σ and silu from a.
- unfused: a, b and s (3·N·s): s is the temporary the unfused forward already writes.
- eager: autograd of F.silu(a) · b keeps a (silu's input), s and b (the product's two operands): 3·N·s.
- compiled: AOTAutograd's partitioner recomputes pointwise silu rather than save it, so it keeps a and b: 2·N·s;
  its backward is one generated kernel, the fused one's traffic.
- liger/library (Liger's `LigerSiLUMulFunction`, backends/liger/swiglu_training.py): a and b, as fused. Its
  backward kernel overwrites a and b with da and db in place; the suite's a and b are inputs, so the row first
  copies a into da and b into db (two copy kernels, N·s each way, timed) and the kernel reads dy, da and db
  and writes da and db: the fused traffic plus 4·N·s of copies.
torch has no SwiGLU of its own (the family's library is Liger's, on CUDA): no bare `library` here.
"""

from __future__ import annotations

import numpy as np

from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.numerics import rel_err
from suite.core.phases import Backward
from suite.core.scenario import Params, Scenario

SIG_FLOPS = 3
"""σ(v) = 1 / (1 + exp(−v)): exp (the negation folded in), add, divide."""
SILU_GRAD_FLOPS = SIG_FLOPS + 1 + 3
"""silu′(v) = σ + s·(1 − σ) with s = v·σ: σ, the product s, then subtract, multiply, add."""
BACKWARD_STEPS: tuple[tuple[str, tuple[str, ...], str, int], ...] = (
    ("grad b (dy·s)", ("dy", "s"), "db", 1),
    ("grad s (dy·b)", ("dy", "b"), "ds", 1),
    ("silu backward (ds·silu′(a))", ("ds", "a"), "da", SILU_GRAD_FLOPS + 1),
)
"""(name, reads, writes, FLOPs per element) of each unfused backward kernel, in the order autograd runs them."""
FUSED_FLOPS = SILU_GRAD_FLOPS + 3
"""silu′ (with silu on the way), then dy·silu, dy·b and its product with silu′."""


def sigmoid64(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


def emulate_grads(inputs: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """The unfused backward in float32 with every stored tensor (s, db, ds, da) rounded to `dtype`."""
    a, b, dy = (inputs[k].astype(np.float32) for k in ("a", "b", "dy"))
    with np.errstate(over="ignore"):
        sig = np.float32(1) / (np.float32(1) + np.exp(-a))
    s = (a * sig).astype(dtype).astype(np.float32)
    ds = (dy * b).astype(dtype).astype(np.float32)
    grad = sig + a * sig * (np.float32(1) - sig)
    return {"da": (ds * grad).astype(dtype), "db": (dy * s).astype(dtype)}


class SwiGLUBackward(Backward):
    grads = ("da", "db")

    def reference(self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        a, b, dy = (inputs[k].astype(np.float64) for k in ("a", "b", "dy"))
        sig = sigmoid64(a)
        silu = a * sig
        return {"da": dy * b * (sig + silu * (1.0 - sig)), "db": dy * silu}

    def tolerance(
        self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: dict[str, np.ndarray]
    ) -> dict[str, float]:
        """Four times the unfused backward's error in `dtype` storage, as the forward's; no reduction, so the
        tolerance does not grow with the shape."""
        emulated = emulate_grads(inputs, dtype)
        return {name: scn.limits.clip(dtype, 4.0 * rel_err(emulated[name], ref[name])) for name in ref}

    def saved(self, scn: Scenario, params: Params, dtype: str) -> dict[str, dict[str, int]]:
        n = params["rows"] * params["cols"] * np.dtype(dtype).itemsize
        inputs = {"a": n, "b": n}
        return {
            "fused": inputs,
            "compiled": inputs,
            "unfused": {**inputs, "s": n},
            "eager": {**inputs, "s": n},
            "liger/library": inputs,
        }

    def backward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """Unfused: three kernels reading 6·N·s and writing 3·N·s; fused: one reading a, b, dy (3·N·s) and
        writing da, db (2·N·s). Held throughout: what the forward saved, dy and the two gradients; unfused, the
        temporary ds lives from the kernel that writes it to silu's backward. Liger's: the fused kernel after its
        row's two copies."""
        n, s = params["rows"] * params["cols"], np.dtype(dtype).itemsize
        unfused = tuple(KernelTraffic(name, len(r) * n * s, n * s, f * n) for name, r, _, f in BACKWARD_STEPS)
        grads_and_dy, kept = 3 * n * s, 3 * n * s  # dy, da, db; unfused keeps a, b and s
        apart = live_peak(grads_and_dy + kept, [(r, (w,)) for _, r, w, _ in BACKWARD_STEPS], {"ds": n * s})

        def one(name: str, *before: KernelTraffic) -> VariantLedger:
            kernel = KernelTraffic(f"swiglu backward ({name})", 3 * n * s, 2 * n * s, FUSED_FLOPS * n)
            return VariantLedger(name, (*before, kernel), (Intermediate("ds", n, s),), grads_and_dy + 2 * n * s)

        # Liger's row copies a into da and b into db (timed), where its kernel then works in place
        copies = tuple(KernelTraffic(f"copy of {x} into d{x} (Liger works in place)", n * s, n * s, 0) for x in "ab")
        return {
            "unfused": VariantLedger("unfused", unfused, peak_bytes=apart),
            "eager": VariantLedger("eager", unfused, peak_bytes=apart),
            "fused": one("fused"),
            "compiled": one("compiled"),
            "liger/library": one("liger/library", *copies),
        }
