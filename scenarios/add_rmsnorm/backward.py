"""add_rmsnorm's backward pass. The forward's one output stacks h and y, so its upstream gradient dy does too:
dy[0] flows to h directly and dy[1] through the norm. With r = 1/sqrt(mean(h²) + eps), ĥ = h·r, g = dy[1]·γ:

    dh       = dy[0] + r·(g − ĥ·mean(g·ĥ))     (both uses of h)
    dx       = dresidual = dh                  (the add passes it to both; both buffers are written)
    dweight  = Σ_rows dy[1]·ĥ                  (a cross-row sum)

Unfused differentiates the decomposition step by step from what its forward already wrote and keeps (h, the row
mean square ms, the normalised ĥ, and γ): the scale's backward writes dĥ = dy[1]·γ and, separately, γ's
per-block partial sums of dy[1]·ĥ; a small kernel sums the partials into dweight; the normalise step's backward
sums dĥ·h per row into the statistic's gradient dms; a last kernel adds h's three gradients (dy[0], dĥ·r and
dms·2h/cols) and writes dx and dresidual. Five kernels; dĥ (N·s) and dms (rows·4) are temporaries.

Fused means one kernel per row block that reads h, its saved rstd, γ and dy once, sums g·h over the row, writes
dx and dresidual, and adds the row's dy[1]·ĥ into its block's float32 partial row of dweight; then the same
small reduction kernel sums the partials. The fused forward writes rstd (rows·4) beside h and y — the one tensor
it saves that it would not otherwise store (`forward_ledger`). Each row is walked twice (the sum, then the
gradients); a row wider than `tile` is assumed out of cache for the second walk, which reads h and dy[1] again.

dweight's partials: `partial_rows(rows)` row blocks each own one float32 row of cols partial sums, written by the
main kernel and read by the reduction (P·cols·4 bytes each way, in the ledger of both variants). Blocks of at
least `ROWS_PER_PARTIAL` rows keep the partials small beside the matrices; at most `PARTIAL_BLOCKS` of them keep
the reduction short while still giving every core blocks to take; the suite's own kernels follow this model.

What each variant keeps from its forward (N = rows·cols elements of s bytes, R = rows):
- fused: h (N·s, an output it writes anyway), rstd (R·4) and γ (cols·s).
- compiled: the same bytes: AOTAutograd keeps one matrix in the case's dtype (h), a float32 row statistic and
  γ, and recomputes the rest in its backward (measured on the CPU through saved-tensor hooks).
- unfused: h, ms (R·4), ĥ (N·s) and γ: 2·N·s + 4·R + cols·s.
- eager: autograd of the decomposition as torch ops keeps h, vector_norm's result and rsqrt's (R·4 each), ĥ and
  γ: 2·N·s + 8·R + cols·s.
- library (the add, then F.rms_norm): on the CPU torch's rms_norm is a composite computing in float32, whose
  autograd keeps h and the normalised h in float32 (2·N·4 at any dtype), rstd (R·4) and γ.
- liger/library (Liger's `LigerFusedAddRMSNormFunction`, backends/liger/add_rmsnorm_training.py): h, rstd and γ,
  as fused. Its backward is one kernel on one program per SM (`LIGER_PROGRAMS`, the sm_90 parts the suite runs
  on), each walking its share of the rows once (a row is one block, however wide) and writing dx, not dresidual
  (the row publishes dx's copy into dresidual after the launch, untimed), and its own float32 row of dweight's
  partials (every program writes one, rows or none); then torch's sum of the partials into a float32 dweight
  and, below float32, the cast into the suite's.
"""

from __future__ import annotations

import numpy as np

from scenarios.normalization import STAT_BYTES, FusedTraffic, passes
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.numerics import FLOOR, rel_err
from suite.core.phases import Backward
from suite.core.scenario import Params, Scenario
from suite.kit.launch_shape import NOMINAL

PARTIAL_BLOCKS = 32
"""At most this many row blocks, each with its own float32 row of dweight's partial sums."""
ROWS_PER_PARTIAL = 16
"""At least this many rows a block (but one block for fewer rows), so partials stay small beside the matrices."""
EPS32 = np.float32(1e-5)
LIGER_PROGRAMS = NOMINAL.sms
"""Liger's backward launches one program per SM, each with its own row of dweight's partials: 132 on the sm_90
parts (H100 SXM, H200) the suite's CUDA rows run on."""


def partial_rows(rows: int) -> int:
    """Row blocks of the dweight reduction: its partials are this many rows of cols float32 values."""
    return max(1, min(PARTIAL_BLOCKS, -(-rows // ROWS_PER_PARTIAL)))


def block_sums(terms: np.ndarray) -> np.ndarray:
    """Σ over rows of float32 `terms` as the kernels sum them: row by row within each block, then the blocks'
    partials in order."""
    rows = terms.shape[0]
    per = -(-rows // partial_rows(rows))
    partials = [terms[lo : lo + per].sum(axis=0, dtype=np.float32) for lo in range(0, rows, per)]
    return np.sum(partials, axis=0, dtype=np.float32)


def emulate_grads(inputs: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """The unfused backward in float32, every matrix it stores (h, ĥ, dĥ, dx) rounded to `dtype`; and
    `dweight (fused)`, dweight as the fused kernel forms it from the stored h and rstd: in half precision the two
    round different tensors (ĥ against h), and neither's error bounds the other's."""
    f32 = {k: inputs[k].astype(np.float32) for k in ("x", "residual", "weight")}
    dy0, dy1 = inputs["dy"][0].astype(np.float32), inputs["dy"][1].astype(np.float32)
    h = (f32["x"] + f32["residual"]).astype(dtype).astype(np.float32)
    cols = np.float32(h.shape[-1])
    ms = np.mean(h * h, axis=-1, dtype=np.float32, keepdims=True)
    r = np.float32(1) / np.sqrt(ms + EPS32)
    hhat = (h * r).astype(dtype).astype(np.float32)
    dhhat = (dy1 * f32["weight"]).astype(dtype).astype(np.float32)
    dms = np.float32(-0.5) * r * r * r * np.sum(dhhat * h, axis=-1, dtype=np.float32, keepdims=True)
    dh = (dy0 + dhhat * r + dms * (np.float32(2) / cols) * h).astype(dtype)
    return {
        "dx": dh,
        "dresidual": dh,
        "dweight": block_sums(dy1 * hhat).astype(dtype),
        "dweight (fused)": block_sums(dy1 * h * r).astype(dtype),
    }


def sum_slack(inputs: dict[str, np.ndarray], dweight: np.ndarray) -> float:
    """What float32 rounding over a sum of `rows` terms costs: a running sum rounds each partial sum by up to half
    a float32 ulp, errors that add like a random walk, so a column's error is about u·√(Σ partial sums²) (its
    terms' partial sums in row order, computed here in float64), judged as `rel_err` judges it: against the
    column's own magnitude, floored at 1e-3 of the largest. Four times the worst column's: a blocked or split
    reduction (the fused kernel's partials, a compiler's) has partial sums of no larger size."""
    h = inputs["x"].astype(np.float64) + inputs["residual"].astype(np.float64)
    terms = inputs["dy"][1].astype(np.float64) * h / np.sqrt(np.mean(h * h, -1, keepdims=True) + 1e-5)
    partial = np.sqrt(np.square(np.cumsum(terms, axis=0)).sum(axis=0))
    scale = np.maximum(np.abs(dweight), max(FLOOR * float(np.max(np.abs(dweight))), 1e-30))
    return 4.0 * float(np.finfo(np.float32).eps / 2) * float(np.max(partial / scale))


class AddRMSNormBackward(Backward):
    grads = ("dx", "dresidual", "dweight")

    def reference(self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        x, res, w = (inputs[k].astype(np.float64) for k in ("x", "residual", "weight"))
        dy = inputs["dy"].astype(np.float64)
        h = x + res
        r = 1.0 / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-5)
        hhat, g = h * r, dy[1] * w
        dh = dy[0] + r * (g - hhat * np.mean(g * hhat, axis=-1, keepdims=True))
        return {"dx": dh, "dresidual": dh.copy(), "dweight": np.sum(dy[1] * hhat, axis=0)}

    def tolerance(
        self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: dict[str, np.ndarray]
    ) -> dict[str, float]:
        """Four times the unfused backward's error in `dtype` storage, within the family's limits; dweight's is
        four times the larger of either variant's rounding (`emulate_grads`), and at least `sum_slack`, which
        grows with the rows it sums.

        In half precision the derived values reach the family's ceiling (0.2) for the unfused variant on most
        shapes: a gradient element that cancels to near zero is judged against 1e-3 of the largest, finer than
        half precision's rounding of dĥ (dx) or of h (dweight) — the unfused errors measure 0.13–0.18 there."""
        with np.errstate(over="ignore", invalid="ignore"):
            emulated = emulate_grads(inputs, dtype)
            tol = {name: 4.0 * rel_err(emulated[name], ref[name]) for name in ref}
            fused = 4.0 * rel_err(emulated["dweight (fused)"], ref["dweight"])
            tol["dweight"] = max(tol["dweight"], fused, sum_slack(inputs, ref["dweight"]))
        return {name: scn.limits.clip(dtype, t) for name, t in tol.items()}

    def saved(self, scn: Scenario, params: Params, dtype: str) -> dict[str, dict[str, int]]:
        rows, cols, s = params["rows"], params["cols"], np.dtype(dtype).itemsize
        n, stat, w = rows * cols * s, rows * STAT_BYTES, cols * s
        fused = {"h": n, "rstd": stat, "weight": w}
        return {
            "fused": fused,
            "compiled": fused,
            "unfused": {"h": n, "ms": stat, "hhat": n, "weight": w},
            "eager": {"h": n, "norm": stat, "rstd": stat, "hhat": n, "weight": w},
            "library": {"h (float32)": rows * cols * 4, "hhat (float32)": rows * cols * 4, "rstd": stat, "weight": w},
            "liger/library": fused,
        }

    def backward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        return backward_ledger(params, dtype)

    def forward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """The forward's ledger; fused and compiled also write rstd (rows·4), which they save. Liger's forward is
        one kernel too (each row in one block, read once), writing h, y and rstd: compiled's traffic."""
        forward, stat = scn.ledger(params, dtype), params["rows"] * STAT_BYTES
        for v in ("fused", "compiled"):
            (k,) = forward[v].kernels
            more = FusedTraffic(k.name, k.bytes_read, k.bytes_written + stat, k.flops, getattr(k, "reread_bytes", 0))
            forward[v] = VariantLedger(v, (more,), forward[v].removed, forward[v].peak_bytes + stat)
        (k,) = forward["compiled"].kernels
        liger = FusedTraffic("add_rmsnorm (Liger)", k.bytes_read, k.bytes_written, k.flops)
        forward["liger/library"] = VariantLedger(
            "liger/library", (liger,), forward["compiled"].removed, forward["compiled"].peak_bytes
        )
        return forward


def backward_ledger(params: Params, dtype: str) -> dict[str, VariantLedger]:
    """Per variant, the backward's kernels (see the module docstring). compiled is given the fused traffic (one
    generated kernel and the reduction, no re-read); library is torch's rms_norm backward (reading h, dy[1], rstd
    and γ, writing h's gradient through the norm and dweight's partials), the reduction, and autograd's sum of h's
    two gradients into one tensor that dx and dresidual then both are (the suite's copy into two buffers is
    published after the launch, not timed).

    FLOPs per element: fused 11 (g·γ·h summed: 3; dy[0] + rs·g·γ − k·h: 5; g·h·rs added to the partial: 3);
    unfused 1 + 2 + 2 + 4 = 9 plus its per-row statistic work; the reduction one add per partial value."""
    rows, cols, tile = params["rows"], params["cols"], params["tile"]
    s, n = np.dtype(dtype).itemsize, rows * cols
    mat, stat, w, part = n * s, rows * STAT_BYTES, cols * s, partial_rows(rows) * cols * 4
    reduce = KernelTraffic("dweight reduce (partials)", part, w, part // 4)
    reread = (passes(cols, tile) - 1) * 2 * mat  # h and dy[1], walked again
    unfused = (
        KernelTraffic("scale backward (dĥ = dy·γ)", mat + w, mat, n),
        KernelTraffic("dweight partials (Σ dy·ĥ)", 2 * mat, part, 2 * n),
        reduce,
        KernelTraffic("normalise backward (dms = Σ dĥ·h)", 2 * mat + stat, stat, 2 * n + 4 * rows),
        KernelTraffic("h gradient (dy + dĥ·r + dms·2h/cols)", 3 * mat + 2 * stat, 2 * mat, 4 * n + 3 * rows),
    )
    access = [
        (("dy", "weight"), ("dhhat",)),
        (("dy", "hhat"), ("partials",)),
        (("partials",), ("dweight",)),
        (("dhhat", "h", "ms"), ("dms",)),
        (("dy", "dhhat", "h", "ms", "dms"), ("dx", "dresidual")),
    ]
    temps = {"dhhat": mat, "dms": stat, "partials": part}
    grads_and_dy = 2 * mat + 2 * mat + w  # dy's two halves; dx, dresidual, dweight
    apart = live_peak(grads_and_dy + 2 * mat + stat + w, access, temps)  # h, ĥ, ms, γ kept
    removed = (Intermediate("dhhat", n, s), Intermediate("dms", rows, STAT_BYTES))
    fused_access = [(("h", "rstd", "weight", "dy"), ("dx", "dresidual", "partials")), (("partials",), ("dweight",))]
    together = live_peak(grads_and_dy + mat + stat + w, fused_access, {"partials": part})  # h, rstd, γ kept

    def one(name: str, extra: int) -> VariantLedger:
        main = FusedTraffic(f"add_rmsnorm backward ({name})", 3 * mat + stat + w + extra, 2 * mat + part, 11 * n, extra)
        return VariantLedger(name, (main, reduce), removed, together)

    library = (
        KernelTraffic("rms_norm backward (library)", 2 * mat + stat + w, mat + part, 11 * n),
        reduce,
        KernelTraffic("accumulate h's gradients (dy + dh)", 2 * mat, mat, n),
    )
    return {
        "unfused": VariantLedger("unfused", unfused, peak_bytes=apart),
        "eager": VariantLedger("eager", unfused, peak_bytes=apart),
        "fused": one("fused", reread),
        "compiled": one("compiled", 0),
        "library": VariantLedger("library", library, peak_bytes=together + mat),
        "liger/library": liger_ledger(params, dtype),
    }


def liger_ledger(params: Params, dtype: str) -> VariantLedger:
    """Liger's backward (see the module docstring): its kernel reads dy's two halves, h, rstd and γ once and
    writes dx and `LIGER_PROGRAMS` rows of float32 partials; torch's sum of them into a float32 row; below float32
    the copy of that row into dweight (a cast, timed). Its peak holds dy, the gradients, what the forward kept,
    the partials (allocated when the row is built, held throughout) and the float32 row where it is not dweight."""
    rows, cols = params["rows"], params["cols"]
    s, n = np.dtype(dtype).itemsize, rows * cols
    mat, stat, w = n * s, rows * STAT_BYTES, cols * s
    part, total = LIGER_PROGRAMS * cols * 4, cols * 4
    kernels = (
        KernelTraffic("add_rmsnorm backward (Liger)", 3 * mat + stat + w, mat + part, 11 * n),
        KernelTraffic("dweight = Σ partials (torch.sum)", part, total, part // 4),
    )
    if s != 4:
        kernels += (KernelTraffic("dweight cast to the case's dtype", total, w, 0),)
    held = 4 * mat + w + mat + stat + w  # dy's two halves, dx, dresidual, dweight; h, rstd, γ kept
    removed = (Intermediate("dhhat", n, s), Intermediate("dms", rows, STAT_BYTES))
    return VariantLedger("liger/library", kernels, removed, held + part + (total if s != 4 else 0))
