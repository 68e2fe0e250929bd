"""Turn a composed config into a checked plan, or a one-line ConfigError naming the valid choices.

Everything a user can mistype is checked here, before any kernel is built: scenario, backends, variants,
dtypes, targets, each case's sizes and ops, and whether the largest case fits in this machine's memory.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from suite.core import phases, registry
from suite.core import scenario as scenarios
from suite.core.backend import BACKENDS, Backend
from suite.core.errors import ConfigError
from suite.core.host_memory import guard
from suite.core.plugins import load_plugins
from suite.core.registry import REGISTRY
from suite.core.scenario import Params, Scenario
from suite.core.targets import configure_emulation
from suite.gpu.occupancy import ARCHS
from suite.run import dram_sizes
from suite.run.dram_sizes import DRAM, Sizing

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Plan:
    """What a composed config runs: its cases and the axes every case is run over, checked."""

    config: DictConfig
    scenario: Scenario
    cases: list[Params]
    dtypes: list[str]
    backends: list[str]
    variants: list[str]
    targets: list[str]
    phase: str = phases.FORWARD
    left_out: str = ""
    """Why the plan has no cases although its config is valid (a family without a backward in a backward plan)."""
    sizing: Sizing | None = None
    """What `preset=DRAM` chose for the size axis, from which cache (None under any other preset)."""


def discover() -> None:
    """Import every backend and scenario: once per process, however often it is called (both scans are
    idempotent), so the parent plans and a worker runs with what one scan found."""
    registry.discover()
    scenarios.discover()


def discover_backends() -> dict[str, Backend]:
    """Every registered backend (the in-tree scan and the entry-point group)."""
    discover()
    return BACKENDS


def known_backends() -> list[str]:
    """Registered backends, and those whose package failed to import (their rows say why)."""
    return sorted(set(discover_backends()) | set(REGISTRY.load_errors))


def as_list(value: Any) -> list[Any]:
    value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    return list(value) if isinstance(value, list | tuple) else [value]


def _choose(kind: str, values: list[Any], valid: list[str] | tuple[str, ...]) -> list[str]:
    if not values:
        raise ConfigError(f"{kind} is empty; valid: {', '.join(valid)}")
    for v in values:
        if v not in valid:
            raise ConfigError(f"unknown {kind} '{v}'; valid: {', '.join(valid)}")
    return [str(v) for v in values]


def axes_of(scn: Scenario, node: dict[str, Any], preset: str) -> dict[str, list[Any]]:
    """Value lists per axis: the preset's, replaced axis by axis by what the user set. Under `preset=DRAM` the
    size axis stays empty unless the user set it: `dram_sizes.sized` chooses it once the dtypes are known."""
    if preset != DRAM and preset not in scn.presets:
        raise ConfigError(f"unknown preset '{preset}'; valid: {', '.join([*scn.presets, DRAM])}")
    values = dram_sizes.base_axes(scn) if preset == DRAM else scn.presets[preset]
    unknown = sorted(k for k, v in node.items() if k not in scn.axes and k != "name" and v is not None)
    if unknown:
        raise ConfigError(f"unknown key scenario.{unknown[0]} for {scn.name}; valid: {', '.join(scn.axes)}")
    axes = {}
    for axis in scn.axes:
        value = node.get(axis)
        axes[axis] = values[axis] if value is None else _axis_values(value, axis in scn.list_axes)
    return axes


def _axis_values(value: Any, list_valued: bool) -> list[Any]:
    """A scalar is one value; a list is a sweep, except on list-valued axes, where a flat list is one value."""
    if list_valued and isinstance(value, list) and not any(isinstance(v, list) for v in value):
        return [value]
    return as_list(value)


def prepare(cfg: DictConfig) -> Plan:
    """The plan of `cfg` in a process that was handed the composed config (a Hydra job, a test, the merge of a
    sweep): the plug-ins it names loaded first (`suite.core.plugins`), then `plan`."""
    load_plugins(cfg.plugins)
    return plan(cfg)


def plan(cfg: DictConfig) -> Plan:
    """Check `cfg` and say what to run; raise ConfigError on the first problem. Nothing is kept: the same config
    plans the same way each time it is planned. The plug-ins it names are loaded already (see `prepare`)."""
    configure_emulation(bool(cfg.device.emulate))  # before any backend library is imported
    try:
        node = OmegaConf.to_container(cfg.scenario, resolve=True)
    except OmegaConfBaseException as exc:  # a model's interpolation that cannot hold (tokens not whole sequences)
        said = str(exc).splitlines()[0].split("while resolving interpolation: ")[-1]
        raise ConfigError(f"{getattr(exc, 'full_key', '') or 'scenario'}: {said}") from None
    family = scenarios.get(str(node.get("name")))
    phase = phases.check_phase(str(cfg.get("phase", phases.FORWARD)))
    if phase not in phases.phases_of(family):
        why = f"{family.name} has no backward pass: left out of this {phase} plan (its phases: forward)"
        return Plan(cfg, family, [], [], [], [], [], phase, why)
    scn = phases.phased(family, phase)
    dtypes = _choose("dtype", as_list(cfg.dtype), scn.dtypes)
    axes = axes_of(scn, node, str(cfg.preset))
    sizing = None
    if str(cfg.preset) == DRAM:

        def fits(sized: dict[str, list[Any]]) -> None:  # the checks and the memory guard every plan passes
            _check_memory(scn, scn.cases(sized), dtypes)

        axes, sizing = dram_sizes.sized(scn, axes, dtypes, fits)
    cases = scn.cases(axes)
    known = known_backends()
    backends = _choose("backend", as_list(cfg.backends) if cfg.backends else known, known)
    variants = _choose("variant", as_list(cfg.variants) if cfg.variants else list(scn.variants), scn.variants)
    targets = _choose("device target", as_list(cfg.device.targets), DEVICES)
    if cfg.device.arch is not None:  # the architecture occupancy is computed for
        _choose("device.arch", [cfg.device.arch], ARCHS)
    _check_timing(cfg)
    _check_profile(cfg)
    _check_backend_options(cfg)
    _check_memory(scn, cases, dtypes)
    return Plan(cfg, scn, cases, dtypes, backends, variants, targets, phase, sizing=sizing)


CEILINGS = ("interleaved", "once")
"""timing.ceiling: the copy timed beside each case that exceeds the cache, or the worker's one measurement."""


def _check_timing(cfg: DictConfig) -> None:
    t = cfg.timing
    if not (t.budget_s >= 0 and t.min_reps >= 1 and t.max_reps >= t.min_reps and t.warmup >= 0):
        raise ConfigError("timing needs budget_s >= 0, min_reps >= 1, max_reps >= min_reps and warmup >= 0")
    if not t.case_timeout_s > 0:
        raise ConfigError(f"timing.case_timeout_s={t.case_timeout_s} must be positive")
    if t.ceiling not in CEILINGS:
        raise ConfigError(f"timing.ceiling={t.ceiling!r} is not one of: {', '.join(CEILINGS)}")
    if cfg.device.emulate_max_elements < 1:
        raise ConfigError("device.emulate_max_elements must be at least 1")


def _check_backend_options(cfg: DictConfig) -> None:
    """Every backend named under backend_options must be registered, and its options valid by its schema."""
    options = OmegaConf.to_container(cfg.backend_options, resolve=True) or {}
    registered = discover_backends()
    for name, given in options.items():
        if name not in registered:
            raise ConfigError(f"unknown backend '{name}' in backend_options; valid: {', '.join(sorted(registered))}")
        registered[name].check_options(given)


def _check_memory(scn: Scenario, cases: list[Params], dtypes: list[str]) -> None:
    """Refuse a case whose inputs, reference and outputs alone would not fit in this machine's memory."""
    itemsize = max(np.dtype(d).itemsize for d in dtypes)
    for params in cases:
        modeled = [scn.footprint_bytes(params, d, v) for d in dtypes for v in scn.variants_for(params)]
        known = [m for m in modeled if m is not None]  # the smallest variant must fit, with its float64 reference
        need = min(known) if known else scn.size(params) * (4 * itemsize + 2 * 8)  # inputs, out, intermediates
        guard(need, f"case {params}", " (its smallest variant's peak: inputs, outputs and live intermediates)")


PROFILES = ("none", "ncu")


def _check_profile(cfg: DictConfig) -> None:
    """`profile` is one of PROFILES, and `profile=ncu` finds Nsight Compute's ncu before any case runs."""
    profile = str(cfg.get("profile", "none"))
    if profile not in PROFILES:
        raise ConfigError(f"profile must be one of {', '.join(PROFILES)} (got '{profile}')")
    if profile == "ncu" and shutil.which("ncu") is None:
        raise ConfigError("profile=ncu needs Nsight Compute's ncu on PATH")
    if profile == "ncu":
        from suite.gpu.ncu import clock_control

        clock_control()  # FUSEBENCH_NCU_CLOCK_CONTROL refused before any work, naming the choices
