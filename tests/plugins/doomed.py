"""`doomed`: NumPy kernels of the elementwise chain whose fused kernel, once, kills the job running it.

For the sweep tests: with FUSEBENCH_DOOM naming a file that exists and FUSEBENCH_DOOM_N a chain length, the fused
kernel of that case removes the file and kills its worker's parent (the launcher's job process) with SIGKILL, as a
node lost or an out-of-memory kill would; the rerun of the sweep then finds the file gone and completes.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import numpy as np

from scenarios.elementwise_chain import OPS
from suite.core.backend import Backend, register_backend
from suite.core.registry import Launcher, kernel
from suite.core.targets import NATIVE, Availability, Target


class HostTarget(Target):
    backend, device = "doomed", "cpu"

    def probe(self) -> Availability:
        return Availability(NATIVE, "doomed NumPy kernels on the host")


class Doomed(Backend):
    name = "doomed"


register_backend(Doomed(HostTarget()))


def _apply(ops: list[str], v: np.ndarray) -> np.ndarray:
    for op in ops:
        v = OPS[op](v).astype(np.float32)
    return v


def _doom(params: dict) -> None:
    trigger = os.environ.get("FUSEBENCH_DOOM")
    if trigger and Path(trigger).exists() and params["n"] == int(os.environ.get("FUSEBENCH_DOOM_N", "-1")):
        Path(trigger).unlink()
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(1)


@kernel(scenario="elementwise_chain", backend="doomed", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> Launcher:
    x = inputs["x"]
    _doom(params)

    def launch() -> None:
        out[...] = _apply(params["ops"], x.astype(np.float32))

    return launch


@kernel(scenario="elementwise_chain", backend="doomed", variant="unfused", device="cpu")
def unfused(inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> Launcher:
    x, ops = inputs["x"], params["ops"]

    def launch() -> None:
        v = x
        for op in ops:
            v = _apply([op], v.astype(np.float32))
        out[...] = v

    return launch
