"""The kernel registry: every implementation is registered under an explicit key, never inferred from its path.

A key is (scenario, backend, variant, device, phase). `device` is the kind of device a kernel is written for: Numba
writes for `cpu` and `cuda`, Triton and CuPy for `cuda` only; a backend on one device is its `Target`. `phase` is
the part of a training step it runs (`suite.core.phases`): `forward` unless registered otherwise. Backends
register their kernels on import with one decorator, `kernel` (`kernels` is its table form, for a module that
declares several variants at once); the suite imports them by scanning the in-tree `backends` package and the
`fusebench.backends` entry-point group, so a third party adds a backend without editing this tree.

The entry protocol, `entry(inputs, out, params, opts) -> Launch`:
- `inputs` maps each input's name to a device array; `out` is the output buffer the entry writes, or (for a
  case with several outputs, as a backward pass writes dx, dgamma and dbeta) a mapping of named output buffers;
- `params` are the case's shape parameters, `opts` the backend's options in force;
- an entry of the `backward` phase runs its own variant's forward while it prepares (outside the timed region)
  and launches only the backward pass, handed what that forward saved; one of the `train` phase launches both
  (`suite.kit.training` builds both from a variant's forward-with-save and its backward);
- the entry prepares everything (allocates, compiles) and returns a `Launch` (or, as plug-ins written for
  earlier versions do, a bare zero-argument callable, which `as_launch` wraps) that only launches.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, TypeVar

Launcher = Callable[[], None]
"""Anything that launches a prepared run: a `Launch`, or a bare function from a plug-in."""


@dataclass(frozen=True)
class Launch:
    """A prepared run of one variant, as its entry returns it: launches every kernel of it, writes the output
    buffer(s), allocates nothing. Calling it runs it, so the suite's timing code treats it as any launcher."""

    run: Callable[[], None]
    notes: dict[str, Any] = field(default_factory=dict)
    """What the launcher knows about itself (its grid, the threads it chose, what a compiler generated on the first
    call): the suite copies them into the row's `extra` after the first launch. The dict is the launcher's to
    fill while it runs; it is never replaced."""
    allocates: Mapping[str, int] = field(default_factory=dict)
    """Bytes of each device buffer the entry allocated beyond the suite's inputs and outputs (scratch, a
    materialised intermediate), by name: what the run keeps live besides the case's own buffers. Optional; the
    peak-memory model reads the scenario's ledger today, this is the entry's own account of it."""
    saves: Mapping[str, int] = field(default_factory=dict)
    """Backward and train phases: bytes of each tensor the variant's forward keeps for its backward pass, by name
    (inputs it keeps alive included): the activations a training step holds from one pass to the other."""
    publish: Callable[[], None] | None = None
    """For a library that returns its results in buffers of its own (torch autograd's gradients): copies them
    into the suite's output buffers. The suite calls it after each launch whose output it reads (the check),
    never inside a timed one, so the copy is not charged to the library's time."""

    def __post_init__(self) -> None:
        if not callable(self.run):
            raise TypeError(f"Launch.run must be callable, not {type(self.run).__name__}")
        if not isinstance(self.notes, dict):
            raise TypeError(f"Launch.notes must be a dict, not {type(self.notes).__name__}")

    def __call__(self) -> None:
        self.run()

    def checked(self) -> None:
        """One launch whose output the suite reads: run, then publish."""
        self.run()
        if self.publish is not None:
            self.publish()


def as_launch(launcher: Launcher) -> Launch:
    """`launcher` as a `Launch`: itself, or a bare callable wrapped with the `notes` attribute it may carry (the
    way plug-ins written for earlier versions reported them)."""
    if isinstance(launcher, Launch):
        return launcher
    found = getattr(launcher, "notes", None)
    return Launch(launcher, notes=found if isinstance(found, dict) else {})


Entry = Callable[..., Launcher]
"""entry(inputs, out, params, opts) -> Launch (the protocol is in the module's docstring)."""

FamilyEntry = Callable[..., Launcher]
"""entry(scenario: str, inputs, out, params, opts) -> Launch: one implementation serving several scenarios; the
registry binds `scenario` to the name it registers the entry under."""

E = TypeVar("E", bound=Callable[..., Any])


class Unsupported(Exception):
    """Raised by an entry that has no kernel for this case: `raise Unsupported("float16: no half tanh")` gives a
    `skipped` row with that reason, not an `error`. For a dtype, a shape or an option the kernel cannot do; raised
    while the entry prepares, before it returns a launcher."""


def notes(launcher: Launcher) -> dict[str, Any]:
    """What `launcher` reported about itself while it ran (a `Launch`'s notes, or a bare callable's `notes`
    attribute), or nothing: a copy."""
    return dict(as_launch(launcher).notes)


@dataclass(frozen=True, order=True)
class KernelKey:
    scenario: str
    backend: str
    variant: str
    device: str = "cuda"
    phase: str = "forward"


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


def kernel(
    *,
    scenario: str | Iterable[str],
    backend: str,
    variant: str | Iterable[str],
    device: str | Iterable[str] = "cuda",
    phase: str = "forward",
) -> Callable[[E], E]:
    """Register the decorated entry as the implementation of (scenario, backend, variant) on `device` ("cpu" or
    "cuda") for `phase` (forward, backward, train). Each of scenario, variant and device may be several: the entry is registered under every
    combination, bound to the key it serves where it asks for it. An entry that takes the scenario's name before
    the protocol's four arguments (a `FamilyEntry`: one implementation of layernorm, rmsnorm and softmax) is
    handed the scenario; one with a keyword-only `variant` is handed the variant (one function serving matmul's
    `unblocked`, `tiled` and `fused`, which differ in a kernel or two)."""

    def register(entry: E) -> E:
        family = _positional(entry) == 5
        by_variant = _keyword_only(entry, "variant")
        for name in _names(scenario):
            for v in _names(variant):
                bound = functools.partial(entry, name) if family else entry
                bound = functools.partial(bound, variant=v) if by_variant else bound
                bound = functools.update_wrapper(bound, entry) if bound is not entry else entry
                for d in _names(device):
                    REGISTRY.add(KernelKey(name, backend, v, d, phase), bound)
        return entry

    return register


def kernels(
    scenario: str | Iterable[str],
    *,
    backend: str,
    device: str | Iterable[str] = "cuda",
    phase: str = "forward",
    **variants: Entry,
) -> None:
    """The table form of `kernel`: each `variant=entry` registered as `@kernel` registers it, for a module that
    declares its variants in one place (`kernels("matmul", backend="cupy", fused=..., unfused=...)`)."""
    for variant, entry in variants.items():
        kernel(scenario=scenario, backend=backend, variant=variant, device=device, phase=phase)(entry)


def register_each(
    scenarios: Iterable[str], *, backend: str, devices: Iterable[str] = ("cuda",), **variants: FamilyEntry
) -> None:
    """Deprecated: `kernels(scenarios, backend=..., device=devices, **variants)`, kept for plug-ins."""
    kernels(tuple(scenarios), backend=backend, device=tuple(devices), **variants)


def _positional(entry: Callable[..., Any]) -> int:
    """How many positional arguments `entry` requires."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = inspect.signature(entry).parameters.values()
    return sum(p.kind in kinds and p.default is inspect.Parameter.empty for p in params)


def _keyword_only(entry: Callable[..., Any], name: str) -> bool:
    found = inspect.signature(entry).parameters.get(name)
    return found is not None and found.kind is inspect.Parameter.KEYWORD_ONLY


def _names(names: str | Iterable[str]) -> tuple[str, ...]:
    return (names,) if isinstance(names, str) else tuple(names)


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
