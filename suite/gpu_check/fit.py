"""Fitting the check's sweep into its budget: sizes go before families, and the dry run says what went.

A family whose sweep is narrowed to its summary case still answers for itself on this GPU; a family dropped does
not, so every family's other sizes are dropped before any family is, and a family's backward, then its train step
(run at its summary case) before any family's forward. Each goes from the end of the sweep's order,
where the families already measured on a GPU stand (`jobs.family_jobs`), so those never measured keep the most.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from suite.core.phases import BACKWARD, FORWARD, TRAIN
from suite.gpu_check.estimate import Estimate
from suite.gpu_check.jobs import FamilyJob

DROP_ORDER = (BACKWARD, TRAIN, FORWARD)
"""Whole jobs go in this order: a family's backward pass alone first (its train step times it too), then its train
step (what a user adopting a fused kernel for training reads), and a family's forward last."""


def fit(
    work: list[Estimate], spare_s: float, estimate: Callable[[FamilyJob], Estimate]
) -> tuple[list[Estimate], list[str]]:
    """`work` cut until its seconds fit in `spare_s` (the budget less the tests, start-up and report), and one
    line for each cut: first each job's sizes other than its summary case, then whole jobs."""
    work, dropped = list(work), []
    for i in reversed(range(len(work))):
        if sum(e.seconds for e in work) <= spare_s:
            return work, dropped
        if work[i].job.narrow or work[i].cases <= len(work[i].dtypes):
            continue
        narrowed = estimate(replace(work[i].job, narrow=True))
        dropped.append(
            f"dropped   {work[i].job.label}: every size but its summary case {narrowed.summary[0]} "
            f"({work[i].cases - narrowed.cases} cases, ≈ {work[i].seconds - narrowed.seconds:.0f} s)"
        )
        work[i] = narrowed
    for phase in DROP_ORDER:  # the backward alone before the train step, which holds it, before any forward
        for i in reversed(range(len(work))):
            if sum(e.seconds for e in work) <= spare_s:
                return work, dropped
            if work[i].job.phase == phase and work[i].seconds > 0:  # one that costs nothing stays
                gone = work.pop(i)
                dropped.append(
                    f"dropped   {gone.job.label}: the whole job ({gone.cases} cases, ≈ {gone.seconds:.0f} s)"
                )
    return work, dropped
