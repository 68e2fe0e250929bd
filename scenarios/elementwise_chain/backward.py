"""The elementwise chain's backward pass: dx = dy · op_1'(x) · op_2'(v_1) ⋯ op_k'(v_(k-1)), v_i = op_i(v_(i-1)).

What fusion means here is the choice between saving and recomputing. Unfused, the forward keeps every value the
backward needs — x and each intermediate v_1 … v_(k-1), the input of an op, which its forward kernels already
write — and the backward is one kernel per op, last op first, each reading its op's saved input and the running
gradient and writing the next gradient (dy → g_(k-1) → … → dx), k-1 gradient intermediates in memory. Fused, the
forward saves only x; one backward kernel reads x and dy once, recomputes the chain in float32 (in registers,
or a cache-resident strip for a chain of several transcendental ops) and applies each op's derivative in
reverse, writing dx once. Per intermediate removed the backward reads n·s bytes
less (its saved copy) and writes and reads n·s less (its gradient); the forward's write of it is priced in the
forward's ledger. So the seed's ΔQ becomes 3·n·s per intermediate in a training step, and the memory held from
forward to backward drops from k·n·s to n·s.

What each variant keeps for the backward (`saved`; n elements of s bytes):
- fused: x (n·s).
- unfused: x and v_1 … v_(k-1) (k·n·s): every op's input, as its forward wrote them, though the backward of
  scale and shift (a constant derivative) never reads theirs.
- eager: what torch autograd keeps for the chain as `backends.torch.elementwise_chain_training` writes it: scale
  and shift nothing, relu, tanh and sigmoid their output, square, silu and gelu their input — each tensor once,
  so x counts where the first op keeps its input and y where the last keeps its output.
- compiled: what AOTAutograd's min-cut partitioner keeps (`compiled_saved`): y where the last op is tanh or
  sigmoid, and x, from which the backward recomputes the chain — or relu's mask (n bytes of bool), where relu's
  are the other ops whose derivative is not a constant. A mask is a write the forward adds (`forward_ledger`).

Where a derivative is undefined, the backward does what torch does: relu's at 0 is 0 (threshold_backward keeps
the gradient only where the output is > 0, so a NaN input passes it through).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from scenarios.elementwise_chain.ops import FLOPS, GELU_A, GELU_C, OPS
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.numerics import rel_err
from suite.core.phases import Backward
from suite.core.tolerances import per_dtype

BACKWARD_CEILING = per_dtype(0.05, 0.5)
"""The most a chain's gradient may be off: a product of up to 16 derivatives each rounded to half precision
reaches 0.3–0.5 near their zero crossings; an error of order 1 is a derivative lost, not rounding."""

if TYPE_CHECKING:
    from suite.core.scenario import Params, Scenario


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def _relu(v: np.ndarray, w: np.ndarray, g: np.ndarray) -> np.ndarray:
    return np.where(v <= 0, np.zeros_like(g), g)  # torch's threshold_backward: 0 at the kink, NaN passes


def _silu(v: np.ndarray, w: np.ndarray, g: np.ndarray) -> np.ndarray:
    s = _sigmoid(v)
    return g * (s * (1 + v * (1 - s)))


def _gelu(v: np.ndarray, w: np.ndarray, g: np.ndarray) -> np.ndarray:
    """0.5·v·(1 + tanh u) = v·σ(2u), u = C·(v + A·v³): the derivative σ(2u) + 2v·σ(1−σ)·C·(1 + 3A·v²), with no
    cancellation of 1 + tanh u for negative v."""
    s = _sigmoid(2 * GELU_C * (v + GELU_A * v * v * v))
    return g * (s + (v + v) * (s * (1 - s)) * (GELU_C * (1 + 3 * GELU_A * v * v)))


BACKWARD: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "scale": lambda v, w, g: g * 1.25,
    "shift": lambda v, w, g: g,
    "relu": _relu,
    "square": lambda v, w, g: g * (v + v),
    "tanh": lambda v, w, g: g * (1 - w * w),
    "sigmoid": lambda v, w, g: g * (w * (1 - w)),
    "silu": _silu,
    "gelu": _gelu,
}
"""Each op's backward: (its input v, its output w = op(v), the gradient g of w) -> the gradient of v, in the
arrays' own precision (float64 for the reference, float32 to emulate a kernel)."""
assert set(BACKWARD) == set(OPS)

USES_OUTPUT = frozenset({"tanh", "sigmoid"})
"""Ops whose derivative is written with their output: a fused kernel has it from the forward it recomputes."""
CONSTANT = frozenset({"scale", "shift"})
"""Ops whose derivative is a constant: their backward kernel reads the gradient only, not the op's input."""
BACKWARD_FLOPS = {"scale": 1, "shift": 0, "relu": 1, "square": 2, "tanh": 4, "sigmoid": 6, "silu": 8, "gelu": 18}
"""FLOPs per element of an op's backward from its input, counted as `FLOPS` counts (tanh: the output again, w·w,
1−, ·g); the one multiply by the incoming gradient is included, shift's derivative is 1 and costs nothing."""
TORCH_SAVES_INPUT = frozenset({"square", "silu", "gelu"})
TORCH_SAVES_OUTPUT = frozenset({"relu", "tanh", "sigmoid"})
"""What torch autograd saves per op (measured with saved_tensors_hooks; scale and shift save nothing)."""


def values(x: np.ndarray, ops: list[str], dtype: str | None = None) -> list[np.ndarray]:
    """x, v_1, …, v_k: in float64, or (dtype given) each op in float32 stored in `dtype`, as unfused kernels do."""
    vs = [x.astype(np.float64 if dtype is None else dtype)]
    with np.errstate(over="ignore", invalid="ignore"):
        for op in ops:
            v = vs[-1] if dtype is None else vs[-1].astype(np.float32)
            vs.append(OPS[op](v) if dtype is None else OPS[op](v).astype(dtype))
    return vs


def _gelu_tanh_form(v: np.ndarray, w: np.ndarray, g: np.ndarray) -> np.ndarray:
    """gelu's derivative as torch's gelu_backward writes it: 0.5·(1 + t) + 0.5·v·(1 − t²)·C·(1 + 3A·v²), t = tanh u;
    1 + t cancels for negative v."""
    t = np.tanh(GELU_C * (v + GELU_A * v * v * v))
    return g * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * (GELU_C * (1 + 3 * GELU_A * v * v)))


TORCH_STYLE = {"gelu": _gelu_tanh_form}
"""Where torch's backward formula differs from `BACKWARD` in more than rounding."""


def gradient(
    x: np.ndarray, dy: np.ndarray, ops: list[str], dtype: str | None = None, torch: bool = False
) -> np.ndarray:
    """dx in float64, or (dtype given) as an unfused backward makes it in `dtype` storage: each op's kernel reads
    its saved tensor and the gradient in `dtype`, computes in float32 and stores the next gradient in `dtype`.
    The saved tensor is the op's input (the output recomputed from it in float32), or with `torch` what torch
    autograd saves (tanh's and sigmoid's output, stored in `dtype`), with torch's formula for gelu's derivative."""
    vs = values(x, ops, dtype)
    g = dy.astype(np.float64 if dtype is None else dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in reversed(range(len(ops))):
            op = ops[i]
            if dtype is None:
                g = BACKWARD[op](vs[i], vs[i + 1], g)
                continue
            v = vs[i].astype(np.float32)
            w = vs[i + 1].astype(np.float32) if torch and op in USES_OUTPUT else OPS[op](v)
            backward = TORCH_STYLE.get(op, BACKWARD[op]) if torch else BACKWARD[op]
            g = backward(v, w, g.astype(np.float32)).astype(dtype)
    return g


class ChainBackward(Backward):
    grads = ("dx",)

    def reference(self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        return {"dx": gradient(inputs["x"], inputs["dy"], list(params["ops"]))}

    def tolerance(
        self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: dict[str, np.ndarray]
    ) -> dict[str, float]:
        """Four times the larger error of two unfused backwards evaluated by NumPy in `dtype` storage, within
        `limits`: one saving each op's input (`unfused`), one saving what torch autograd saves (`eager`).

        Measured on the same inputs rather than guessed: a product of derivatives amplifies rounding where the
        chain does (square; gelu's derivative crossing zero near v ≈ −0.75, where torch's tanh form of it cancels).
        Both bound what a correct unfused gradient can be: torch's keeps tanh's output in `dtype`, so in half
        precision a saturated tanh (|v| ≳ 4.2, where it rounds to ±1) has its derivative 1 − w² rounded to 0.
        That loses every digit of those elements, which no storage precision excuses: the tolerance is capped at
        `BACKWARD_CEILING`, so such a gradient is a mismatch that says so rather than a pass."""
        x, dy, ops = inputs["x"], inputs["dy"], list(params["ops"])
        own = max(rel_err(gradient(x, dy, ops, dtype, torch=t), ref["dx"]) for t in (False, True))
        derived = scn.limits.clip(dtype, 4.0 * own if np.isfinite(own) else 0.0)
        return {"dx": min(derived, BACKWARD_CEILING[dtype])}

    def saved(self, scn: Scenario, params: Params, dtype: str) -> dict[str, dict[str, int]]:
        n, ops = params["n"], list(params["ops"])
        ns = n * np.dtype(dtype).itemsize
        return {
            "fused": {"x": ns},
            "unfused": {"x": ns, **{f"t{i}": ns for i in range(1, len(ops))}},
            "eager": dict.fromkeys(torch_saved(ops), ns),
            "compiled": compiled_saved(ops, n, np.dtype(dtype).itemsize),
        }

    def backward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """Unfused: per op, last first, read its saved input and the gradient, write the next gradient; `removed`
        holds the k-1 gradient intermediates fusion keeps in registers. The fused kernel also skips reading the
        saved intermediates (n·s each): reads alone, which `removed` (a write and its read) cannot state, so
        unfused − fused bytes = saved_bytes + the saved tensors unfused reads − x where fused reads it. Scale's
        and shift's kernels read the gradient only (their derivative is a constant), and a fused chain of only
        those does not read x. Peaks: what is saved, dy and dx throughout, plus the live gradient intermediates."""
        n, ops = params["n"], list(params["ops"])
        s = np.dtype(dtype).itemsize
        k, ns = len(ops), n * s
        reads_x = any(op not in CONSTANT for op in ops)
        fused_flops = sum(BACKWARD_FLOPS[op] for op in ops)
        fused_flops += sum(FLOPS[op] for op in ops[:-1] if op not in USES_OUTPUT)
        fused = (KernelTraffic("d(" + "+".join(ops) + ")", (1 + reads_x) * ns, ns, fused_flops * n),)
        unfused = tuple(
            KernelTraffic(f"d{op}", (1 + (op not in CONSTANT)) * ns, ns, BACKWARD_FLOPS[op] * n) for op in reversed(ops)
        )
        grads = ["dx", *(f"g{i}" for i in range(1, k)), "dy"]
        steps = [((f"t{i}", grads[i + 1]), (grads[i],)) for i in reversed(range(k))]
        removed = tuple(Intermediate(f"g{i}", n, s) for i in range(1, k))
        apart = live_peak((k + 2) * ns, steps, {g: ns for g in grads[1:-1]})
        eager, eager_peak = _eager_backward(ops, n, s)
        kept = sum(compiled_saved(ops, n, s).values())
        compiled = (KernelTraffic("d(" + "+".join(ops) + ")", kept + ns, ns, fused_flops * n),)
        return {
            "fused": VariantLedger("fused", fused, removed, 3 * ns),
            "unfused": VariantLedger("unfused", unfused, peak_bytes=apart),
            "eager": VariantLedger("eager", eager, peak_bytes=eager_peak),
            "compiled": VariantLedger("compiled", compiled, removed, kept + 2 * ns),
        }

    def forward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """The forward's kernels, plus compiled's write of relu's mask where it keeps one (unfused and eager already
        write what they keep; fused and compiled keep x, which they read anyway, and y, which they write); the peak
        of a training step's forward holds what it saves to the end."""
        n, ops = params["n"], list(params["ops"])
        ns = n * np.dtype(dtype).itemsize
        names = ["x", *(f"t{i}" for i in range(1, len(ops))), "y"]
        steps = [((names[i],), (names[i + 1],)) for i in range(len(ops))]
        kept = [t for t in torch_saved(ops) if t not in ("x", "y")]
        eager_peak = live_peak(2 * ns, [*steps, (kept, ())], {t: ns for t in names[1:-1]})
        mask = compiled_saved(ops, n, np.dtype(dtype).itemsize).get("mask", 0)
        peaks = {"fused": 2 * ns, "unfused": (len(ops) + 1) * ns, "eager": eager_peak, "compiled": 2 * ns + mask}
        out = {}
        for variant, lg in scn.ledger(params, dtype).items():
            kernels = lg.kernels
            if variant == "compiled" and mask:
                kernels = tuple(replace(kernel, bytes_written=kernel.bytes_written + mask) for kernel in kernels)
            out[variant] = VariantLedger(variant, kernels, lg.removed, peaks.get(variant, lg.peak_bytes))
        return out


def compiled_saved(ops: list[str], n: int, s: int) -> dict[str, int]:
    """What torch.compile's AOTAutograd keeps for the chain, as its min-cut partitioner chose on torch 2.13 for
    each of 14 chains tried (tests/test_elementwise_chain_backward.py checks one): y where the last op is tanh
    or sigmoid (their derivative is written with the output, which the forward writes anyway); then, for the
    other ops whose derivative is not a constant, relu's mask (n bytes of bool) where they are all relu's, else
    x, from which the backward recomputes the chain."""
    varying = [i for i, op in enumerate(ops) if op not in CONSTANT]
    out = {"y": n * s} if ops[-1] in USES_OUTPUT else {}
    rest = [ops[i] for i in varying if not (out and i == len(ops) - 1)]
    if rest:
        out = {"mask": n} | out if all(op == "relu" for op in rest) else {"x": n * s} | out
    return out


def torch_saved(ops: list[str]) -> list[str]:
    """The tensors torch autograd keeps for the chain (x, t1 … t(k-1), y), each once, in chain order."""
    names = ["x", *(f"t{i}" for i in range(1, len(ops))), "y"]
    kept = {names[i] for i, op in enumerate(ops) if op in TORCH_SAVES_INPUT}
    kept |= {names[i + 1] for i, op in enumerate(ops) if op in TORCH_SAVES_OUTPUT}
    return [t for t in names if t in kept]


def _eager_backward(ops: list[str], n: int, s: int) -> tuple[tuple[KernelTraffic, ...], int]:
    """torch's backward of the chain op by op, last first: shift passes the gradient through (no kernel); square
    (v·v) is two multiplies, one per operand, and the in-place add that accumulates them; every other op is one
    kernel reading the gradient and its saved tensor. Peak: saved tensors, dy and dx, plus live gradients."""
    ns = n * s
    kernels: list[KernelTraffic] = []
    steps: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    g = "dy"
    for i in reversed(range(len(ops))):
        op, out = ops[i], "dx" if i == 0 else f"g{i}"
        if op == "shift":
            continue
        if op == "square":
            kernels += [KernelTraffic("mul", 2 * ns, ns, n)] * 2 + [KernelTraffic("add_", 2 * ns, ns, n)]
            steps += [((g,), (f"p{i}",)), ((g,), (out,)), ((f"p{i}", out), (out,))]
        else:
            flops = BACKWARD_FLOPS[op] - (FLOPS[op] if op in USES_OUTPUT else 0)  # from the saved output
            kernels.append(KernelTraffic(f"{op}_backward", (1 + (op not in CONSTANT)) * ns, ns, flops * n))
            steps.append(((g,), (out,)))
        g = out
    sizes = {f"g{i}": ns for i in range(1, len(ops))} | {f"p{i}": ns for i in range(len(ops))}
    return tuple(kernels), live_peak((len(torch_saved(ops)) + 2) * ns, steps, sizes)
