"""The one place a results row is made: from the case it belongs to and the stages its implementation went through.

Every row of results.csv comes from `assemble`, the rows of a case whose worker was lost (`lost`) included, so
what a column holds is decided here once: a stage's fields named like columns are those columns, the status and
reason are the stages' outcome, and the provenance (device name, command, run id) comes from the case.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from suite.core import phases
from suite.core.backend import BACKENDS
from suite.core.registry import KernelKey
from suite.core.row import COLUMNS, Row, params_json
from suite.core.targets import COMPILE, EMULATED, NATIVE
from suite.run import provenance
from suite.run.job import Case, Job
from suite.run.stages import Check, Stages

HOST_NAMES = {EMULATED: "host (emulated)", COMPILE: "sm_90 (compiled, not run)"}
"""What ran a kernel that did not run natively on its device."""

_OWN = {
    "scenario",
    "params",
    "dtype",
    "backend",
    "device",
    "variant",
    "phase",
    "saved_bytes",
    "saved_bytes_modeled",
    "status",
    "reason",
    "mode",
    "extra",
    "size",
    "seed",
    "model",
    "layer",
    "versions",
    "git_rev",
    "run_id",
    "device_name",
    "command",
    "backend_options",
}
_FROM_STAGES = set(COLUMNS) - _OWN
"""Columns a stage's field of the same name fills; the others are the key, the outcome, `extra` and the case's."""


def assemble(key: KernelKey, case: Case, stages: Stages) -> Row:
    """The results row of implementation `key` of `case`."""
    status, reason = stages.outcome()
    values: dict[str, Any] = {}
    for stage in (
        stages.ledger,
        stages.check,
        stages.resources,
        stages.peer,
        stages.timing,
        stages.rates,
        stages.comparison,
        stages.rival,
        stages.memory,
        stages.memory_comparison,
    ):
        if stage is not None:
            values.update({f.name: getattr(stage, f.name) for f in fields(stage) if f.name in _FROM_STAGES})
    extra = dict(stages.resources.extra) if stages.resources is not None else {}
    if stages.check is not None:
        extra.update(stages.check.notes)
    if stages.timing is not None:
        extra.update(stages.timing.notes)
    if stages.rates is not None and stages.rates.gflops is not None:
        extra["gflops"] = stages.rates.gflops
    if stages.memory is not None and stages.memory.note:
        extra["peak"] = stages.memory.note
    if stages.memory_comparison is not None and stages.memory_comparison.basis:
        extra["memory_basis"] = stages.memory_comparison.basis
    mode = stages.mode
    device_name = case.device_names.get(key.device, "") if mode == NATIVE else HOST_NAMES.get(mode, "")
    given = dict(case.backend_options.get(key.backend) or {})
    command = provenance.command(
        key.scenario,
        case.params,
        case.dtype,
        key.backend,
        key.device or "all",
        key.variant,
        given,
        case.plugins,
        key.phase,
    )
    backend = BACKENDS.get(key.backend)
    in_force = backend.in_force(given) if backend is not None else given
    return Row(
        scenario=key.scenario,
        params=params_json(case.params),
        dtype=case.dtype,
        backend=key.backend,
        device=key.device,
        variant=key.variant,
        phase=key.phase,
        saved_bytes=sum(extra["saved"].values()) if isinstance(extra.get("saved"), dict) else None,
        saved_bytes_modeled=phases.modeled(case.saved, key.backend, key.variant),
        status=status,
        reason=reason,
        mode=mode,
        size=case.size,
        seed=case.seed,
        model=case.model,
        layer=case.layer,
        versions=case.versions,
        git_rev=case.git_rev,
        run_id=case.run_id,
        device_name=device_name,
        command=command,
        extra=extra,
        backend_options=_json(in_force),
        **_repetitions(stages),
        **values,
    )


def _json(options: dict[str, Any]) -> str:
    return json.dumps(options, sort_keys=True, default=str) if options else ""


def _repetitions(stages: Stages) -> dict[str, Any]:
    """What reps.csv keeps of a timed implementation: every repetition, its block, the canary's time beside it
    and whether it was left out."""
    t = stages.timing
    if t is None:
        return {}
    return {"times_ms": t.times_ms, "blocks": t.blocks, "canary_times_ms": t.canary_times_ms, "excluded": t.excluded}


def lost(job: Job, reason: str, keys: list[KernelKey] | None = None) -> list[Row]:
    """`error` rows for a case, or for its implementations `keys`, whose worker timed out or died: nothing
    measured, the reason kept. Where the case had no implementation to run, one row names them all."""
    keys = job.keys() if keys is None else keys
    keys = keys or [KernelKey(job.scenario, ",".join(job.backends), ",".join(job.variants), ",".join(job.devices))]
    failed = Stages(check=Check("error", reason))
    return [assemble(k, Case.lost(job), failed) for k in keys]
