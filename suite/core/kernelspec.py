"""The recording API backends use to put every CUDA kernel an entry builds on record for the resource report.

Fusing grows a kernel's live state, and registers, spills and shared memory decide how many warps an SM keeps
resident, so each kernel a variant launches is recorded as a `KernelSpec`: its block size and a *recipe*, enough
for its backend to rebuild and compile it in another process (`Backend.compile`). The suite records while an
entry builds (`recording()`); a backend's own helper derives the recipe from the launch and calls `record`, or
`guarded` where deriving it may fail, which must never fail the entry. Recipes hold only JSON-able values, lists
frozen to tuples (`freeze`), so a spec is hashable, survives a JSON round trip, and keys a cache that outlives
the process; a kernel made by a module-level factory is named by reference (`factory`, `resolve_factory`).

This lives in the core because backends may import nothing else of the suite.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from suite.core.backend import BACKENDS
from suite.core.fingerprint import module_fingerprint

Factory = tuple[str, str, "tuple[Any, ...] | None"]
"""(module, attribute, args): `getattr(import_module(module), attribute)`, called with `args` unless None."""


def freeze(value: Any) -> Any:
    """JSON-able values with lists as tuples, so a recipe is hashable (and a JSON round trip gives it back)."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, Mapping):
        raise TypeError("recipes hold (key, value) pairs, not mappings")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"{type(value).__name__} is not JSON-able: {value!r}")


def pairs(mapping: Mapping[str, Any] | Sequence[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
    """A mapping (or (key, value) pairs) as frozen pairs, the form every recipe field of several values takes."""
    items = mapping.items() if isinstance(mapping, Mapping) else mapping
    return tuple((str(k), freeze(v)) for k, v in items)


def factory(reference: Sequence[Any]) -> Factory:
    """A (module, attribute[, args]) reference in its recorded form."""
    module, attribute, *rest = reference
    args = rest[0] if rest else None
    return (str(module), str(attribute), None if args is None else freeze(tuple(args)))


_RESOLVED: dict[Factory, Any] = {}


def resolve_factory(reference: Sequence[Any]) -> Any:
    """The kernel object a recorded (module, attribute, args) reference names, made once per process."""
    key = factory(reference)
    if key not in _RESOLVED:
        module, attribute, args = key
        obj: Any = importlib.import_module(module)
        for part in attribute.split("."):
            obj = getattr(obj, part)
        _RESOLVED[key] = obj(*args) if args is not None else obj
    return _RESOLVED[key]


def _known(backend: str) -> bool:
    if backend not in BACKENDS:
        from suite.core.registry import discover  # only for a spec made before its backend was imported

        discover()
    return backend in BACKENDS


@dataclass(frozen=True)
class KernelSpec:
    """One CUDA kernel as launched: enough to rebuild and compile it in another process, and its block size.

    `recipe` is a tuple of (field, value) pairs of frozen JSON-able values, which the backend's recording helper
    writes and its `compile` reads (each backend documents its fields); a field named `factory` holds a
    (module, attribute, args) reference, whose source takes part in the cache key. `live` is the kernel as
    loaded on a GPU, read for its attributes (`Backend.loaded_attributes`); it takes no part in equality or
    the cache key.
    """

    backend: str
    name: str
    threads: int
    recipe: tuple[tuple[str, Any], ...]
    dynamic_smem: int = 0
    """Dynamic shared memory per block the launch adds to the kernel's own."""
    live: Any = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if not _known(self.backend):
            raise ValueError(f"backend must be one of {sorted(BACKENDS)}, not {self.backend!r}")
        if int(self.threads) <= 0:
            raise ValueError(f"threads per block must be positive, not {self.threads}")

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.recipe).get(name, default)

    def compile_json(self) -> dict[str, Any]:
        """What a compile depends on (not the display name, block size or dynamic shared memory)."""
        return {"backend": self.backend, "recipe": dict(self.recipe)}

    def to_json(self) -> dict[str, Any]:
        return {**self.compile_json(), "name": self.name, "threads": self.threads, "dynamic_smem": self.dynamic_smem}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelSpec:
        recipe = tuple((k, freeze(v)) for k, v in data["recipe"].items())
        return cls(data["backend"], data["name"], int(data["threads"]), recipe, int(data.get("dynamic_smem", 0)))

    def cache_key(self) -> str:
        """Stable across processes and runs: the compile recipe plus the source files a factory comes from."""
        payload = self.compile_json()
        made_by = self.get("factory")
        if made_by is not None:
            payload["sources"] = module_fingerprint(made_by[0])
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Unrecorded:
    """A kernel whose spec could not be derived; recorded so the report says why instead of failing the row."""

    backend: str
    name: str
    reason: str


_ACTIVE: ContextVar[list | None] = ContextVar("fusebench_resource_recording", default=None)


@contextlib.contextmanager
def recording(into: list | None = None) -> Iterator[list]:
    """Collect the specs recorded by the entries built inside (into `into` when given); nests."""
    specs = [] if into is None else into
    token = _ACTIVE.set(specs)
    try:
        yield specs
    finally:
        _ACTIVE.reset(token)


def active() -> bool:
    """Whether anything records now: helpers check first, so that an entry built outside pays nothing."""
    return _ACTIVE.get() is not None


def record(spec: KernelSpec | Unrecorded) -> None:
    """Add a spec to the innermost `recording()`; a no-op outside one."""
    specs = _ACTIVE.get()
    if specs is not None:
        specs.append(spec)


def guarded(backend: str, name: str, build: Callable[[], KernelSpec]) -> None:
    """Record `build()`; a spec that cannot be derived must never fail the entry that records it."""
    try:
        record(build())
    except Exception as exc:
        record(Unrecorded(backend, name, f"{type(exc).__name__}: {exc}"))
