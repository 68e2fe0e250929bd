"""A scenario family from outside the tree: out = a·x + b, two kernels (scale, then shift) against one.

It is everything a third party writes to add a family and a backend for it: a `Scenario` with its structured
config, a report section of its own, the experiment that sets its size from a model (so that it joins the model
tour), and NumPy kernels of a `toy` backend on the host. Nothing under `suite/` names it; tests/test_toy_family.py
imports it here and the worker imports it through `plugins=[tests.toy_family]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from hydra.core.config_store import ConfigStore

from suite.core.backend import Backend, register_backend
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger
from suite.core.registry import kernel
from suite.core.scenario import Params, Scenario, register
from suite.core.targets import NATIVE, Availability, Target

NAME = "toy_axpb"
A, B = 1.5, -0.25
"""out = A·x + B; both exact in binary, so float32 rounding is the only error."""
SECTION = "### Toy family: a·x + b"


@dataclass
class ToyConfig:
    name: str = NAME
    n: Any = None


class AxPlusB(Scenario):
    name = NAME
    inputs = ("x",)
    axes = ("n",)
    size_axis = "n"
    dtypes = ("float32",)
    presets = {"S": {"n": [4096, 65536]}, "M": {"n": [2**20]}, "L": {"n": [2**24]}}
    config = ToyConfig
    model_tour = f"model_{NAME}"

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        return {"x": (params["n"],)}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"x": rng.uniform(-1.0, 1.0, params["n"]).astype(dtype)}

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        return A * inputs["x"].astype(np.float64) + B

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (params["n"],)

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """Unfused: scale reads x and writes t, shift reads t and writes out. Fused: x in, out out; t removed."""
        n = params["n"]
        b = n * np.dtype(dtype).itemsize
        unfused = (KernelTraffic("scale", b, b, n), KernelTraffic("shift", b, b, n))
        fused = (KernelTraffic("scale+shift", b, b, 2 * n),)
        removed = (Intermediate("t", n, np.dtype(dtype).itemsize),)
        return {"unfused": VariantLedger("unfused", unfused), "fused": VariantLedger("fused", fused, removed)}

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Where a·x ≈ −b the float32 rounding of a·x is all that is left: against the metric's floor (1e-3 of
        the largest |out|) that is about 1e-5."""
        return 1e-4

    def report_sections(self, rows: pd.DataFrame) -> list[str]:
        ok = rows[rows["status"] == "ok"]
        return [f"{SECTION}\n\n{len(ok)} of {len(rows)} rows ok; unfused stores t = {A}·x, then adds {B}."]


class ToyTarget(Target):
    backend, device = "toy", "cpu"

    def probe(self) -> Availability:
        return Availability(NATIVE, "host NumPy")


class Toy(Backend):
    name = "toy"


def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Any:
    x = inputs["x"]
    t = np.empty_like(x)

    def launch() -> None:
        np.multiply(x, A, out=t)
        np.add(t, B, out=out)

    return launch


def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Any:
    x = inputs["x"]

    def launch() -> None:  # one kernel in spirit: no intermediate array, out is updated where it lies
        np.multiply(x, A, out=out)
        np.add(out, B, out=out)

    return launch


register(AxPlusB)
ConfigStore.instance().store(group="experiment", name=f"model_{NAME}", package="_global_", node={
    "defaults": [{"override /scenario": NAME}],
    "scenario": {"n": ["${fusebench_mul:${tokens},${model.hidden_size}}"]},
    "layer": "a·x + b over tokens × hidden", "dtype": ["float32"],
})  # fmt: skip
register_backend(Toy(ToyTarget()))
kernel(scenario=NAME, backend="toy", variant="unfused", device="cpu")(unfused)
kernel(scenario=NAME, backend="toy", variant="fused", device="cpu")(fused)
