"""A plug-in family with a backward pass, for the runner's tests of phases: y = x²·w over vectors of n.

Its gradients are dx = 2·x·w·dy and dw = x²·dy. Unfused, the forward keeps its intermediate t = x² and the
backward reads it (dw = t·dy) beside x (dx = 2·x·w·dy); fused, the forward keeps only x and w, and the backward
recomputes x². Variant `wrong` writes dw off by a factor, so a test sees one output fail by name. Backend `toy`
(host NumPy, tests/toy_family.py) runs it; the worker imports it with `plugins=[tests.toy_training]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from suite.core.ledger import KernelTraffic, VariantLedger
from suite.core.phases import Backward
from suite.core.scenario import Params, Scenario, register
from suite.kit.training import Pass, training
from tests import toy_family  # noqa: F401  registers backend `toy`

NAME = "toy_square"


@dataclass
class SquareConfig:
    name: str = NAME
    n: Any = None


class SquareBackward(Backward):
    grads = ("dx", "dw")

    def reference(self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        x, w, dy = (inputs[k].astype(np.float64) for k in ("x", "w", "dy"))
        return {"dx": 2 * x * w * dy, "dw": x * x * dy}

    def tolerance(self, scn: Scenario, inputs: dict, params: Params, dtype: str, ref: dict) -> dict[str, float]:
        return dict.fromkeys(ref, 1e-5)

    def saved(self, scn: Scenario, params: Params, dtype: str) -> dict[str, dict[str, int]]:
        b = params["n"] * np.dtype(dtype).itemsize
        return {"unfused": {"x": b, "w": b, "t": b}, "fused": {"x": b, "w": b}, "wrong": {"x": b, "w": b}}

    def backward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        n, b = params["n"], params["n"] * np.dtype(dtype).itemsize
        unfused = (KernelTraffic("dw = t·dy", 2 * b, b, n), KernelTraffic("dx = 2·x·w·dy", 3 * b, b, 3 * n))
        fused = (KernelTraffic("dx, dw from x", 3 * b, 2 * b, 5 * n),)
        return {"unfused": VariantLedger("unfused", unfused), "fused": VariantLedger("fused", fused)}


class Square(Scenario):
    name = NAME
    inputs = ("x", "w")
    variants = ("fused", "unfused", "wrong")
    axes = ("n",)
    size_axis = "n"
    dtypes = ("float32",)
    presets = {"S": {"n": [1001]}, "M": {"n": [1 << 16]}, "L": {"n": [1 << 20]}}
    config = SquareConfig
    training = SquareBackward()

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        return {"x": (params["n"],), "w": (params["n"],)}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {name: rng.uniform(0.5, 1.5, params["n"]).astype(dtype) for name in self.inputs}

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        return inputs["x"].astype(np.float64) ** 2 * inputs["w"].astype(np.float64)

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (params["n"],)

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        n, b = params["n"], params["n"] * np.dtype(dtype).itemsize
        unfused = (KernelTraffic("t = x²", b, b, n), KernelTraffic("y = t·w", 2 * b, b, n))
        return {"unfused": VariantLedger("unfused", unfused), "fused": VariantLedger("fused", (unfused[1],))}

    def tolerance(self, inputs: dict, params: Params, dtype: str, ref: np.ndarray) -> float:
        return 1e-5


def _unfused_forward(inputs: dict, y: Any, params: dict, opts: dict) -> Pass:
    x, w = inputs["x"], inputs["w"]
    t = np.empty_like(x)

    def run() -> None:
        np.multiply(x, x, out=t)
        np.multiply(t, w, out=y)

    return Pass(run, saved={"x": x, "w": w, "t": t})


def _unfused_backward(inputs: dict, saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    x, w, t, dy = saved["x"], saved["w"], saved["t"], inputs["dy"]

    def run() -> None:
        np.multiply(t, dy, out=grads["dw"])
        np.multiply(w, dy, out=grads["dx"])
        np.multiply(grads["dx"], 2 * x, out=grads["dx"])

    return Pass(run)


def _fused_forward(inputs: dict, y: Any, params: dict, opts: dict) -> Pass:
    x, w = inputs["x"], inputs["w"]

    def run() -> None:
        np.multiply(x, x, out=y)
        np.multiply(y, w, out=y)

    return Pass(run, saved={"x": x, "w": w})


def _fused_backward(inputs: dict, saved: dict, grads: dict, params: dict, opts: dict, scale: float = 1.0) -> Pass:
    x, w, dy = saved["x"], saved["w"], inputs["dy"]

    def run() -> None:
        dw, dx = grads["dw"], grads["dx"]
        np.multiply(x, x, out=dw)
        np.multiply(dw, dy * np.float32(scale), out=dw)
        np.multiply(x, w, out=dx)
        np.multiply(dx, 2 * dy, out=dx)

    return Pass(run)


def _wrong_backward(inputs: dict, saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    return _fused_backward(inputs, saved, grads, params, opts, scale=1.01)


register(Square)
training(
    NAME,
    backend="toy",
    device="cpu",
    unfused=(_unfused_forward, _unfused_backward),
    fused=(_fused_forward, _fused_backward),
    wrong=(_fused_forward, _wrong_backward),
)
