"""The elementwise chain's backward and train phases on CUDA with Numba: fused (recompute) against unfused (save).

fused: the forward is the forward module's kernel for the whole chain and keeps x alone; the backward is one
kernel generated for the chain: per element it loads x and dy, recomputes v_1 … v_(k-1) in float32 (one local
per op) and applies each op's derivative, last op first, storing dx once.
unfused: the forward is the forward module's one-op kernels, each writing its own intermediate, all of them kept
(x, t1 … t(k-1)); the backward is the same generator's kernel for a one-op chain, launched once per op, last op
first, each reading that op's saved input and the running gradient (dy first) and writing the next gradient in
the chain's dtype, dx last. Two buffers alternate for the gradients between kernels, as the ledger's peak counts.

The kernel's source is written out per chain, as the CPU backward's is (`backends.numba.on_cpu.
elementwise_chain_backward_kernels`), with the ops of `backends.numba.ops` and the CPU's derivatives (libm math:
libdevice's tanh and exp here) as globals f0 … and d0 …, so both targets run the same op and derivative code. A
chain whose derivatives are all constants (scale, shift) does not load x, and such an op's unfused kernel reads
the gradient only, as the ledger counts. Threads walk the array with the forward's grid-stride loop and launch
shape (`suite.kit.launch_shape.elementwise_launch`); each kernel is compiled (on a GPU) and recorded for the
resource report while the pass is prepared.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cpu.elementwise_chain_backward_kernels import derivatives
from backends.numba.on_cuda.elementwise_chain import DTYPES
from backends.numba.on_cuda.elementwise_chain import _launcher as forward_launcher
from backends.numba.on_cuda.launch import device
from backends.numba.op_tables import op_table
from backends.numba.ops import ZERO
from backends.numba.record import record_numba
from scenarios.elementwise_chain.backward import CONSTANT, USES_OUTPUT
from suite.kit.launch_shape import block_chosen_by, elementwise_launch, launch_notes
from suite.kit.training import Pass, training

try:
    from numba import cuda  # a global of the generated kernels too, which the simulator swaps for its fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

MATH = "libm"
"""The op table the CUDA kernels use: libm's functions, which Numba CUDA lowers to libdevice."""


def _lines(ops: tuple[str, ...]) -> list[str]:
    """The kernel of `ops`: per element, x and v_1 … v_(k-1) in float32, then the gradient through each op, last
    first (the last op's output only where its derivative is written with it); constant derivatives read no x."""
    k, reads_x = len(ops), any(op not in CONSTANT for op in ops)
    body = ["v0 = np.float32(x[i])"] if reads_x else []
    if reads_x:
        body += [f"v{i} = f{i - 1}(v{i - 1})" for i in range(1, k)]
    body.append("g = np.float32(dy[i])")
    for i in reversed(range(k)):
        v = f"v{i}" if reads_x else "ZERO"
        w = f"v{i + 1}" if i + 1 < k else f"f{i}(v{i})" if ops[i] in USES_OUTPUT else "ZERO"
        body.append(f"g = d{i}({v}, {w if reads_x else 'ZERO'}, g)")
    body += ["dx[i] = g", "i += stride"]
    return [
        "def chain_grad(x, dy, dx):",
        "    i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x  # cuda.grid(1) is 32-bit",
        "    stride = np.int64(cuda.gridDim.x) * cuda.blockDim.x",
        "    while i < dx.size:",
        *(" " * 8 + line for line in body),
    ]


@functools.cache
def grad_source(ops: tuple[str, ...]) -> Callable[..., None]:
    """The backward of `ops` as a Python function (what `cuda.jit` and `cuda.compile_ptx` take)."""
    table, derivative = op_table(MATH), derivatives(MATH)
    scope: dict[str, Any] = {"cuda": cuda, "np": np, "ZERO": ZERO}
    scope |= {f"f{i}": table[op] for i, op in enumerate(ops)} | {f"d{i}": derivative[op] for i, op in enumerate(ops)}
    exec(compile("\n".join(_lines(ops)), f"<cuda backward of {'+'.join(ops)}>", "exec"), scope)
    return scope["chain_grad"]


@functools.cache
def _grad_kernel(ops: tuple[str, ...]) -> Any:
    """One dispatcher per chain; it specialises per dtype on first compile."""
    return cuda.jit(grad_source(ops))


def _grad_launcher(steps: list[tuple[Any, Any, Any, tuple[str, ...]]], opts: dict) -> Pass:
    """Compile (on a GPU) and record every (v, g, out, ops) step's kernel now; the pass only launches them."""
    option, stream, gpu = BACKEND.option(opts, "block"), stream_arg(opts.get("stream")), device()
    block, grid = elementwise_launch(steps[0][2].size, option, gpu)
    launches = []
    for v, g, out, ops in steps:
        dispatcher = _grad_kernel(ops)
        compiled = None
        if not simulating():
            compiled = dispatcher.compile(tuple(numba.typeof(a) for a in (v, g, out)))
        array = f"{out.dtype}[::1]"
        name = "d(" + "+".join(ops) + ")"
        record_numba((__name__, "grad_source", (ops,)), (array,) * 3, block, name=name, compiled=compiled)
        launches.append((dispatcher, (v, g, out)))

    def run() -> None:
        # configured at each launch, as in the forward: a dispatcher is shared by every entry built from it
        for dispatcher, args in launches:
            dispatcher[grid, block, stream](*args)

    where = {"sms": gpu.sms, "sms_from": gpu.source}
    return Pass(run, notes=launch_notes({"block": block}, grid, block_chosen_by(option), **where))


def _check(inputs: dict[str, Any], x: Any, out: Any) -> None:
    if str(out.dtype) not in DTYPES or x.dtype != out.dtype or ("dy" in inputs and inputs["dy"].dtype != out.dtype):
        raise ValueError(
            f"numba/cuda elementwise_chain: x {x.dtype}, dy and out {out.dtype} must share one of {DTYPES}"
        )


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """The fused forward; it keeps x alone, the backward recomputes the rest."""
    _check({}, inputs["x"], y)
    option, stream = BACKEND.option(opts, "block"), stream_arg(opts.get("stream"))
    launch = forward_launcher(tuple(params["ops"]), inputs["x"], y, option, stream)
    return Pass(launch.run, saved={"x": inputs["x"]}, notes=launch.notes)


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel: reads x (unless every derivative is a constant) and dy, recomputes the chain, writes dx."""
    _check(inputs, saved["x"], grads["dx"])
    return _grad_launcher([(saved["x"], inputs["dy"], grads["dx"], tuple(params["ops"]))], opts)


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """One kernel per op; x and the intermediates t1 … t(k-1) they write are kept for the backward."""
    _check({}, inputs["x"], y)
    ops, option, stream = tuple(params["ops"]), BACKEND.option(opts, "block"), stream_arg(opts.get("stream"))
    kept = {"x": inputs["x"], **{f"t{i}": cuda.device_array_like(y) for i in range(1, len(ops))}}
    buffers = [*kept.values(), y]
    steps = [forward_launcher((op,), buffers[i], buffers[i + 1], option, stream) for i, op in enumerate(ops)]

    def run() -> None:
        for step in steps:
            step()

    return Pass(run, saved=kept, notes={"launch": {**steps[0].notes["launch"], "kernels": len(steps)}})


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel per op, last first: op i reads its saved input and the gradient of its output, writes the
    gradient of its input (into one of two alternating buffers, dx for the first op)."""
    dx, ops = grads["dx"], tuple(params["ops"])
    _check(inputs, saved["x"], dx)
    between = [cuda.device_array_like(dx) for _ in range(min(2, len(ops) - 1))]
    vs = [saved["x"], *(saved[f"t{i}"] for i in range(1, len(ops)))]
    steps, g = [], inputs["dy"]
    for i in reversed(range(len(ops))):
        out = dx if i == 0 else between[(len(ops) - 1 - i) % 2]
        steps.append((vs[i], g, out, (ops[i],)))
        g = out
    return _grad_launcher(steps, opts)


training(
    "elementwise_chain",
    backend="numba",
    device="cuda",
    like=lambda a: cuda.device_array_like(a),
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
