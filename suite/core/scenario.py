"""What a scenario module provides to the suite, and the table of scenarios found by scanning `scenarios/`.

A scenario says *what* is computed: its inputs, the float64 reference, size presets, the canonical unfused
decomposition and its traffic ledger, and the tolerance its outputs are held to. Backends say *how*.
"""

from __future__ import annotations

import importlib
import itertools
import pkgutil
from typing import Any, ClassVar

import numpy as np

from suite.core.errors import ConfigError
from suite.core.ledger import VariantLedger

Params = dict[str, Any]


class Scenario:
    name: ClassVar[str]
    inputs: ClassVar[tuple[str, ...]]
    variants: ClassVar[tuple[str, ...]] = ("fused", "unfused")
    baseline: ClassVar[str] = "unfused"
    pairs: ClassVar[tuple[tuple[str, str], ...]] = (("fused", "unfused"), ("library", "unfused"))
    """(candidate, baseline) variant pairs that get a paired speedup and a verdict on the same backend/device."""
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "float16")
    axes: ClassVar[tuple[str, ...]]
    """Parameter names; each is a sweep axis in the config and a key of `params` in results.csv."""
    presets: ClassVar[dict[str, Params]]
    """Preset name -> value lists per axis: `S` (tests), `M` (the default run), `L`."""
    size_axis: ClassVar[str]
    """The axis charts put on x when they plot against problem size."""
    list_axes: ClassVar[tuple[str, ...]] = ()
    """Axes whose one value is itself a list (a chain of ops, a tile): a flat list is one value, a list of
    lists a sweep. For every other axis a list is a sweep."""
    checks: ClassVar[list[Params]] = []
    """Small, awkward cases every kernel is tested on (tests/test_kernels.py), emulated kernels included."""

    def cases(self, axes: dict[str, list[Any]]) -> list[Params]:
        """The cartesian product of the axes' value lists, each case checked."""
        names = list(axes)
        out = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(axes[n] for n in names))]
        for params in out:
            self.check(params)
        return out

    def check(self, params: Params) -> None:
        """Raise ConfigError naming the bad value and the valid choices."""

    def variants_for(self, params: Params) -> tuple[str, ...]:
        """The variants a case compares (matmul without an epilogue has no fused/unfused pair)."""
        return self.variants

    def size(self, params: Params) -> int:
        """Elements of the main input, for charts and for the emulation limit."""
        return int(params[self.size_axis])

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        """Each input's shape (all inputs are of the case's dtype) without making the inputs: kernels built for
        the case itself on untouched arrays report the resources a GPU would use while emulation runs a slice."""
        raise NotImplementedError

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        """The output computed in float64 from the (already rounded) inputs."""
        raise NotImplementedError

    def output_shape(self, params: Params) -> tuple[int, ...]:
        raise NotImplementedError

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        raise NotImplementedError

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        raise NotImplementedError

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """A smaller case with the same structure, for the interpreter and the simulator."""
        return params

    def footprint_bytes(self, params: Params, dtype: str, variant: str) -> int | None:
        """Device memory `variant` holds while it runs, for the footprint guard; None where the family has no
        model (the guard then lets the case run, and planning uses a generic estimate)."""
        return None


SCENARIOS: dict[str, Scenario] = {}


def register(cls: type[Scenario]) -> type[Scenario]:
    SCENARIOS[cls.name] = cls()
    return cls


_discovered: set[str] = set()


def discover(package: str = "scenarios") -> dict[str, Scenario]:
    """Import every scenario module of `package` once per process (later calls only return the table)."""
    if package not in _discovered:
        root = importlib.import_module(package)
        for info in pkgutil.iter_modules(root.__path__, prefix=f"{package}."):
            importlib.import_module(info.name)
        _discovered.add(package)
    return SCENARIOS


def get(name: str) -> Scenario:
    scenarios = discover()
    if name not in scenarios:
        raise ConfigError(f"unknown scenario '{name}'; valid: {', '.join(sorted(scenarios))}")
    return scenarios[name]
