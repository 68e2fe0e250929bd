"""The elementwise chain's backward and train phases in CuPy: generated CUDA C, fused (recompute) against unfused
(save).

fused: the forward is the forward module's kernel for the whole chain and keeps x alone; the backward is one
kernel generated for the chain: per element it loads x and dy, recomputes v_1 … v_(k-1) in float32 registers
(one local variable per op, as the forward writes one statement per op) and applies each op's derivative, last
op first, storing dx once.
unfused: the forward is the forward module's one-op kernels, each writing its own intermediate, all of them kept
(x, t1 … t(k-1)); the backward is the same generator's kernel for a one-op chain, launched once per op, last op
first, each reading that op's saved input and the running gradient (dy first) and writing the next gradient in
the chain's dtype, dx last. Two buffers alternate for the gradients between kernels, as the ledger's peak counts.
A one-op kernel is shared by every chain that uses the op, as in the forward.

Every kernel has the forward's shape: a grid-stride loop with 64-bit indexing, sized per shape
(`suite.kit.launch_shape.elementwise_launch`), float16 stored as raw 16-bit words. A chain whose derivatives are
all constants (scale, shift) does not load x, and such an op's unfused kernel reads the gradient only, as the
ledger counts. The derivatives sit beside the ops of `backends.cupy.device`, with CUDA's accurate expf (no
fast-math). Each kernel is built with its block size (`build(..., threads=block)`), so it is on record for the
resource report; without a GPU the build is NVRTC's for sm_90 and a launch raises NotRunnable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET, sm_device
from backends.cupy.build import build
from backends.cupy.device import CONVERSIONS, CTYPES, OPS_SOURCE
from backends.cupy.elementwise_chain import _launcher as forward_launcher
from scenarios.elementwise_chain.backward import CONSTANT, USES_OUTPUT
from suite.kit.launch_shape import block_chosen_by, elementwise_launch, launch_notes
from suite.kit.training import Pass, training

DERIVATIVES_SOURCE = r"""
// The gradient of an op's input from its input v, its output w = op(v) and the gradient g of w.
__device__ __forceinline__ float d_scale(float v, float w, float g) { return g * 1.25f; }
__device__ __forceinline__ float d_shift(float v, float w, float g) { return g; }
// torch's threshold_backward: 0 at the kink, NaN passes
__device__ __forceinline__ float d_relu(float v, float w, float g) { return v <= 0.0f ? 0.0f : g; }
__device__ __forceinline__ float d_square(float v, float w, float g) { return g * (v + v); }
__device__ __forceinline__ float d_tanh(float v, float w, float g) { return g * (1.0f - w * w); }
__device__ __forceinline__ float d_sigmoid(float v, float w, float g) { return g * (w * (1.0f - w)); }
__device__ __forceinline__ float d_silu(float v, float w, float g) {
    const float s = op_sigmoid(v);
    return g * (s * (1.0f + v * (1.0f - s)));
}
// gelu(v) = v·σ(2u), u = C·(v + A·v³): σ(2u) + 2v·σ(1−σ)·C·(1 + 3A·v²), no cancellation of 1 + tanh u
__device__ __forceinline__ float d_gelu(float v, float w, float g) {
    const float s = op_sigmoid(1.5957691216f * (v + 0.044715f * v * v * v));
    return g * (s + (v + v) * (s * (1.0f - s)) * (0.7978845608f * (1.0f + 0.134145f * v * v)));
}
"""

KERNEL = r"""
extern "C" __global__ void {name}(const {T}* __restrict__ x, const {T}* __restrict__ dy, {T}* __restrict__ dx,
                                  long long n) {{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
{body}
        store(dx + i, g);
    }}
}}
"""


def grad_body(ops: tuple[str, ...], indent: str = " " * 8) -> str:
    """The statements of one element: x and the recomputed v_1 … v_(k-1), then the gradient through each op,
    last first (the last op's output only where its derivative is written with it). A chain of constant
    derivatives reads neither x nor any v."""
    k, reads_x = len(ops), any(op not in CONSTANT for op in ops)
    lines = ["const float v0 = load(x + i);"] if reads_x else []
    if reads_x:
        lines += [f"const float v{i} = op_{ops[i - 1]}(v{i - 1});" for i in range(1, k)]
    lines.append("float g = load(dy + i);")
    for i in reversed(range(k)):
        v = f"v{i}" if reads_x else "0.0f"
        w = f"v{i + 1}" if i + 1 < k else f"op_{ops[i]}(v{i})" if ops[i] in USES_OUTPUT else "0.0f"
        lines.append(f"g = d_{ops[i]}({v}, {w if reads_x else '0.0f'}, g);")
    return "\n".join(indent + line for line in lines)


def source(ops: tuple[str, ...], dtype: str) -> tuple[str, str]:
    """(CUDA source, kernel name) of the backward of `ops` on arrays of `dtype`."""
    name = f"chain_grad_{dtype}_{'_'.join(ops)}"
    kernel_source = KERNEL.format(name=name, T=CTYPES[dtype], body=grad_body(ops))
    return CONVERSIONS + OPS_SOURCE + DERIVATIVES_SOURCE + kernel_source, name


def _grad_launcher(steps: list[tuple[Any, Any, Any, tuple[str, ...]]], n: int, opts: dict) -> Pass:
    """Build (and record) every (v, g, out, ops) step's kernel now; the pass only launches them, in order."""
    gpu, option = sm_device(), BACKEND.option(opts, "block")
    block, blocks = elementwise_launch(n, option, gpu)
    grid, size = (blocks,), np.int64(n)
    launches = [
        (build(*source(ops, np.dtype(out.dtype).name), threads=block), (v, g, out, size)) for v, g, out, ops in steps
    ]
    context = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with context():
            for k, args in launches:
                k(grid, (block,), args)

    where = {"sms": gpu.sms, "sms_from": gpu.source}
    return Pass(run, notes=launch_notes({"block": block}, grid, block_chosen_by(option), **where))


def _check(inputs: dict[str, Any], x: Any, out: Any) -> None:
    dtype = np.dtype(out.dtype).name
    if dtype not in CTYPES or x.dtype != out.dtype or ("dy" in inputs and inputs["dy"].dtype != out.dtype):
        raise ValueError(f"cupy elementwise_chain: x {x.dtype}, dy and out {out.dtype} must share one of {CTYPES}")


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """The fused forward; it keeps x alone, the backward recomputes the rest."""
    _check({}, inputs["x"], y)
    launch = forward_launcher([(inputs["x"], y, tuple(params["ops"]))], params["n"], opts)
    return Pass(launch.run, saved={"x": inputs["x"]}, notes=launch.notes)


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel: reads x (unless every derivative is a constant) and dy, recomputes the chain, writes dx."""
    _check(inputs, saved["x"], grads["dx"])
    return _grad_launcher([(saved["x"], inputs["dy"], grads["dx"], tuple(params["ops"]))], params["n"], opts)


def _empty_like(a: Any) -> Any:
    return TARGET.empty(a.shape, np.dtype(a.dtype).name)


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """One kernel per op; x and the intermediates t1 … t(k-1) they write are kept for the backward."""
    _check({}, inputs["x"], y)
    ops = params["ops"]
    kept = {"x": inputs["x"], **{f"t{i}": _empty_like(y) for i in range(1, len(ops))}}
    buffers = [*kept.values(), y]
    steps = [(buffers[i], buffers[i + 1], (op,)) for i, op in enumerate(ops)]
    launch = forward_launcher(steps, params["n"], opts)
    return Pass(launch.run, saved=kept, notes=launch.notes)


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel per op, last first: op i reads its saved input and the gradient of its output, writes the
    gradient of its input (into one of two alternating buffers, dx for the first op)."""
    dx, ops = grads["dx"], tuple(params["ops"])
    _check(inputs, saved["x"], dx)
    between = [_empty_like(dx) for _ in range(min(2, len(ops) - 1))]
    vs = [saved["x"], *(saved[f"t{i}"] for i in range(1, len(ops)))]
    steps, g = [], inputs["dy"]
    for i in reversed(range(len(ops))):
        out = dx if i == 0 else between[(len(ops) - 1 - i) % 2]
        steps.append((vs[i], g, out, (ops[i],)))
        g = out
    return _grad_launcher(steps, params["n"], opts)


training(
    "elementwise_chain",
    backend="cupy",
    device="cuda",
    like=_empty_like,
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
