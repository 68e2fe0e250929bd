"""The elementwise chain's backward and train phases in Triton: fused (recompute) against unfused (save).

fused: the forward is the forward module's one kernel and keeps x alone; the backward is one kernel,
`_grad_kernel` specialised for the whole chain, that reads x and dy, recomputes v_1 … v_(k-1) in float32
registers and applies each op's derivative last op first, writing dx once.
unfused: the forward is the forward module's one kernel per op, each writing its own intermediate, all of them
kept (x, t1 … t(k-1)); the backward is `_grad_kernel` once per op with a one-op chain, last op first, each reading
that op's saved input and the running gradient (dy first) and writing the next gradient in the chain's dtype, dx
last. The gradients between kernels alternate between two buffers, so at most two exist, as the ledger's peak
counts.

A Triton kernel cannot keep a Python list of tensors, so the recomputed values travel as a Triton tuple grown
one value per op while `tl.static_range` unrolls the chain; the derivatives then index it with compile-time
indices, and what no derivative reads (the last op's output, unless tanh's or sigmoid's derivative is written
with it) is dead code the compiler drops. A chain whose derivatives are all constants (scale, shift) does not
load x at all (`READS_X`), and such an op's unfused kernel reads the gradient only, as the ledger counts.

Block size and warps come from n (`backends.triton.launch.chain_config`), as in the forward; every backward
kernel is compiled at preparation (warmup) and recorded for the resource report.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.elementwise_chain import _launcher as forward_launcher
from backends.triton.launch import chain_config, device
from backends.triton.ops import GELU, RELU, SCALE, SHIFT, SIGMOID, SILU, SQUARE, TANH, apply_op, codes, sigmoid
from backends.triton.record import record_triton
from scenarios.elementwise_chain.backward import CONSTANT
from suite.kit.launch import cdiv
from suite.kit.launch_shape import chosen_by, launch_notes
from suite.kit.training import Pass, training


@triton.jit
def derivative(v, w, g, OP: tl.constexpr):
    """The gradient of op OP's input from its input v, its output w and the gradient g of w (float32); as the
    scenario's `BACKWARD` table, branch resolved at compile time."""
    if OP == SCALE:
        g = g * 1.25
    elif OP == SHIFT:
        g = g
    elif OP == RELU:
        g = tl.where(v <= 0.0, 0.0, g)  # torch's threshold_backward: 0 at the kink, NaN passes
    elif OP == SQUARE:
        g = g * (v + v)
    elif OP == TANH:
        g = g * (1.0 - w * w)
    elif OP == SIGMOID:
        g = g * (w * (1.0 - w))
    elif OP == SILU:
        s = sigmoid(v)
        g = g * (s * (1.0 + v * (1.0 - s)))
    elif OP == GELU:
        # v·σ(2u), u = C·(v + A·v³): σ(2u) + 2v·σ(1−σ)·C·(1 + 3A·v²), no cancellation of 1 + tanh u;
        # literals, as the forward's gelu writes them (2C = 1.5957691216 exactly doubles C in float32, 3A)
        s = sigmoid(1.5957691216 * (v + 0.044715 * v * v * v))
        g = g * (s + (v + v) * (s * (1.0 - s)) * (0.7978845608 * (1.0 + 0.134145 * v * v)))
    return g


@triton.jit
def grad_chain(v, g, CHAIN: tl.constexpr):
    """The gradient of the chain's input: v_1 … v_k recomputed from v = x into a tuple, then each op's
    derivative, last op first."""
    vs = (v,)
    for i in tl.static_range(len(CHAIN)):
        v = apply_op(v, CHAIN[i])
        vs = vs + (v,)  # noqa: RUF005 (a Triton tuple concatenates; it does not unpack)
    for j in tl.static_range(len(CHAIN)):
        g = derivative(vs[len(CHAIN) - 1 - j], vs[len(CHAIN) - j], g, CHAIN[len(CHAIN) - 1 - j])
    return g


@triton.jit
def _grad_kernel(x_ptr, dy_ptr, dx_ptr, n, CHAIN: tl.constexpr, READS_X: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(dy_ptr + offs, mask=mask).to(tl.float32)
    if READS_X:  # noqa: SIM108 (a constexpr branch: the load is not emitted at all)
        v = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    else:  # every derivative is a constant: x is not read
        v = tl.zeros([BLOCK], dtype=tl.float32)
    g = grad_chain(v, g, CHAIN)
    tl.store(dx_ptr + offs, g.to(dx_ptr.dtype.element_ty), mask=mask)


def _reads_x(ops: tuple[str, ...]) -> bool:
    return any(op not in CONSTANT for op in ops)


def _grad_launcher(steps: list[tuple[Any, Any, Any, tuple[str, ...]]], n: int, opts: dict) -> Pass:
    """Compile and record every (v, g, out, ops) step now; the pass only launches them, in order."""
    config = chain_config(n, opts, device().sms)
    block, num_warps = config["block"], config["num_warps"]
    grid = (cdiv(n, block),)
    context: Callable[[], contextlib.AbstractContextManager] = BACKEND.launch_stream(opts.get("stream"))
    launches = []
    for v, g, out, ops in steps:
        constexprs = {"CHAIN": codes(ops), "READS_X": _reads_x(ops), "BLOCK": block}
        compiled = _grad_kernel.warmup(v, g, out, n, **constexprs, num_warps=num_warps, grid=grid)
        name = "d(" + "+".join(ops) + ")"
        record_triton(_grad_kernel, (v, g, out, n), constexprs, num_warps, compiled=compiled, name=name)
        launches.append(((v, g, out, n), constexprs))

    def run() -> None:
        with context():
            for args, constexprs in launches:
                _grad_kernel[grid](*args, **constexprs, num_warps=num_warps)

    return Pass(run, notes=launch_notes(config, grid, chosen_by(opts, ("block", "num_warps"))))


def _check(inputs: dict[str, Any], x: Any, out: Any) -> None:
    if x.dtype != out.dtype or ("dy" in inputs and inputs["dy"].dtype != out.dtype):
        raise ValueError(f"triton elementwise_chain: x {x.dtype}, dy and out {out.dtype} must share one dtype")


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """The fused forward; it keeps x alone, the backward recomputes the rest."""
    _check({}, inputs["x"], y)
    launch = forward_launcher([(inputs["x"], y, codes(params["ops"]))], params["n"], opts)
    return Pass(launch.run, saved={"x": inputs["x"]}, notes=launch.notes)


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel: reads x (unless every derivative is a constant) and dy, recomputes the chain, writes dx."""
    _check(inputs, saved["x"], grads["dx"])
    return _grad_launcher([(saved["x"], inputs["dy"], grads["dx"], tuple(params["ops"]))], params["n"], opts)


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """One kernel per op; x and the intermediates t1 … t(k-1) they write are kept for the backward."""
    _check({}, inputs["x"], y)
    ops = params["ops"]
    kept = {"x": inputs["x"], **{f"t{i}": y.new_empty(y.shape) for i in range(1, len(ops))}}
    buffers = [*kept.values(), y]
    steps = [(buffers[i], buffers[i + 1], codes([op])) for i, op in enumerate(ops)]
    launch = forward_launcher(steps, params["n"], opts)
    return Pass(launch.run, saved=kept, notes=launch.notes)


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel per op, last first: op i reads its saved input and the gradient of its output, writes the
    gradient of its input (into one of two alternating buffers, dx for the first op)."""
    dx, ops = grads["dx"], tuple(params["ops"])
    _check(inputs, saved["x"], dx)
    between = [dx.new_empty(dx.shape) for _ in range(min(2, len(ops) - 1))]
    vs = [saved["x"], *(saved[f"t{i}"] for i in range(1, len(ops)))]
    steps, g = [], inputs["dy"]
    for i in reversed(range(len(ops))):
        out = dx if i == 0 else between[(len(ops) - 1 - i) % 2]
        steps.append((vs[i], g, out, (ops[i],)))
        g = out
    return _grad_launcher(steps, params["n"], opts)


training(
    "elementwise_chain",
    backend="triton",
    device="cuda",
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
