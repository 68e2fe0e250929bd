"""Rope's backward and train passes in Triton: dy rotated back by −θ into dq and dk (`scenarios.rope.backward`).

The forward of a training step is the forward's own entry (`backends.triton.rope`): rope is linear, so its
backward needs only cos and sin, which every variant keeps (they are inputs) and nothing else. Both backward
kernels follow the forward's layout: one program per token, which loads its position's table rows once
(head_dim/2 values, HALF = the next power of two, masked) and walks the token's heads; PAIR (a constexpr) picks
the two members of every pair (the row's halves, or its even and odd values).

Fused: one kernel reads each head row of dy (q's heads [0, heads) then k's [heads, heads + kv_heads)) and the
tables once and writes the row of dq or dk once, (g₁·cos + g₂·sin, g₂·cos − g₁·sin) per pair. Unfused: the steps
of `BACKWARD_STEPS`, one launch each, for q's heads of dy and then k's: u = dy·sin, v = rotateᵀ(u) = (u₂, −u₁),
w = dy·cos, dx = w + v, with u, v and w stored in the case's dtype in two buffers sized for q (w takes u's, dead
by then), reused for k. A step reads its source rows at head x0 of x_heads per token, so the dy-reading steps
address q's or k's heads of dy in place, without a strided copy. Arithmetic is float32; offsets are 64-bit.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from backends.triton import rope
from backends.triton.rope import _launcher, _pair_offsets, _shape
from scenarios.rope.backward import BACKWARD_STEPS
from suite.kit.training import Pass, training

FORWARD_INPUTS = ("q", "k", "cos", "sin")
UNROTATE, MUL, ADD = 0, 1, 2
OPS = {"unrotate": UNROTATE, "mul_cos": MUL, "mul_sin": MUL, "add": ADD}
UNROTATE_: tl.constexpr = tl.constexpr(UNROTATE)
MUL_: tl.constexpr = tl.constexpr(MUL)


@triton.jit
def _rope_backward_fused(
    dy_ptr, cos_ptr, sin_ptr, dq_ptr, dk_ptr, heads, kv, seq, h, PAIR: tl.constexpr, HALF: tl.constexpr
):
    """Token t's heads of dy, rotated by −θ, into dq (the first `heads`) and dk (the next `kv`)."""
    t = tl.program_id(0).to(tl.int64)
    d = 2 * h
    first, second, mask = _pair_offsets(h, PAIR, HALF)
    i = tl.arange(0, HALF)
    c = tl.load(cos_ptr + (t % seq) * h + i, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + (t % seq) * h + i, mask=mask, other=0.0).to(tl.float32)
    for j in range(heads + kv):
        src = dy_ptr + (t * (heads + kv) + j) * d
        if j < heads:  # noqa: SIM108 - a runtime branch in Triton, not a Python conditional expression
            dst = dq_ptr + (t * heads + j) * d
        else:
            dst = dk_ptr + (t * kv + j - heads) * d
        a = tl.load(src + first, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(src + second, mask=mask, other=0.0).to(tl.float32)
        tl.store(dst + first, (a * c + b * s).to(dq_ptr.dtype.element_ty), mask=mask)
        tl.store(dst + second, (b * c - a * s).to(dq_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_backward_step(
    x_ptr,
    y_ptr,
    t_ptr,
    dst_ptr,
    heads,
    x_heads,
    x0,
    seq,
    h,
    OP: tl.constexpr,
    PAIR: tl.constexpr,
    HALF: tl.constexpr,
):
    """dst's `heads` rows of token t = rotateᵀ(x), x·table or x + y; x's rows start at head x0 of x_heads."""
    t = tl.program_id(0).to(tl.int64)
    d = 2 * h
    first, second, mask = _pair_offsets(h, PAIR, HALF)
    if OP == MUL_:
        tab = tl.load(t_ptr + (t % seq) * h + tl.arange(0, HALF), mask=mask, other=0.0).to(tl.float32)
    for j in range(heads):
        src = x_ptr + (t * x_heads + x0 + j) * d
        dst = dst_ptr + (t * heads + j) * d
        a = tl.load(src + first, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(src + second, mask=mask, other=0.0).to(tl.float32)
        if OP == UNROTATE_:
            o1, o2 = b, -a
        elif OP == MUL_:
            o1, o2 = a * tab, b * tab
        else:
            other = y_ptr + (t * heads + j) * d
            o1 = a + tl.load(other + first, mask=mask, other=0.0).to(tl.float32)
            o2 = b + tl.load(other + second, mask=mask, other=0.0).to(tl.float32)
        tl.store(dst + first, o1.to(dst_ptr.dtype.element_ty), mask=mask)
        tl.store(dst + second, o2.to(dst_ptr.dtype.element_ty), mask=mask)


def _check(arrays: dict[str, Any]) -> None:
    found = {k: str(t.dtype).removeprefix("torch.") for k, t in arrays.items()}
    if len(set(found.values())) != 1 or next(iter(found.values())) not in ("float32", "float16"):
        raise ValueError(f"triton rope training: {found}; needs one dtype of float32 or float16")


def _forward(entry: Any) -> Any:
    """The forward of a training step: the variant's forward entry; it keeps cos and sin (inputs) and nothing
    else, since the backward of a rotation needs only the angle."""

    def forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
        launch = entry({n: inputs[n] for n in FORWARD_INPUTS}, y, params, opts)
        return Pass(launch.run, saved={"cos": inputs["cos"], "sin": inputs["sin"]}, notes=launch.notes)

    return forward


def _pass(steps: list[Any], tokens: int, half: int, opts: dict) -> Pass:
    launch = _launcher(steps, tokens, half, opts)  # the forward's: compiles and records every step now
    return Pass(launch.run, notes=launch.notes)


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """One kernel: dy and the tables read once, dq and dk written once."""
    dy, cos, sin, dq, dk = inputs["dy"], saved["cos"], saved["sin"], grads["dq"], grads["dk"]
    _check({"dy": dy, "cos": cos, "sin": sin, "dq": dq, "dk": dk})
    tokens, heads, kv, seq, h, half = _shape(params)
    args = (dy, cos, sin, dq, dk, heads, kv, seq, h)
    return _pass([(_rope_backward_fused, args, {"PAIR": int(params["pairing"] != "half")})], tokens, half, opts)


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """dy·sin, rotateᵀ, dy·cos and the add for q's heads of dy, then k's; u, v, w stored in the case's dtype."""
    dy, cos, sin, dq, dk = inputs["dy"], saved["cos"], saved["sin"], grads["dq"], grads["dk"]
    _check({"dy": dy, "cos": cos, "sin": sin, "dq": dq, "dk": dk})
    tokens, heads, kv, seq, h, half = _shape(params)
    pair = int(params["pairing"] != "half")
    first, second = dq.new_empty(dq.shape), dq.new_empty(dq.shape)  # u and w share the first (u dies first)
    steps = []
    for dx, n, head0 in ((dq, heads, 0), (dk, kv, heads)):
        env = {"dy": dy, "cos": cos, "sin": sin, "dx": dx}
        env |= {name: buf.view(-1)[: dx.numel()] for name, buf in (("u", first), ("w", first), ("v", second))}
        for st in BACKWARD_STEPS:
            src = env[st.reads[0]]
            other = env[st.reads[1]] if st.op == "add" else src
            table = env[st.reads[1]] if st.op in ("mul_cos", "mul_sin") else cos
            x_heads, x0 = (heads + kv, head0) if st.reads[0] == "dy" else (n, 0)
            args = (src, other, table, env[st.writes], n, x_heads, x0, seq, h)
            steps.append((_rope_backward_step, args, {"OP": OPS[st.op], "PAIR": pair}))
    return _pass(steps, tokens, half, opts)


training(
    "rope",
    backend="triton",
    device="cuda",
    fused=(_forward(rope.fused), fused_backward),
    unfused=(_forward(rope.unfused), unfused_backward),
)
