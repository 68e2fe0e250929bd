"""The elementwise chain's backward and train phases on the host CPU with Numba: fused against unfused.

fused: the forward is the forward's one kernel (x read once, y written once) and keeps only x; the backward is
one kernel that reads x and dy, recomputes the chain in float32 and applies each op's derivative last op first,
writing dx once (`elementwise_chain_backward_kernels.grad_kernel`).
unfused: the forward is one kernel per op and keeps what it writes — x and every intermediate v_1 … v_(k-1), in
the chain's dtype; the backward is one kernel per op, last op first, each reading its op's saved input and the
running gradient (dy first) and writing the next gradient in the chain's dtype, dx last. The gradients between
kernels alternate between two buffers, so at most two of them exist, as the ledger's peak counts.

Both run the same op code as the forward module (halves as their uint16 bits, float32 compute, math mode
`backend_options.numba.math`), and every kernel is compiled for its exact arrays while the pass is prepared.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from backends.numba import BACKEND
from backends.numba.on_cpu.arrays import storage
from backends.numba.on_cpu.elementwise_chain import _compiled, _dtype, stages
from backends.numba.on_cpu.elementwise_chain_backward_kernels import compiled_grad
from suite.kit.training import Pass, training


def _setup(inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> tuple[str, str, tuple[str, ...]]:
    """(dtype, math mode, ops) of a pass writing `out`; x, dy and out must share the chain's dtype."""
    dtype = _dtype(inputs, out)
    if "dy" in inputs and inputs["dy"].dtype != out.dtype:
        raise ValueError(f"numba/cpu elementwise_chain: dy {inputs['dy'].dtype} -> {out.dtype}; they must match")
    return dtype, BACKEND.option(opts, "math"), tuple(params["ops"])


def fused_forward(inputs: dict[str, Any], y: np.ndarray, params: dict, opts: dict) -> Pass:
    """The fused forward; it keeps x alone, the backward recomputes the rest."""
    dtype, math, ops = _setup(inputs, y, params, opts)
    x, out = storage(inputs["x"]), storage(y)
    dispatcher, scratch = _compiled(ops, x, out, dtype, math)

    def run() -> None:
        dispatcher(x, out, scratch)

    return Pass(run, saved={"x": inputs["x"]}, notes={"math": math, "stages": len(stages(ops))})


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel: reads x and dy, recomputes the chain and writes dx."""
    dtype, math, ops = _setup({**inputs, "x": saved["x"]}, grads["dx"], params, opts)
    x, dy, dx = storage(saved["x"]), storage(inputs["dy"]), storage(grads["dx"])
    dispatcher, scratch = compiled_grad(ops, x, dy, dx, dtype, math)

    def run() -> None:
        dispatcher(x, dy, dx, scratch)

    return Pass(run, notes={"math": math, "stages": len(stages(ops))})


def unfused_forward(inputs: dict[str, Any], y: np.ndarray, params: dict, opts: dict) -> Pass:
    """One kernel per op; x and the intermediates t1 … t(k-1) it writes are kept for the backward."""
    dtype, math, ops = _setup(inputs, y, params, opts)
    kept = {"x": inputs["x"], **{f"t{i}": np.empty_like(y) for i in range(1, len(ops))}}
    buffers = [storage(a) for a in (*kept.values(), y)]
    pairs = zip(ops, itertools.pairwise(buffers), strict=True)
    steps = [(*_compiled((op,), src, dst, dtype, math), src, dst) for op, (src, dst) in pairs]

    def run() -> None:
        for op_kernel, scratch, src, dst in steps:
            op_kernel(src, dst, scratch)

    return Pass(run, saved=kept, notes={"math": math})


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel per op, last first: op i reads its saved input and the gradient of its output, writes the
    gradient of its input (into one of two alternating buffers, dx for the first op)."""
    dtype, math, ops = _setup({**inputs, "x": saved["x"]}, grads["dx"], params, opts)
    dx = storage(grads["dx"])
    between = [np.empty_like(dx) for _ in range(min(2, len(ops) - 1))]
    vs = [storage(saved["x"]), *(storage(saved[f"t{i}"]) for i in range(1, len(ops)))]
    steps, g = [], storage(inputs["dy"])
    for i in reversed(range(len(ops))):
        out = dx if i == 0 else between[(len(ops) - 1 - i) % 2]
        steps.append((*compiled_grad((ops[i],), vs[i], g, out, dtype, math), vs[i], g, out))
        g = out

    def run() -> None:
        for op_kernel, scratch, v, g_in, g_out in steps:
            op_kernel(v, g_in, g_out, scratch)

    return Pass(run, notes={"math": math})


training(
    "elementwise_chain",
    backend="numba",
    device="cpu",
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
