"""`plugged`: a third-party backend as a user would write one, loaded only through the entry-point group.

It declares one CPU target (host NumPy arrays), one option of its own (`chunk`: elements per pass of the fused
kernel) and the elementwise chain's fused and unfused kernels in NumPy. Nothing in `suite/` knows its name:
tests/test_plugin_backend.py installs it by writing an `entry_points.txt` into a dist-info folder on the path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scenarios.elementwise_chain import OPS
from suite.core.backend import Backend, Option, register_backend
from suite.core.registry import Launch, kernel
from suite.core.targets import NATIVE, Availability, Target


class HostTarget(Target):
    backend, device = "plugged", "cpu"

    def probe(self) -> Availability:
        return Availability(NATIVE, "plugged NumPy kernels on the host")


class Plugged(Backend):
    name = "plugged"
    options = (Option("chunk", "elements the fused kernel processes per pass", 4096, low=1, high=2**20),)


register_backend(Plugged(HostTarget()))


def _apply(ops: list[str], v: np.ndarray) -> np.ndarray:
    for op in ops:
        v = OPS[op](v).astype(np.float32)
    return v


@kernel(scenario="elementwise_chain", backend="plugged", variant=("fused", "unfused"), device="cpu")
def chain(inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict, *, variant: str) -> Launch:
    """`fused`: the whole chain per chunk of `chunk` elements in float32, stored once in the chain's dtype;
    `unfused`: one pass per op over the whole array, each intermediate stored in the chain's dtype."""
    x, ops = inputs["x"], params["ops"]
    passes, chunk = ([ops], int(opts["chunk"])) if variant == "fused" else ([[op] for op in ops], x.size)
    buffers = [x, *(np.empty_like(out) for _ in passes[:-1]), out]
    steps = list(zip(passes, buffers, buffers[1:], strict=False))

    def launch() -> None:
        for step, src, dst in steps:
            for start in range(0, x.size, chunk):
                dst[start : start + chunk] = _apply(step, src[start : start + chunk].astype(np.float32))

    return Launch(launch, notes={"passes": len(steps)})
