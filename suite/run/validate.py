"""Turn a composed config into a checked plan, or a one-line ConfigError naming the valid choices.

Everything a user can mistype is checked here, before any kernel is built: scenario, backends, variants,
dtypes, targets, each case's sizes and ops, and whether the largest case fits in this machine's memory.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from suite.core import scenario as scenarios
from suite.core import targets
from suite.core.errors import ConfigError
from suite.core.scenario import Params, Scenario

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Plan:
    scenario: Scenario
    cases: list[Params]
    dtypes: list[str]
    backends: list[str]
    variants: list[str]
    targets: list[str]


def known_backends() -> list[str]:
    """In-tree backend packages, entry-point backends and plugin-registered ones, found without importing them."""
    import backends

    names = {m.name for m in pkgutil.iter_modules(backends.__path__) if m.ispkg}
    names |= {ep.name for ep in entry_points(group="fusebench.backends")}
    names |= {b for b, _ in targets.TARGETS}
    return sorted(names)


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
    """Value lists per axis: the preset's, replaced axis by axis by what the user set."""
    if preset not in scn.presets:
        raise ConfigError(f"unknown preset '{preset}'; valid: {', '.join(scn.presets)}")
    unknown = sorted(k for k, v in node.items() if k not in scn.axes and k != "name" and v is not None)
    if unknown:
        raise ConfigError(f"unknown key scenario.{unknown[0]} for {scn.name}; valid: {', '.join(scn.axes)}")
    axes = {}
    for axis in scn.axes:
        value = node.get(axis)
        axes[axis] = scn.presets[preset][axis] if value is None else _axis_values(value, axis in scn.list_axes)
    return axes


def _axis_values(value: Any, list_valued: bool) -> list[Any]:
    """A scalar is one value; a list is a sweep, except on list-valued axes, where a flat list is one value."""
    if list_valued and isinstance(value, list) and not any(isinstance(v, list) for v in value):
        return [value]
    return as_list(value)


def plan(cfg: DictConfig) -> Plan:
    for module in cfg.plugins:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(f"plugin '{module}' cannot be imported: {exc}") from None
    node = OmegaConf.to_container(cfg.scenario, resolve=True)
    scn = scenarios.get(str(node.get("name")))
    cases = scn.cases(axes_of(scn, node, str(cfg.preset)))
    dtypes = _choose("dtype", as_list(cfg.dtype), scn.dtypes)
    backends = _choose("backend", as_list(cfg.backends), known_backends())
    variants = _choose("variant", as_list(cfg.variants) if cfg.variants else list(scn.variants), scn.variants)
    targets = _choose("device target", as_list(cfg.device.targets), DEVICES)
    _check_timing(cfg)
    _check_backend_options(cfg)
    _check_memory(scn, cases, dtypes)
    return Plan(scn, cases, dtypes, backends, variants, targets)


def _check_timing(cfg: DictConfig) -> None:
    t = cfg.timing
    if not (t.budget_s >= 0 and t.min_reps >= 1 and t.max_reps >= t.min_reps and t.warmup >= 0):
        raise ConfigError("timing needs budget_s >= 0, min_reps >= 1, max_reps >= min_reps and warmup >= 0")
    if not t.case_timeout_s > 0:
        raise ConfigError(f"timing.case_timeout_s={t.case_timeout_s} must be positive")
    if cfg.device.emulate_max_elements < 1:
        raise ConfigError("device.emulate_max_elements must be at least 1")


def _pow2(low: int, high: int) -> tuple[str, Any]:
    return f"a power of two in {low}..{high}", lambda v: low <= v <= high and v & (v - 1) == 0


def _threads(v: int) -> bool:
    return 32 <= v <= 1024 and v % 32 == 0


BACKEND_OPTIONS: dict[str, dict[str, tuple[str, Any]]] = {
    "triton": {"block": _pow2(16, 65536), "num_warps": _pow2(1, 32)},
    "cupy": {"block": ("a multiple of 32 in 32..1024", _threads), "max_items": ("an integer in 1..512",
                                                                                 lambda v: 1 <= v <= 512)},
    "numba": {"block": ("a multiple of 32 in 32..1024", _threads)},
}  # fmt: skip
"""backend_options.<backend>.<key> the kernels read: Triton's elementwise block (elements per program) and
num_warps; CuPy's and Numba CUDA's threads per block; CuPy normalization's cap on row values per thread."""


def _check_backend_options(cfg: DictConfig) -> None:
    options = OmegaConf.to_container(cfg.backend_options, resolve=True) or {}
    for backend, given in options.items():
        rules = BACKEND_OPTIONS.get(str(backend), {})
        for key, value in (given or {}).items():
            if key not in rules:
                valid = ", ".join(rules) or "none"
                raise ConfigError(f"unknown option backend_options.{backend}.{key}; valid: {valid}")
            meaning, ok = rules[key]
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not ok(value):
                raise ConfigError(f"backend_options.{backend}.{key}={value} must be {meaning}")


def _check_memory(scn: Scenario, cases: list[Params], dtypes: list[str]) -> None:
    """Refuse a case whose inputs, reference and outputs alone would not fit in this machine's memory."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    itemsize = max(np.dtype(d).itemsize for d in dtypes)
    for params in cases:
        need = scn.size(params) * (4 * itemsize + 2 * 8)  # inputs, out, intermediates; float64 reference
        if hasattr(scn, "footprint_bytes"):  # the smallest variant must fit, with its float64 reference
            need = min(scn.footprint_bytes(params, d, v) for d in dtypes for v in scn.variants_for(params))
        if need > total:
            raise ConfigError(
                f"case {params} needs about {need / 2**30:.1f} GiB; this machine has {total / 2**30:.1f} GiB"
            )
