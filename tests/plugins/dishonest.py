"""`dishonest`: kernels of y = 2·x that each cheat in one way a kernel leaderboard was once won by, and one that
declares a dtype it has no kernel for. tests/test_honest_kernels.py runs them through the suite, which must catch
every cheat in the row: nothing in `suite/` knows these kernels.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from suite.core.backend import BACKENDS, Backend, register_backend
from suite.core.ledger import KernelTraffic, VariantLedger
from suite.core.registry import REGISTRY, KernelKey, Launcher, Unsupported, kernel
from suite.core.scenario import SCENARIOS, Params, Scenario, register
from suite.core.targets import NATIVE, Availability, Target

NAME = "honesty_double"
CHEATS = ("honest", "writes_input", "replays", "patches_timer", "returns_time", "hot_only", "no_half")
SLEEP_S = 0.002
"""What `returns_time` and a cold `hot_only` call spend."""


class HostTarget(Target):
    backend, device = "dishonest", "cpu"

    def probe(self) -> Availability:
        return Availability(NATIVE, "host NumPy")


class Dishonest(Backend):
    name = "dishonest"


class Doubling(Scenario):
    """y = 2·x; each variant is one kernel's way of cheating."""

    name = NAME
    inputs = ("x",)
    variants = CHEATS
    baseline = "honest"
    pairs = ()
    rivals = ()
    axes = ("n",)
    size_axis = "n"
    presets = {"S": {"n": [1000]}, "M": {"n": [1000]}, "L": {"n": [1000]}}

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        return {"x": (params["n"],)}

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


_KEPT: dict[tuple[int, ...], np.ndarray] = {}
_LAST: list[int] = [0]


def _entry(cheat: str) -> Any:
    def entry(inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> Launcher:
        x = inputs["x"]
        if cheat == "no_half" and x.dtype == np.float16:
            raise Unsupported("float16: this kernel has no half-precision path")

        def launch() -> Any:
            if cheat == "replays" and x.shape in _KEPT:  # the result of the first inputs of this shape, replayed
                out[...] = _KEPT[x.shape]
                return None
            if cheat == "hot_only":  # fast only on the buffers it ran on last
                if _LAST[0] != id(x):
                    time.sleep(SLEEP_S)
                _LAST[0] = id(x)
            np.multiply(x, 2, out=out)
            if cheat == "replays":
                _KEPT[x.shape] = out.copy()
            if cheat == "writes_input":
                x[0] = 0.0
            if cheat == "patches_timer":
                time.perf_counter_ns = lambda: 0
            if cheat == "returns_time":
                time.sleep(SLEEP_S)
                return 0.0
            return None

        return launch

    return entry


if NAME not in SCENARIOS:
    register(Doubling)
if "dishonest" not in BACKENDS:
    register_backend(Dishonest(HostTarget()))
for _cheat in CHEATS:
    if REGISTRY.get(KernelKey(NAME, "dishonest", _cheat, "cpu")) is None:
        kernel(scenario=NAME, backend="dishonest", variant=_cheat, device="cpu")(_entry(_cheat))
