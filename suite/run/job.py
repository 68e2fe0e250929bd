"""What the runner sends a worker (a `Job`: one case and every implementation to run on it), and what every row
of the case shares (a `Case`: its identity and the run's provenance).

A job travels to the worker process, so it holds plain values only; the plan it comes from stays behind.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from suite.core import targets
from suite.core.registry import REGISTRY, KernelKey
from suite.core.row import params_json
from suite.core.scenario import SCENARIOS, Params
from suite.run.config import TimingConfig


@dataclass
class Job:
    scenario: str
    params: Params
    dtype: str
    backends: list[str]
    devices: list[str]
    variants: list[str]
    seed: int
    timing: TimingConfig
    emulate: bool
    emulate_max_elements: int
    backend_options: dict[str, dict[str, Any]]
    io_dir: str | None = None
    skip: set[tuple[str, str, str]] = field(default_factory=set)
    """(backend, device, variant) already in the table (resume)."""
    strict: bool = False
    """Variants were named by the user: each runs on every case, even one its scenario would not compare
    (`Scenario.variants_for`). A (backend, device, variant) with no kernel registered runs in no plan and has no
    row, named or not: the report names those combinations in one line (`suite.report.unregistered`)."""
    run_id: str = ""
    """The run directory's name, recorded in every row."""
    cache_dir: str | None = None
    """Where backends keep compile caches for this run (`<run dir>/cache`); None: their own defaults."""
    arch: str | None = None
    """The SM architecture occupancy is computed for (device.arch); None: the GPU's own, else sm_90."""
    model: str = ""
    """The model whose shapes set the case (`model=`), and the layer it stands for: recorded in every row."""
    layer: str = ""
    phase: str = "forward"
    """The part of a training step every implementation runs (suite.core.phases)."""

    def impls(self) -> list[tuple[str, str, str]]:
        """What to run: each backend on each requested device it has a target for, each variant it has a kernel
        registered for (a backend that did not load: each variant, its rows saying why)."""
        out = []
        for backend in self.backends:
            devices = [d for d in self.devices if (backend, d) in targets.TARGETS]
            if not devices and backend in REGISTRY.load_errors:
                devices = [""]  # the backend did not load: one row per variant says why
            scn = SCENARIOS.get(self.scenario)
            wanted = scn.variants_for(self.params) if scn is not None else self.variants
            out += [
                (backend, d, v)
                for d in devices
                for v in self.variants
                if self.strict or v in wanted
                if (backend, d, v) not in self.skip
                and (not d or REGISTRY.get(KernelKey(self.scenario, backend, v, d, self.phase)))
            ]
        return out

    def keys(self) -> list[KernelKey]:
        return [KernelKey(self.scenario, b, v, d, self.phase) for b, d, v in self.impls()]


def case_seed(base: int, scenario: str, params: Params, dtype: str) -> int:
    """A stable per-case seed, recorded in every row, so any case's inputs can be regenerated alone."""
    return zlib.crc32(f"{base}|{scenario}|{params_json(params)}|{dtype}".encode())


@dataclass(frozen=True)
class Case:
    """One (scenario, params, dtype) and the provenance every row of it carries. A case lost with its worker
    has only its identity and run id: nothing else was measured."""

    scenario: str
    params: Params
    dtype: str
    size: int | None = None
    seed: int | None = None
    versions: str = ""
    git_rev: str = ""
    run_id: str = ""
    device_names: Mapping[str, str] = field(default_factory=dict)
    """The name of each device kernels run natively on (the CPU's model, the GPU's)."""
    model: str = ""
    layer: str = ""
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    """`backend_options.<backend>.<option>` as the run set them: every row records those of its backend in force,
    and its reproduce command repeats them."""
    plugins: tuple[str, ...] = ()
    """The modules `plugins=[...]` imported: a row's reproduce command repeats them, so a family or backend they
    register is found again."""
    saved: Mapping[str, int] = field(default_factory=dict)
    """Backward and train phases: per variant, the bytes its forward keeps for the backward (the family's model)."""

    @classmethod
    def lost(cls, job: Job) -> Case:
        scn = SCENARIOS.get(job.scenario)
        size = scn.size(job.params) if scn is not None else None
        return cls(
            job.scenario,
            job.params,
            job.dtype,
            size,
            run_id=job.run_id,
            model=job.model,
            layer=job.layer,
            backend_options=job.backend_options,
        )
