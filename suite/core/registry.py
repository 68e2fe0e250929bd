"""The kernel registry: every implementation is registered under an explicit key, never inferred from its path.

A key is (scenario, backend, variant, device). `device` is the kind of device a kernel is written for: Numba
writes for `cpu` and `cuda`, Triton and CuPy for `cuda` only; a backend on one device is its `Target`. Backends register their kernels on import; the suite imports
them by scanning the in-tree `backends` package and the `fusebench.backends` entry-point group, so a third
party adds a backend without editing this tree.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

Launcher = Callable[[], None]
"""A prepared run of one variant: launches every kernel of it, writes the output buffer, allocates nothing.

A launcher may carry `notes`, a dict it fills while it runs (what a compiler generated for it on the first
call, whether that came from a cache): the suite reads them after the first launch into the row's `extra`."""

Entry = Callable[..., Launcher]
"""entry(inputs: dict[str, device array], out: device array, params: dict, opts: dict) -> Launcher."""

FamilyEntry = Callable[..., Launcher]
"""entry(scenario: str, inputs, out, params, opts) -> Launcher: one implementation serving several scenarios."""


class Unsupported(Exception):
    """Raised by an entry that has no kernel for this case: `raise Unsupported("float16: no half tanh")` gives a
    `skipped` row with that reason, not an `error`. For a dtype, a shape or an option the kernel cannot do; raised
    while the entry prepares, before it returns a launcher."""


def notes(launcher: Launcher) -> dict[str, Any]:
    """What `launcher` reported about itself while it ran (its `notes` attribute), or nothing."""
    found = getattr(launcher, "notes", None)
    return dict(found) if isinstance(found, dict) else {}


@dataclass(frozen=True, order=True)
class KernelKey:
    scenario: str
    backend: str
    variant: str
    device: str = "cuda"


@dataclass
class Registry:
    kernels: dict[KernelKey, Entry] = field(default_factory=dict)
    load_errors: dict[str, str] = field(default_factory=dict)
    """Backend modules that failed to import, with the reason (a missing optional dependency, usually)."""

    def add(self, key: KernelKey, entry: Entry) -> None:
        if key in self.kernels:
            raise ValueError(f"kernel {key} registered twice")
        self.kernels[key] = entry

    def get(self, key: KernelKey) -> Entry | None:
        return self.kernels.get(key)

    def keys(self, **match: str) -> list[KernelKey]:
        return sorted(k for k in self.kernels if all(getattr(k, a) == v for a, v in match.items()))

    def backends(self) -> list[str]:
        return sorted({k.backend for k in self.kernels} | {n.split(".")[0] for n in self.load_errors})


REGISTRY = Registry()


def kernel(*, scenario: str, backend: str, variant: str, device: str = "cuda") -> Callable[[Entry], Entry]:
    """Register `entry` as the implementation of (scenario, backend, variant) on `device` ("cpu" or "cuda")."""

    def register(entry: Entry) -> Entry:
        REGISTRY.add(KernelKey(scenario, backend, variant, device), entry)
        return entry

    return register


def register_each(scenarios: Iterable[str], *, backend: str, devices: Iterable[str] = ("cuda",),
                  **variants: FamilyEntry) -> None:  # fmt: skip
    """Register, for every scenario and device, each `variant=entry` under its explicit key, the entry bound to
    the scenario's name: what a backend whose kernels serve a family of scenarios (layernorm, rmsnorm, softmax)
    would otherwise write as a loop of `@kernel`s."""
    devices = tuple(devices)
    for scenario in scenarios:
        for device in devices:
            for variant, entry in variants.items():
                bound = functools.update_wrapper(functools.partial(entry, scenario), entry)
                kernel(scenario=scenario, backend=backend, variant=variant, device=device)(bound)


_discovered = False


def discover(package: str = "backends") -> Registry:
    """Import every backend module once: the in-tree package scan, then the entry-point group.

    A module whose optional dependency is missing is recorded in `load_errors` (its backend then shows as
    unavailable with that reason) instead of stopping the suite.
    """
    global _discovered
    if _discovered:
        return REGISTRY
    _discovered = True
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}.", onerror=_record_walk_error):
        _import(info.name)
    for ep in entry_points(group="fusebench.backends"):
        try:
            ep.load()
        except Exception as exc:  # a third-party backend must not take the suite down
            REGISTRY.load_errors[ep.name] = f"{type(exc).__name__}: {exc}"
    return REGISTRY


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:
        short = name.removeprefix("backends.")
        REGISTRY.load_errors[short] = f"{type(exc).__name__}: {exc}"
        return None


def _record_walk_error(name: str) -> None:
    REGISTRY.load_errors[name.removeprefix("backends.")] = "package failed to import"
