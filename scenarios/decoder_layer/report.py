"""decoder_layer's report section: per case and implementation, what fusion bought the whole layer, op by op.

Per case: the fused layer's paired speedup over the unfused one (interval and verdict, as every family's), each
single-op variant's (`fused_<op>`: that op fused alone, the attribution), the unfused layer's time split into
its fusable ops, GEMMs and copies (`extra.steps_ms`, `split`), and the gain those times predict: the sum over
the ops of (unfused op time − fused op time), set against the measured one. The ops' times come from their own
families' rows at the layer's shapes where the results hold them (each op timed alone: what a family's speedup
promises the layer), else from the ops' times inside the two layers (which leaves out only what the GEMMs and
copies gained or lost); the section says which. The predicted gain is taken off the unfused layer's own median
time, the measured one is that time less the fused layer's (through their paired speedup), so both are gains on
one time: the sum of each step's median inside the layer is less than the median of whole launches (a launch
also spends time between and across its steps that no one step's median holds), and a ratio on the steps' sum
would shrink the measured gain with it. Where prediction and measurement part by more than the interval, it says
by how much and names the step whose time inside the layer moved most against the prediction. Reads tidy rows,
never runs a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from scenarios.decoder_layer.chain import head, op_params, ops_of
from scenarios.decoder_layer.split import COPY, GEMM, OP, family, kind, shares, step_times
from suite.kit.markdown import table
from suite.kit.tidy import json_dict, speedups, tidy, timed

SCENARIO = "decoder_layer"
IN_LAYER, ALONE = "inside the layers", "timed alone"
"""Where the ops' times of a prediction come from."""
CASE = ["params", "dtype", "impl"]


@dataclass(frozen=True)
class Prediction:
    """The gain the ops' times predict; `residuals`: each step's gain inside the layer less its predicted gain
    (a GEMM's or a copy's predicted gain is none), what the prediction missed step by step."""

    source: str
    gain_ms: float
    speedup: float
    residuals: dict[str, float]

    def against(self, above: bool) -> tuple[str, float] | None:
        """The step that moved most against the prediction: where it predicted more than was measured, the one
        that lost most gain; where less, the one that gained most beyond it; None where no step did."""
        sign = -1.0 if above else 1.0
        label = max(self.residuals, key=lambda k: sign * self.residuals[k], default=None)
        return (label, self.residuals[label]) if label is not None and sign * self.residuals[label] > 0 else None


def alone_gains(data: pd.DataFrame, layer: pd.Series) -> dict[str, float] | None:
    """Each op family's unfused − fused median time (ms) from its own rows at the layer's shapes (same dtype,
    backend and device), or None where the results lack any family's pair. The head's family
    (linear_cross_entropy) is one of them only where the case has the head."""
    ok = timed(data)
    case = json_dict(layer["params"])
    params = op_params(case)
    out = {}
    for name in ops_of(case):
        same = ok[
            (ok["scenario"] == name)
            & (ok["dtype"] == layer["dtype"])
            & (ok["impl"] == layer["impl"])
            & (ok["params"].map(json_dict) == params[name])
        ]
        medians = same.groupby("variant")["time_ms"].median()
        if not {"fused", "unfused"} <= set(medians.index):
            return None
        out[name] = float(medians["unfused"] - medians["fused"])
    return out


def predict(unfused: dict[str, float], fused: dict[str, float], base_ms: float, alone: dict | None) -> Prediction:
    """The layer's gain the ops predict: Σ over the ops of their unfused − fused time (from `alone`, per family,
    where given, else inside the layers), as a speedup of the unfused layer's `base_ms`."""
    moved, predicted = {}, {}
    for label in unfused:
        moved[label] = unfused[label] - fused.get(label, 0.0)
        op = family(label)
        predicted[label] = (alone[op] if alone is not None else moved[label]) if op else 0.0
    gain = sum(predicted.values())
    source = ALONE if alone is not None else IN_LAYER
    residuals = {label: moved[label] - predicted[label] for label in moved}
    return Prediction(source, gain, base_ms / (base_ms - gain), residuals)


def _x(value: float, lo: float, hi: float) -> str:
    return f"{value:.2f}× [{lo:.2f}–{hi:.2f}]"


def case_name(row: pd.Series) -> str:
    """ "llama3_8b layer, 256 tokens" (a model's; "llama3_8b layer and LM head, …" with the head) or
    "layer (hidden=64, …), 33 tokens"."""
    params = json_dict(row["params"])
    if row.get("model"):
        return f"{row['model']} layer{' and LM head' if head(params) else ''}, {params['tokens']} tokens"
    case = ", ".join(f"{k}={v}" for k, v in params.items() if k != "tokens")
    return f"layer ({case}), {params['tokens']} tokens"


def peaks(rows: pd.DataFrame) -> tuple[float, float, str] | None:
    """The unfused and the fused layer's peak memory in MiB, measured where both rows were, else modeled, and
    which; None where either lacks it."""
    by = {v: rows[rows["variant"] == v] for v in ("unfused", "fused")}
    for column, how in (("peak_bytes", "measured"), ("peak_bytes_modeled", "modeled")):
        found = [by[v][column].dropna().median() if column in by[v] else float("nan") for v in by]
        if all(pd.notna(found)):
            return found[0] / 2**20, found[1] / 2**20, how
    return None


def quotable(row: pd.Series, fused: pd.Series | None, split: dict[str, float], peak: tuple | None = None) -> str:
    """'llama3_8b layer, 256 tokens, float32, numba/cpu: fused 1.12× [1.08–1.15] over unfused; the fusable ops
    were 18% of the unfused layer's time, the GEMMs 79%, the copies 3%; peak 1,210 → 1,150 MiB (measured).'"""
    head = f"{case_name(row)}, {row['dtype']}, {row['impl']}: "
    if fused is None:
        head += "the fused layer was not timed"
    else:
        head += f"fused {_x(fused['speedup'], fused['speedup_lo'], fused['speedup_hi'])} over unfused"
    if any(split.values()):
        head += (
            f"; the fusable ops were {split[OP]:.0%} of the unfused layer's time, the GEMMs {split[GEMM]:.0%}, "
            f"the copies {split[COPY]:.0%}"
        )
    if peak is not None:
        head += f"; peak {peak[0]:,.0f} → {peak[1]:,.0f} MiB ({peak[2]})"
    return head + "."


def _verdict_line(pred: Prediction, fused: pd.Series, base_ms: float) -> str:
    """The prediction against the measured speedup: within its interval, or off by how much and why."""
    said = f"Predicted from the ops' times {pred.source}: {pred.speedup:.2f}× ({pred.gain_ms:.3g} ms a launch)"
    measured_ms = base_ms - base_ms / fused["speedup"]  # the measured speedup as a gain on the same time
    said += f"; measured {_x(fused['speedup'], fused['speedup_lo'], fused['speedup_hi'])} ({measured_ms:.3g} ms"
    said += f", {measured_ms / pred.gain_ms:.0%} of the predicted gain)" if pred.gain_ms > 0 else ")"
    if fused["speedup_lo"] <= pred.speedup <= fused["speedup_hi"]:
        return said + ": the prediction falls within the interval."
    above = pred.speedup > fused["speedup_hi"]
    edge = fused["speedup_hi"] if above else fused["speedup_lo"]
    gap = pred.gain_ms - measured_ms
    said += f": the prediction is {abs(pred.speedup - edge):.2f}× {'above' if above else 'below'} the interval"
    said += f" ({abs(gap):.3g} ms a launch {'more' if gap > 0 else 'less'} gain than measured)"
    found = pred.against(above)
    if found is None:
        return said + (
            "; no step's time inside the layer moved against it (the gap lies between the median of whole "
            "launches and the sum of each step's median)."
        )
    return (
        said
        + f"; the step whose time inside the layer moved most against it: {found[0]} ({found[1]:+.3g} ms a launch)."
    )


def _steps_table(unfused: dict[str, float], fused: dict[str, float]) -> str:
    total = sum(unfused.values())
    body = [
        [
            label,
            kind(label),
            f"{ms:.3g}",
            f"{fused[label]:.3g}" if label in fused else "",
            f"{ms - fused[label]:+.3g}" if label in fused else "",
            f"{ms / total:.0%}",
        ]
        for label, ms in unfused.items()
    ]
    head = ["step", "kind", "unfused (ms)", "fused (ms)", "unfused − fused", "share of unfused"]
    return table(head, body)


def case_section(rows: pd.DataFrame, pairs: pd.DataFrame, whole: pd.DataFrame) -> list[str]:
    """The quotable line, the variants' speedups, the split and the prediction of one case's implementation."""
    ok = timed(rows)
    base = ok[ok["variant"] == "unfused"]
    if base.empty:
        return []
    row = base.iloc[0]
    mine = pairs[pairs["baseline"] == "unfused"]
    found = mine[mine["variant"] == "fused"]
    fused = found.iloc[0] if len(found) else None
    unfused_steps = step_times(row)
    out = [f"- **{quotable(row, fused, shares(unfused_steps), peaks(ok))}**"]
    gains = [
        [r.variant, _x(r.speedup, r.speedup_lo, r.speedup_hi), r.verdict]
        for r in mine.sort_values("variant").itertuples()
    ]
    if gains:
        out.append(table(["variant", "speedup over unfused", "verdict"], gains))
    if fused is not None and pd.notna(rival := ok[ok["variant"] == "fused"]["rival_speedup"].median()):
        lo, hi = (ok[ok["variant"] == "fused"][c].median() for c in ("rival_lo", "rival_hi"))
        out.append(f"The fused layer against torch.compile of the layer: {_x(rival, lo, hi)}.")
    fused_rows = ok[ok["variant"] == "fused"]
    fused_steps = step_times(fused_rows.iloc[0]) if len(fused_rows) else {}
    if unfused_steps and fused_steps and fused is not None:
        base_ms = float(row["time_ms"])  # the unfused layer's median launch: both gains are taken off it
        pred = predict(unfused_steps, fused_steps, base_ms, alone_gains(whole, row))
        out += [_verdict_line(pred, fused, base_ms), _steps_table(unfused_steps, fused_steps)]
    elif not unfused_steps:
        out.append("No step times were recorded (they are taken on the CPU only), so the layer is not split.")
    return out


def layer_section(frame: pd.DataFrame) -> str:
    """The section for a run's rows (this family's, and any other family's: its ops timed alone)."""
    whole = frame.copy() if "impl" in frame else tidy(frame)
    data = whole[whole["scenario"] == SCENARIO]
    if timed(data).empty:
        return ""
    pairs = speedups(data)
    parts = [
        "### The layer, op by op",
        "Per case and implementation: the fused layer's speedup over the unfused one and each op fused alone "
        "(paired rounds, 95% interval); each op's, GEMM's and copy's median time inside the layer (host clock "
        "around each, CPU only); and the gain the fusable ops' times predict, Σ (unfused − fused), against the "
        "measured one.",
    ]
    for key, rows in data.groupby(CASE, sort=True):
        mine = pairs[(pairs["params"] == key[0]) & (pairs["dtype"] == key[1]) & (pairs["impl"] == key[2])]
        parts += case_section(rows, mine, whole)
    return "\n\n".join(parts)
