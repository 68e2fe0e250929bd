"""The layer's time split by what ran: each op's and step's time inside the layer, as a row records it, and what
kind of step each label names (a fusable op, a library GEMM, a layout copy).

`suite.kit.layer.compose` times every launcher of the chain on the CPU and keeps the medians in the row's
`extra.steps_ms`, by the labels `chain.steps` gives. The report (`report`) and the chart (`charts`) read them
here, so both split the layer the same way. Reads tidy rows, never runs a kernel.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from scenarios.decoder_layer.chain import ALL_OPS
from suite.kit.layer import STEP_ORDER, STEPS_MS
from suite.kit.tidy import json_dict

OP, GEMM, COPY = "fusable op", "GEMM", "copy"
KINDS = (OP, GEMM, COPY)


def family(label: str) -> str:
    """The op family a label runs ('add_rmsnorm (input)' → 'add_rmsnorm', 'linear_cross_entropy (LM head)' →
    'linear_cross_entropy'); '' for a GEMM or a copy."""
    name = label.split(" (")[0]
    return name if name in ALL_OPS else ""


def kind(label: str) -> str:
    """OP for a fusable op's label (the head's too, its GEMM inside its family's kernel), GEMM for a
    projection's ('Q projection'), COPY for every other step."""
    if family(label):
        return OP
    return GEMM if label.endswith("projection") else COPY


def step_times(row: pd.Series | dict[str, Any]) -> dict[str, float]:
    """A row's `extra.steps_ms` (label → median ms per launch, in the chain's order as `extra.step_order` keeps
    it); {} where none was recorded
    (a GPU row, a torch variant, a row from before step times)."""
    extra = json_dict(row["extra"])
    found, order = extra.get(STEPS_MS), extra.get(STEP_ORDER)
    if not isinstance(found, dict):
        return {}
    order = [k for k in order if k in found] if isinstance(order, list) else []
    order += [k for k in found if k not in order]
    return {str(k): float(found[k]) for k in order if isinstance(found[k], (int, float))}


def shares(times: dict[str, float]) -> dict[str, float]:
    """Each kind's share of the steps' total time (OP, GEMM, COPY; they add up to one)."""
    total = sum(times.values())
    out = dict.fromkeys(KINDS, 0.0)
    if total <= 0:
        return out
    for label, ms in times.items():
        out[kind(label)] += ms / total
    return out
