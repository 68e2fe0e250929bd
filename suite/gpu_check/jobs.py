"""What the GPU check sweeps, derived from the registry: one job per registered family and phase.

No list here names a family: each family says how the check sweeps it (`Scenario.gpu_check`, an experiment with
its sizes and dtypes; without one, its `M` preset on the GPU) and which case its summary leads with
(`Scenario.summary`). Its forward runs at every size of that sweep; each further phase it registers
(`phases_of`: backward and train where it has a backward pass) runs at the summary case only, so a phase the
registry gains is measured on the next GPU without an edit here. Families never measured on a GPU come first
(`measured_families` reads the committed runs), so that a check cut short by its deadline still answers for them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suite.core import phases
from suite.core import scenario as scenarios

CHECK_TIMING = (
    "timing.processes=1",
    "timing.budget_s=0.05",
    "timing.max_budget_s=0.15",
    "timing.energy_s=0.02",
    "timing.case_timeout_s=120",
)
"""One worker times every case (its repetitions are not pooled over two processes: the check asks whether the
suite works on this machine, not for the last percent); each implementation gets at most 0.15 s of rounds."""

SUMMARY_DTYPE = "float16"
"""The dtype a summary case is read in (and the backward and train phases run in): what GPUs train with beside
bfloat16, and what every CUDA backend here stores."""


@dataclass(frozen=True)
class FamilyJob:
    """One family in one phase: the Hydra overrides of its sweep, and whether they are narrowed to its summary case."""

    family: str
    phase: str
    base: tuple[str, ...]
    """The sweep at every size (before CHECK_TIMING and any narrowing)."""
    narrow: bool = False
    dtypes: tuple[str, ...] = ()
    """The forward's dtypes where the base does not set them (empty: its experiment's)."""

    def settings(self) -> dict[str, Any]:
        """What the job sets over its base, key -> value: a further phase and the summary case's dtype only (a
        forward sweeps its dtypes), the summary case's axes where narrowed."""
        scn = scenarios.get(self.family)
        out: dict[str, Any] = {}
        if self.phase != phases.FORWARD:
            out["phase"] = self.phase
        dtypes = self.dtypes if self.phase == phases.FORWARD else (summary_dtype(scn.dtypes, self.dtypes),)
        if dtypes:
            out["dtype"] = list(dtypes)
        if self.narrow:
            out |= {f"scenario.{axis}": [value] for axis, value in scn.summary.items()}
        return out

    @property
    def overrides(self) -> list[str]:
        """The job as Hydra overrides: its base, its settings, CHECK_TIMING."""
        mine = [f"{key}={value if key == 'phase' else hydra_value(value)}" for key, value in self.settings().items()]
        return [*self.base, *mine, *CHECK_TIMING]

    @property
    def label(self) -> str:
        return self.family if self.phase == phases.FORWARD else f"{self.family} ({self.phase})"


def summary_dtype(own: tuple[str, ...], swept: tuple[str, ...] = ()) -> str:
    """SUMMARY_DTYPE where the family has it, else the last of those it is swept (or can be stored) in."""
    return SUMMARY_DTYPE if SUMMARY_DTYPE in own else (swept or own)[-1]


def hydra_value(value: Any) -> str:
    """A value as a Hydra override writes it: JSON with no spaces (true, "half", [128,128,32])."""
    return json.dumps(value, separators=(",", ":"))


def base_overrides(name: str, scn: Any, quick: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The family's own GPU sweep, or (a family without one) its preset on the GPU, `M` (`S` under --quick), in the
    dtypes of a default run it has; (overrides, dtypes the job must set)."""
    if scn.gpu_check:
        return (f"experiment={scn.gpu_check}",), ()
    dtypes = tuple(d for d in ("float32", "float16") if d in scn.dtypes) or tuple(scn.dtypes)
    return (f"scenario={name}", f"preset={'S' if quick else 'M'}", "device.targets=[cuda]"), dtypes


RIVAL_VARIANTS = frozenset({"eager", "compiled", "library"})
"""What a user could pick instead of the suite's kernels (torch's, the compiler's, a library's, Liger's)."""


def sitting_out() -> dict[str, str]:
    """Families the check leaves out, each with its reason: those whose CUDA kernels are all rivals (a composed
    family's, until its backends compose on the GPU), since the check measures the suite's kernels against their
    rivals. A family with no CUDA kernel at all (a CPU plug-in) still joins: its rows say what is missing."""
    from suite.core import registry

    cuda = list(registry.discover().keys(device="cuda"))
    ours = {key.scenario for key in cuda if key.variant not in RIVAL_VARIANTS}
    rivals_only = {key.scenario for key in cuda} - ours
    return {name: "no CUDA kernel of the suite's own registered (only its rivals)" for name in sorted(rivals_only)}


def family_jobs(quick: bool, measured: set[str] | frozenset[str] = frozenset()) -> list[FamilyJob]:
    """Every registered family in every phase it registers, but those `sitting_out`; those not in `measured` first
    (by name within each group), each family's phases together. --quick narrows every job to its summary case, in
    its summary dtype."""
    out = sitting_out()
    found = {name: scn for name, scn in scenarios.discover().items() if name not in out}
    names = sorted(found, key=lambda name: (name in measured, name))
    jobs = []
    for name in names:
        base, dtypes = base_overrides(name, found[name], quick)
        dtypes = (summary_dtype(found[name].dtypes, dtypes),) if quick else dtypes
        for phase in phases.phases_of(found[name]):
            jobs.append(FamilyJob(name, phase, base, quick or phase != phases.FORWARD, dtypes))
    return jobs


def measured_families(results: Path) -> set[str]:
    """Families with a row timed natively on a CUDA device in a committed run under `results` (its results.csv)."""
    import pandas as pd

    found: set[str] = set()
    for path in sorted(results.glob("**/results.csv")):
        try:
            rows = pd.read_csv(path, usecols=["scenario", "device", "mode", "time_ms"])
        except (ValueError, OSError, pd.errors.ParserError):  # a table of another shape says nothing here
            continue
        timed = rows[(rows["device"] == "cuda") & (rows["mode"] == "native") & rows["time_ms"].notna()]
        found |= set(timed["scenario"])
    return found
