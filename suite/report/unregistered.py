"""The combinations a run has no row for because no kernel is registered for them, said in one line.

A plan runs each backend only on the variants it registered a kernel for (`suite.run.job.Job.impls`): a torch/cpu
`rope fused` that nobody wrote has no row, rather than an `unsupported` one that would double the timings table
and the rows-not-ok list with combinations nothing could have run. The report still says what it left out, so
that a missing line is not read as a missing measurement: per family and phase, every backend/device and every
variant that has a row somewhere in it, crossed, less the pairs that have one. A family's variants do not
depend on the backend (`Scenario.variants_for` looks at the case only), so a pair absent from every case of a
family whose backend and variant both ran is one with no kernel. Tables written before this rule carry such
pairs as `unsupported` rows whose reason is the runner's "no <backend>/<device> kernel for …": those rows are
taken out here and named on the same line.
"""

from __future__ import annotations

import re

import pandas as pd

LEGACY = re.compile(r"^no \S+/\S+ kernel for ")
"""The reason the runner gave a combination with no kernel before such combinations left the plan."""


def split(data: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The rows without the legacy no-kernel rows, and ('torch/cpu rope', 'fused') for each combination with no
    kernel registered, sorted."""
    legacy = (data["status"] == "unsupported") & data["reason"].astype(str).str.match(LEGACY)
    kept = data[~legacy]
    named = {(_label(r.impl, r.scenario, r.phase), r.variant) for r in data[legacy].itertuples()}
    loaded = (kept["device"] != "") & ~kept["backend"].astype(str).str.contains(",")
    present = kept[loaded]  # a backend that did not load has a row per variant already; a lost job's row is not one
    for (scenario, phase), rows in present.groupby(["scenario", "phase"]):
        have = set(zip(rows["impl"], rows["variant"], strict=True))
        impls, variants = sorted(set(rows["impl"])), sorted(set(rows["variant"]))
        named |= {(_label(i, scenario, phase), v) for i in impls for v in variants if (i, v) not in have}
    return kept, sorted(named)


def line(names: list[tuple[str, str]]) -> str | None:
    """'**Not registered** (…): torch/cpu rope fused, unfused; numba/cpu rope eager.' — one line, each
    implementation and family once with its variants; None when nothing was left out."""
    if not names:
        return None
    grouped: dict[str, list[str]] = {}
    for where, variant in names:
        grouped.setdefault(where, []).append(variant)
    said = "; ".join(f"{where} {', '.join(variants)}" for where, variants in grouped.items())
    return f"**Not registered** (no kernel for these, so no row): {said}."


def _label(impl: str, scenario: str, phase: str) -> str:
    staged = f" {phase}" if phase and phase != "forward" else ""
    return f"{impl} {scenario}{staged}"
