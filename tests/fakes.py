"""A fake scenario and backend for harness tests: each variant misbehaves in one way the suite must record.

Imported by the tests in-process and by the worker through `plugins=[tests.fakes]`.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from suite.core.backend import BACKENDS, Backend, register_backend
from suite.core.ledger import KernelTraffic, VariantLedger
from suite.core.registry import REGISTRY, KernelKey, kernel
from suite.core.scenario import SCENARIOS, Params, Scenario, register
from suite.core.targets import NATIVE, Availability, Target

BEHAVIOURS = ("good", "twice", "wrong", "partial", "raises", "slow", "crash")


class FakeTarget(Target):
    backend, device = "fake", "cpu"

    def probe(self) -> Availability:
        return Availability(NATIVE, "host NumPy")


class Fake(Backend):
    name = "fake"


class Doubling(Scenario):
    """y = 2·x; variant names are the fake kernels' behaviours."""

    name = "fake_double"
    inputs = ("x",)
    variants = BEHAVIOURS
    baseline = "good"
    axes = ("n",)
    size_axis = "n"
    presets = {"S": {"n": [7, 100]}, "M": {"n": [1000]}, "L": {"n": [10000]}}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"x": rng.uniform(1.0, 2.0, params["n"]).astype(dtype)}

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        return 2.0 * inputs["x"].astype(np.float64)

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (params["n"],)

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        b = params["n"] * np.dtype(dtype).itemsize
        return {v: VariantLedger(v, (KernelTraffic("double", b, b, params["n"]),)) for v in self.variants}

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        return 1e-6 if dtype == "float32" else 1e-3


def _entry(behaviour: str) -> Any:
    def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Any:
        x = inputs["x"]

        def launch() -> None:
            if behaviour == "raises":
                raise RuntimeError("kernel launch failed on purpose")
            if behaviour == "crash":
                os._exit(3)
            if behaviour == "slow":
                time.sleep(30)
            np.multiply(x, 2, out=out)
            if behaviour == "wrong":
                out[0] += 1.0
            if behaviour == "partial":
                out[-1] = np.nan

        return launch

    return entry


if "fake_double" not in SCENARIOS:
    register(Doubling)
if "fake" not in BACKENDS:
    register_backend(Fake(FakeTarget()))
for _b in BEHAVIOURS:
    if REGISTRY.get(KernelKey("fake_double", "fake", _b, "cpu")) is None:
        kernel(scenario="fake_double", backend="fake", variant=_b, device="cpu")(_entry(_b))
