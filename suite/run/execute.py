"""One case, every implementation: each goes through the stages in order, then each becomes its row.

Availability and the build-and-check run implementation by implementation (see `suite.run.check`); peers,
timing, rates and the comparison need them all (see `suite.run.measure`). Every stage's result is frozen, and
`suite.run.result_rows` makes the rows from them at the end. Nothing here stops the sweep: a failure is a stage
result with a status and a reason.

Whether NVML saw the GPU's clocks held back while the case's CUDA implementations were timed is taken here
(`throttled`, sampled just before and just after the timing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suite.core import phases
from suite.core.row import Row
from suite.core.scenario import Scenario
from suite.core.targets import NATIVE
from suite.gpu import nvml
from suite.run import build, case_inputs, ceiling, check, measure, peak_memory
from suite.run.ceiling import Canary, Ceiling
from suite.run.job import Case, Job
from suite.run.result_rows import assemble
from suite.run.stages import Ledger, Stages
from suite.run.timing import CudaClock, Timing

Notify = Callable[[Any], None]


def execute(
    job: Job,
    scn: Scenario,
    case: Case,
    ceilings: dict[str, Ceiling],
    cuda_clock: CudaClock | None = None,
    notify: Notify | None = None,
) -> list[Row]:
    """Run every implementation of one case and return its rows.

    `notify((backend, device, variant))` is called before each implementation is built and run, and
    `notify(None)` before timing, so that whoever watches a worker that dies knows which implementation took
    it down.
    """
    notify = notify or (lambda _: None)
    assert case.seed is not None
    data = case_inputs.Inputs(scn, job.dtype, case.seed)
    keys = job.keys()
    ledgers = scn.ledger(job.params, job.dtype) if keys else {}
    found: measure.Found = {}
    for key in keys:
        lg = phases.modeled(ledgers, key.backend, key.variant)
        stages = Stages(build.availability(key, job), Ledger.of(lg, key.device) if lg and key.device else None)
        if stages.availability.runs:
            notify((key.backend, key.device, key.variant))
            built, resources = check.build_and_check(key, stages.availability, job, data, scn)
            case_inputs.save_io(key, built, job, data)
            stages = Stages(stages.availability, stages.ledger, built, resources)
        found[key] = stages
    found = measure.peers(found, case.seed)
    notify(None)
    found = peak_memory.measured(found, scn, job.params, job.dtype)
    canaries = ceiling.canaries(ceilings, _traffic(found), job.timing.ceiling == "interleaved")
    found, throttled, readings = timed_watching_clocks(found, job, cuda_clock, canaries)
    found = measure.rated(found, ceiling.read_beside(ceilings, readings))
    found = measure.compared(found, scn, case.seed)
    found = measure.rivaled(found, scn, case.seed)
    found = peak_memory.compared(found, scn)
    return flag_throttled([assemble(key, case, stages) for key, stages in found.items()], found, throttled)


def on_gpu(device: str, stages: Stages) -> bool:
    """Whether an implementation is timed on a GPU: a CUDA kernel, run natively, that passed its check."""
    return device == "cuda" and stages.mode == NATIVE and stages.ok and stages.check is not None


def _traffic(found: measure.Found) -> dict[str, int]:
    """Per device, the most bytes one implementation of the case moves (its ledger's)."""
    out: dict[str, int] = {}
    for key, stages in found.items():
        if stages.ledger is not None:
            moved = int(stages.ledger.bytes_read + stages.ledger.bytes_written)
            out[key.device] = max(out.get(key.device, 0), moved)
    return out


def timed_watching_clocks(
    found: measure.Found, job: Job, cuda_clock: CudaClock | None, canaries: dict[str, Canary] | None = None
) -> tuple[measure.Found, tuple[str, ...], dict[str, Timing]]:
    """`measure.timed` (with the `canaries` timed beside), with the GPU's clock-throttle reasons read from
    NVML just before and just after where anything is timed on it: their union (empty: none seen, or no NVML).
    NVML reports the clocks' state of the moment, so a throttle that came and went between the two readings is
    not seen."""
    watch = any(on_gpu(k.device, s) for k, s in found.items())
    before = nvml.throttle_reasons() if watch else ()
    found, readings = measure.timed(found, job, cuda_clock, canaries)
    return found, nvml.union(before, nvml.throttle_reasons() if watch else ()), readings


def flag_throttled(rows: list[Row], found: measure.Found, reasons: tuple[str, ...]) -> list[Row]:
    """`rows` (one per implementation of `found`, in order), each one timed on the GPU with `throttled` set to
    the reasons seen while it was (comma-separated)."""
    for row, (key, stages) in zip(rows, found.items(), strict=True):
        if on_gpu(key.device, stages) and stages.timing is not None:
            row.throttled = ",".join(reasons)
    return rows
