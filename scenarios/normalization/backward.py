"""The backward pass of layernorm, rmsnorm and softmax (`suite.core.phases.Backward`): its float64 reference, its
tolerance, what each variant saves and its ledger (`backward_decomposition`).

What fused means here: the forward saves the least the backward needs and the backward recomputes the rest
in one pass over each row. layernorm's fused forward keeps x (an input, alive) and writes each row's float32
mean and rstd beside y; its backward recomputes x̂ = (x − mean)·rstd from them in the row pass that also
takes the row's sums and writes dx, while dweight and dbias gather in float32 partial rows summed by a second
small kernel. rmsnorm likewise with rstd alone. softmax's forward keeps y (its output); the backward reads y
and dy once and writes dx. Unfused keeps the forward decomposition's x̂ (a matrix in the case's dtype) and the
row's variance (mean square), and runs one kernel per step of `BACKWARD_DECOMPOSITIONS`; softmax's keeps y.

The tolerance is the forward's rule applied to the backward: four times the error of the unfused backward
evaluated in float32 with every stored matrix rounded to the case's dtype (from the forward decomposition's
own rounded x̂), at least what statistics off by a few float32 ulps cost (layernorm) and, for a gradient summed
across rows, what a float32 running sum over that many rows accumulates; above the family's floor, below 1
(`LIMITS`).

The scenario module imports this one, so the forward's float32 numerics come in as an argument (`Float32`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scenarios.normalization.backward_decomposition import (
    CROSS_ROW,
    GRADS,
    backward_ledgers,
    forward_ledgers,
    saved_bytes,
)
from scenarios.normalization.decomposition import DECOMPOSITIONS, ROW_STATS
from suite.core.ledger import VariantLedger
from suite.core.numerics import rel_err
from suite.core.phases import Backward
from suite.core.tolerances import FLOOR, Tolerance

if TYPE_CHECKING:
    from suite.core.scenario import Params, Scenario

U32 = float(np.finfo(np.float32).eps) / 2
FACTOR = 4.0
"""Tolerance = FACTOR × the emulated unfused backward's error, as in the forward."""
LIMITS = Tolerance(floor=FLOOR, ceiling=1.0)
"""The forward's floor, but a ceiling of 1 instead of the family's 0.05 / 0.2. A gradient is a difference
(g − Σg/n − x̂·m2, y·(dy − s)) or a column sum of products, and where it cancels the metric judges it against
1e-3 of its largest element, so conditioning, not the kernel, sets the error there: the unfused decomposition
in half storage (x̂, dx̂ stored as halves) reaches 0.2 by itself (layernorm's dweight at 33 × 781, its dx at
65,536 × 64), and rmsnorm's dx over one column, rstd·g·(1 − x̂²), loses 5% in float32 in any kernel. The
derived tolerance (four times the emulation's error) stands; 1 only says an error is never allowed to exceed
the element it is judged against. The tests hold the fused kernels to the storage precision separately."""


@dataclass(frozen=True)
class Float32:
    """The forward's float32 numerics, handed over by `scenario`: eps, how many ulps a kernel's statistic may be
    off, one decomposition step the way the kernels compute it, and a row sum in vector lanes."""

    eps: float
    stat_ulps: int
    step: Callable[..., np.ndarray]
    lane_sum: Callable[[np.ndarray], np.ndarray]


def grads64(op: str, x: np.ndarray, dy: np.ndarray, weight: np.ndarray | None, eps: float, shift: Any = 0.0):  # type: ignore[no-untyped-def]
    """Every gradient of `op` in float64 (closed form); `shift` moves layernorm's row means (the slack)."""
    if op == "softmax":
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        y = e / e.sum(axis=-1, keepdims=True)
        return {"dx": y * (dy - np.sum(dy * y, axis=-1, keepdims=True))}
    if op == "layernorm":
        xc = x - x.mean(axis=-1, keepdims=True)
        rstd = 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + eps)
        xhat = (xc - shift) * rstd
    else:
        rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
        xhat = x * rstd
    g = dy * weight
    inner = xhat * np.mean(g * xhat, axis=-1, keepdims=True)
    out = {"dweight": np.sum(dy * xhat, axis=0)}
    if op == "layernorm":
        inner = inner + np.mean(g, axis=-1, keepdims=True)
        out["dbias"] = np.sum(dy, axis=0)
    return {"dx": rstd * (g - inner), **out}


def column_sum(v: np.ndarray) -> np.ndarray:
    """Σ over rows in float32, one row after another: what an unfused column-sum kernel accumulates."""
    return np.cumsum(v, axis=0, dtype=np.float32)[-1]


class NormBackward(Backward):
    """The backward pass of one of the three ops; `op` picks its math (see `backward_decomposition`)."""

    def __init__(self, op: str, numerics: Float32) -> None:
        self.op, self.f32 = op, numerics
        self.grads = GRADS[op]

    def reference(self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        return self._grads64(inputs)

    def _grads64(self, inputs: dict[str, np.ndarray], shift: Any = 0.0) -> dict[str, np.ndarray]:
        weight = inputs["weight"].astype(np.float64) if "weight" in inputs else None
        x, dy = inputs["x"].astype(np.float64), inputs["dy"].astype(np.float64)
        return grads64(self.op, x, dy, weight, self.f32.eps, shift)

    def emulate(self, inputs: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
        """The unfused forward then backward in float32, every stored matrix and gradient rounded to `dtype`,
        row sums in lanes, column sums one row after another."""
        env = {name: a.astype(np.float32) for name, a in inputs.items()}

        def stored(v: np.ndarray) -> np.ndarray:
            return v.astype(dtype).astype(np.float32)

        for st in DECOMPOSITIONS[self.op]:
            stat = env[st.reads[1]][:, None] if len(st.reads) > 1 and st.reads[1] in ROW_STATS else None
            out = self.f32.step(st.op, env[st.reads[0]], stat, env)
            env[st.writes] = out if st.writes in ROW_STATS else stored(out)
        dy, cols = env["dy"], np.float32(env["x"].shape[-1])
        one, eps = np.float32(1), np.float32(self.f32.eps)
        if self.op == "softmax":
            y = env["y"]
            s = self.f32.lane_sum(stored(dy * y))[:, None]
            return {"dx": stored(y * (dy - s)).astype(dtype)}
        xhat, g = env["xhat"], stored(dy * env["weight"])
        stat = env["var" if self.op == "layernorm" else "ms"][:, None]
        rstd = one / np.sqrt(stat + eps)
        m2 = (self.f32.lane_sum(g * xhat) / cols)[:, None]
        inner = g - xhat * m2
        out = {"dweight": column_sum(dy * xhat)}
        if self.op == "layernorm":
            inner = g - (self.f32.lane_sum(g) / cols)[:, None] - xhat * m2
            out["dbias"] = column_sum(dy)
        out["dx"] = rstd * inner
        return {name: v.astype(dtype) for name, v in out.items()}

    def tolerance(
        self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: dict[str, np.ndarray]
    ) -> dict[str, float]:
        with np.errstate(over="ignore", invalid="ignore"):
            own = self.emulate(inputs, dtype)
        slack = self.slack(inputs, ref)
        return {
            name: LIMITS.clip(
                dtype,
                max(
                    FACTOR * rel_err(own[name], ref[name]),
                    slack.get(name, 0.0),
                    self.rows_term(inputs, ref, name),
                    self.cols_term(inputs, ref, name),
                ),
            )
            for name in ref
        }

    def slack(self, inputs: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> dict[str, float]:
        """layernorm: each gradient's error when the row means are off by `stat_ulps` float32 ulps of mean|x|
        (the forward's slack): x̂ shifts by that · rstd, which a recomputing kernel cannot avoid."""
        if self.op != "layernorm":
            return {}
        x = inputs["x"].astype(np.float64)
        ulp = np.spacing(np.abs(x).mean(axis=-1, keepdims=True).astype(np.float32)).astype(np.float64)
        moved = self._grads64(inputs, shift=self.f32.stat_ulps * ulp)
        return {name: rel_err(moved[name], ref[name]) for name in ref}

    def rows_term(self, inputs: dict[str, np.ndarray], ref: dict[str, np.ndarray], name: str) -> float:
        """A gradient summed over R rows: a float32 running sum rounds R partial sums, of size √i·rms(term),
        so its error grows like u·R·rms(term); 0 for dx."""
        if name not in CROSS_ROW:
            return 0.0
        dy = inputs["dy"].astype(np.float64)
        term = dy * self._xhat64(inputs) if name == "dweight" else dy
        err = U32 * term.shape[0] * np.sqrt(np.mean(term * term, axis=0))
        return rel_err(ref[name] + err, ref[name])

    def cols_term(self, inputs: dict[str, np.ndarray], ref: dict[str, np.ndarray], name: str) -> float:
        """softmax's dx as autograd differentiates the decomposition (max, shift, exp, sum, divide), in float32:
        dz = (dy/S − Σ dy·e/S²)·e, and the shift's max hands −Σ dz to each row's argmax, a sum that is 0 in exact
        arithmetic and u·Σ|dz| in float32, large beside a small dx there. The emulation's one-product form
        (y·(dy − s)) has no such path, and torch's eager rows were off by 6e-5 at 4,096 columns (at an argmax)
        where four times the emulation's error gave the floor, 1e-5. Four times this path's error; 0 for the
        other ops."""
        if self.op != "softmax" or name != "dx":
            return 0.0
        x, dy = inputs["x"].astype(np.float32), inputs["dy"].astype(np.float32)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        total = e.sum(axis=-1, keepdims=True, dtype=np.float32)
        de = dy / total
        ds = -(dy * e).sum(axis=-1, keepdims=True, dtype=np.float32) / (total * total)
        dz = (de + ds) * e
        rows = np.arange(x.shape[0])
        dz[rows, x.argmax(axis=-1)] -= dz.sum(axis=-1, dtype=np.float32)
        return FACTOR * rel_err(dz, ref[name])

    def _xhat64(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        x = inputs["x"].astype(np.float64)
        if self.op == "layernorm":
            x = x - x.mean(axis=-1, keepdims=True)
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.f32.eps)

    def saved(self, scn: Scenario, params: Params, dtype: str) -> dict[str, dict[str, int]]:
        return saved_bytes(self.op, params, dtype)

    def backward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        return backward_ledgers(self.op, params, dtype, tuple(scn.inputs))

    def forward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        return forward_ledgers(self.op, params, dtype, tuple(scn.inputs))
