"""Rope's backward and train passes in CuPy: dy rotated back by −θ into dq and dk (`scenarios.rope.backward`).

The forward of a training step is the forward's own entry (`backends.cupy.rope`): rope is linear, so its backward
needs only cos and sin, which every variant keeps (they are inputs) and nothing else. The backward kernels are
generated CUDA C in the forward's layout: a block per token, its threads striding over the head's pairs, each
loading its position's table values once and walking the token's heads; PAIR_A and PAIR_B (macros) name the two
members of pair i (i and i + h for `half`, 2i and 2i + 1 for `interleaved`).

Fused: one kernel reads each head row of dy (q's heads [0, heads) then k's [heads, heads + kv_heads)) and the
tables once and writes the row of dq or dk once, (g₁·cos + g₂·sin, g₂·cos − g₁·sin) per pair. Unfused: the steps
of `BACKWARD_STEPS`, one launch each, for q's heads of dy and then k's: u = dy·sin, v = rotateᵀ(u) = (u₂, −u₁),
w = dy·cos, dx = w + v, with u, v and w stored in the case's dtype in two buffers sized for q (w takes u's, dead
by then), reused for k. A step reads its source rows at head x0 of x_heads per token, so the dy-reading steps
address q's or k's heads of dy in place. float16 travels as raw bits (`backends.cupy.device`); arithmetic is
float32. Every kernel is built (and recorded) while the pass is prepared.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import TARGET, rope
from backends.cupy.build import build
from backends.cupy.device import CONVERSIONS, CTYPES
from scenarios.rope.backward import BACKWARD_STEPS
from suite.kit.training import Pass, training

FORWARD_INPUTS = ("q", "k", "cos", "sin")

FUSED = r"""
#define PAIR_A {a}
#define PAIR_B {b}
extern "C" __global__ void {name}(const {T}* __restrict__ dy, const {T}* __restrict__ cs, const {T}* __restrict__ sn,
        {T}* __restrict__ dq, {T}* __restrict__ dk, long long heads, long long kv, long long seq, long long h) {{
    const long long t = blockIdx.x, d = 2 * h, pos = t % seq;
    for (long long i = threadIdx.x; i < h; i += blockDim.x) {{
        const float c = load(cs + pos * h + i), s = load(sn + pos * h + i);
        for (long long j = 0; j < heads + kv; ++j) {{
            const {T}* g = dy + (t * (heads + kv) + j) * d;
            {T}* o = j < heads ? dq + (t * heads + j) * d : dk + (t * kv + j - heads) * d;
            const float a = load(g + PAIR_A), b = load(g + PAIR_B);
            store(o + PAIR_A, a * c + b * s);
            store(o + PAIR_B, b * c - a * s);
        }}
    }}
}}
"""

STEP = r"""
#define PAIR_A {a}
#define PAIR_B {b}
extern "C" __global__ void {name}(const {T}* __restrict__ x, const {T}* __restrict__ y, const {T}* __restrict__ table,
        {T}* __restrict__ dst, long long heads, long long x_heads, long long x0, long long seq, long long h) {{
    const long long t = blockIdx.x, d = 2 * h;
    for (long long i = threadIdx.x; i < h; i += blockDim.x) {{
        const float tab = {table};
        for (long long j = 0; j < heads; ++j) {{
            const {T}* src = x + (t * x_heads + x0 + j) * d;
            {T}* o = dst + (t * heads + j) * d;
            const float a = load(src + PAIR_A), b = load(src + PAIR_B);
            {body}
        }}
    }}
}}
"""

BODIES = {
    "unrotate": "store(o + PAIR_A, b); store(o + PAIR_B, -a);",
    "mul": "store(o + PAIR_A, a * tab); store(o + PAIR_B, b * tab);",
    "add": "const {T}* other = y + (t * heads + j) * d; store(o + PAIR_A, a + load(other + PAIR_A)); "
    "store(o + PAIR_B, b + load(other + PAIR_B));",
}


def fused_source(pairing: str, dtype: str) -> tuple[str, str]:
    name = f"rope_backward_fused_{pairing}_{dtype}"
    a, b = rope.PAIRS[pairing]
    return CONVERSIONS + FUSED.format(name=name, T=CTYPES[dtype], a=a, b=b), name


def step_source(op: str, pairing: str, dtype: str) -> tuple[str, str]:
    kind = "mul" if op in ("mul_cos", "mul_sin") else op
    name = f"rope_backward_{kind}_{pairing}_{dtype}"
    a, b = rope.PAIRS[pairing]
    table = "load(table + (t % seq) * h + i)" if kind == "mul" else "0.0f"
    body = BODIES[kind].format(T=CTYPES[dtype])
    return CONVERSIONS + STEP.format(name=name, T=CTYPES[dtype], a=a, b=b, table=table, body=body), name


def _check(arrays: dict[str, Any]) -> str:
    found = {k: np.dtype(a.dtype).name for k, a in arrays.items()}
    if len(set(found.values())) != 1 or next(iter(found.values())) not in CTYPES:
        raise ValueError(f"cupy rope training: {found}; needs one dtype of {list(CTYPES)}")
    return next(iter(found.values()))


def _forward(entry: Any) -> Any:
    """The forward of a training step: the variant's forward entry; it keeps cos and sin (inputs) and nothing
    else, since the backward of a rotation needs only the angle."""

    def forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
        launch = entry({n: inputs[n] for n in FORWARD_INPUTS}, y, params, opts)
        return Pass(launch.run, saved={"cos": inputs["cos"], "sin": inputs["sin"]}, notes=launch.notes)

    return forward


def _pass(launches: list[tuple[Any, tuple]], tokens: int, threads: int, opts: dict) -> Pass:
    launch = rope._launcher(launches, tokens, threads, opts)  # the forward's: launches in order on the stream
    return Pass(launch.run, notes=launch.notes)


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """One kernel: dy and the tables read once, dq and dk written once."""
    dy, cos, sin, dq, dk = inputs["dy"], saved["cos"], saved["sin"], grads["dq"], grads["dk"]
    dtype = _check({"dy": dy, "cos": cos, "sin": sin, "dq": dq, "dk": dk})
    tokens, heads, kv, seq, h = rope._sizes(params)
    threads = rope._threads(params, opts)
    k = build(*fused_source(params["pairing"], dtype), threads=threads)
    return _pass([(k, (dy, cos, sin, dq, dk, heads, kv, seq, h))], tokens, threads, opts)


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """dy·sin, rotateᵀ, dy·cos and the add for q's heads of dy, then k's; u, v, w stored in the case's dtype."""
    dy, cos, sin, dq, dk = inputs["dy"], saved["cos"], saved["sin"], grads["dq"], grads["dk"]
    dtype = _check({"dy": dy, "cos": cos, "sin": sin, "dq": dq, "dk": dk})
    tokens, heads, kv, seq, h = rope._sizes(params)
    threads = rope._threads(params, opts)
    first, second = (TARGET.empty((dq.size,), dtype) for _ in range(2))  # u and w share the first (u dies first)
    launches = []
    for dx, n, head0 in ((dq, heads, np.int64(0)), (dk, kv, heads)):
        env = {"dy": dy, "cos": cos, "sin": sin, "dx": dx}
        env |= {name: buf[: dx.size] for name, buf in (("u", first), ("w", first), ("v", second))}
        for st in BACKWARD_STEPS:
            src = env[st.reads[0]]
            other = env[st.reads[1]] if st.op == "add" else src
            table = env[st.reads[1]] if st.op in ("mul_cos", "mul_sin") else cos
            x_heads, x0 = (heads + kv, head0) if st.reads[0] == "dy" else (n, np.int64(0))
            k = build(*step_source(st.op, params["pairing"], dtype), threads=threads)
            launches.append((k, (src, other, table, env[st.writes], n, x_heads, x0, seq, h)))
    return _pass(launches, tokens, threads, opts)


training(
    "rope",
    backend="cupy",
    device="cuda",
    like=lambda a: TARGET.empty(a.shape, str(a.dtype)),
    fused=(_forward(rope.fused), fused_backward),
    unfused=(_forward(rope.unfused), unfused_backward),
)
