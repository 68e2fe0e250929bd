"""Rope in CuPy: generated CUDA C, a block per token and a thread per pair, as the Numba CUDA kernels.

Each block owns a token: its threads stride over the head's pairs, load the position's cos and sin once and walk
the token's heads (q's, then k's). PAIR_A and PAIR_B (macros) name the two members of pair i: i and i + h for
the `half` pairing, 2i and 2i + 1 for `interleaved`. Fused writes both rotated members straight into out;
unfused runs the decomposition's steps (rotate, multiply by a table, add), one kernel each, intermediates in the
case's dtype in buffers sized for q and reused for k. float16 travels as raw bits (`backends.cupy.device`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET
from backends.cupy.build import build
from backends.cupy.device import CONVERSIONS, CTYPES
from scenarios.rope import STEPS
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch_shape import block_chosen_by, launch_notes

PAIRS = {"half": ("(i)", "(i + h)"), "interleaved": ("(2 * i)", "(2 * i + 1)")}

FUSED = r"""
#define PAIR_A {a}
#define PAIR_B {b}
extern "C" __global__ void {name}(const {T}* __restrict__ q, const {T}* __restrict__ k, const {T}* __restrict__ cs,
        const {T}* __restrict__ sn, {T}* __restrict__ out, long long heads, long long kv, long long seq, long long h) {{
    const long long t = blockIdx.x, d = 2 * h, pos = t % seq;
    for (long long i = threadIdx.x; i < h; i += blockDim.x) {{
        const float c = load(cs + pos * h + i), s = load(sn + pos * h + i);
        for (long long j = 0; j < heads + kv; ++j) {{
            const {T}* x = j < heads ? q + (t * heads + j) * d : k + (t * kv + j - heads) * d;
            {T}* o = out + (t * (heads + kv) + j) * d;
            const float a = load(x + PAIR_A), b = load(x + PAIR_B);
            store(o + PAIR_A, a * c - b * s);
            store(o + PAIR_B, b * c + a * s);
        }}
    }}
}}
"""

STEP = r"""
#define PAIR_A {a}
#define PAIR_B {b}
extern "C" __global__ void {name}(const {T}* __restrict__ x, const {T}* __restrict__ y, const {T}* __restrict__ table,
        {T}* __restrict__ dst, long long heads, long long dst_heads, long long head0, long long seq, long long h) {{
    const long long t = blockIdx.x, d = 2 * h;
    for (long long i = threadIdx.x; i < h; i += blockDim.x) {{
        const float tab = {table};
        for (long long j = 0; j < heads; ++j) {{
            const {T}* src = x + (t * heads + j) * d;
            {T}* o = dst + (t * dst_heads + head0 + j) * d;
            const float a = load(src + PAIR_A), b = load(src + PAIR_B);
            {body}
        }}
    }}
}}
"""

BODIES = {
    "rotate": "store(o + PAIR_A, -b); store(o + PAIR_B, a);",
    "mul": "store(o + PAIR_A, a * tab); store(o + PAIR_B, b * tab);",
    "add": "const {T}* other = y + (t * heads + j) * d; store(o + PAIR_A, a + load(other + PAIR_A)); "
    "store(o + PAIR_B, b + load(other + PAIR_B));",
}


def fused_source(pairing: str, dtype: str) -> tuple[str, str]:
    name = f"rope_fused_{pairing}_{dtype}"
    a, b = PAIRS[pairing]
    return CONVERSIONS + FUSED.format(name=name, T=CTYPES[dtype], a=a, b=b), name


def step_source(op: str, pairing: str, dtype: str) -> tuple[str, str]:
    kind = "mul" if op in ("mul_cos", "mul_sin") else op
    name = f"rope_{kind}_{pairing}_{dtype}"
    a, b = PAIRS[pairing]
    table = "load(table + (t % seq) * h + i)" if kind == "mul" else "0.0f"
    body = BODIES[kind].format(T=CTYPES[dtype])
    return CONVERSIONS + STEP.format(name=name, T=CTYPES[dtype], a=a, b=b, table=table, body=body), name


def _threads(params: dict, opts: dict) -> int:
    """A thread per pair, in whole warps, up to the `block` option (128 by default)."""
    pairs = params["head_dim"] // 2
    return max(32, min(int(BACKEND.option(opts, "block") or 128), -(-pairs // 32) * 32))


def _launcher(launches: list[tuple[Any, tuple]], tokens: int, threads: int, opts: dict) -> Launcher:
    context = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for k, args in launches:
                k((tokens,), (threads,), args)

    by = block_chosen_by(BACKEND.option(opts, "block"))
    return Launch(launch, notes=launch_notes({"threads": threads}, (tokens,), by, kernels=len(launches)))


def _sizes(params: dict) -> tuple[int, Any, Any, Any, Any]:
    """tokens, and heads, kv_heads, seq_len, head_dim/2 as the kernels' 64-bit arguments."""
    tokens = params["batch"] * params["seq_len"]
    return tokens, *(
        np.int64(v) for v in (params["heads"], params["kv_heads"], params["seq_len"], params["head_dim"] // 2)
    )


@kernel(scenario="rope", backend="cupy", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    tokens, heads, kv, seq, h = _sizes(params)
    threads = _threads(params, opts)
    k = build(*fused_source(params["pairing"], np.dtype(out.dtype).name), threads=threads)
    args = (inputs["q"], inputs["k"], inputs["cos"], inputs["sin"], out, heads, kv, seq, h)
    return _launcher([(k, args)], tokens, threads, opts)


@kernel(scenario="rope", backend="cupy", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    tokens, heads, kv, seq, h = _sizes(params)
    threads, dtype = _threads(params, opts), np.dtype(out.dtype).name
    buffers = {name: TARGET.empty((inputs["q"].size,), dtype) for name in ("r", "a", "b")}  # sized for q, reused for k
    launches = []
    for x, n, head0 in (("q", heads, 0), ("k", kv, heads)):
        env = dict(inputs) | {"x": inputs[x], "y": out} | {name: buf[: inputs[x].size] for name, buf in buffers.items()}
        for st in STEPS:
            other = env[st.reads[1]] if st.op == "add" else env[st.reads[0]]
            table = env[st.reads[1]] if st.op in ("mul_cos", "mul_sin") else inputs["cos"]
            dst_heads, start = (heads + kv, head0) if st.writes == "y" else (n, np.int64(0))
            k = build(*step_source(st.op, params["pairing"], dtype), threads=threads)
            launches.append((k, (env[st.reads[0]], other, table, env[st.writes], n, dst_heads, start, seq, h)))
    return _launcher(launches, tokens, threads, opts)
