"""swiglu's training step in CuPy: the forward that keeps what its backward reads, and the backward, fused and
unfused (`scenarios.swiglu.backward` says what each saves and moves).

The forwards are the forward module's own launches (`backends.cupy.swiglu`): fused keeps only a and b; unfused
writes silu(a) into s, keeps it and multiplies it by b. The backward kernels are generated CUDA C with the
forward's grid-stride template: fused is one kernel that reads a, b and dy once, recomputes σ(a) and silu(a) with
the shared `op_sigmoid` (CUDA's accurate expf) and writes da = dy·b·silu′(a) and db = dy·silu(a); unfused is
autograd's three, the forward's product kernel twice (db = dy·s, ds = dy·b into a temporary) and silu's backward,
da = ds·silu′(a). Everything computes in float32 and stores in the case's dtype; the grid is sized per shape
(`elementwise_launch`), as the forward's. Every kernel is built (and recorded) while the pass is prepared.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET, sm_device
from backends.cupy import swiglu as forward
from backends.cupy.build import build
from backends.cupy.device import CONVERSIONS, CTYPES, OPS_SOURCE
from suite.kit.launch_shape import block_chosen_by, elementwise_launch, launch_notes
from suite.kit.training import Pass, training

GRADS = r"""
extern "C" __global__ void {name}(const {T}* __restrict__ a, const {T}* __restrict__ b,
                                  const {T}* __restrict__ dy, {T}* __restrict__ da, {T}* __restrict__ db,
                                  long long n) {{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
        const float v = load(a + i), g = load(dy + i);
        const float sig = op_sigmoid(v), s = v * sig;
        store(db + i, g * s);
        store(da + i, g * load(b + i) * (sig + s * (1.0f - sig)));
    }}
}}
"""
SILU_GRAD = r"""
extern "C" __global__ void {name}(const {T}* __restrict__ ds, const {T}* __restrict__ a, {T}* __restrict__ da,
                                  long long n) {{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
        const float v = load(a + i), sig = op_sigmoid(v);
        store(da + i, load(ds + i) * (sig + v * sig * (1.0f - sig)));
    }}
}}
"""
TEMPLATES = {"grads": GRADS, "silu_grad": SILU_GRAD}


def source(mode: str, dtype: str) -> tuple[str, str]:
    """(CUDA source, kernel name) of a backward kernel ("grads", "silu_grad") or a forward mode ("mul", ...)."""
    if mode not in TEMPLATES:
        return forward.source(mode, dtype)
    name = f"swiglu_backward_{mode}_{dtype}"
    return CONVERSIONS + OPS_SOURCE + TEMPLATES[mode].format(name=name, T=CTYPES[dtype]), name


def _check(arrays: dict[str, Any]) -> str:
    found = {k: np.dtype(a.dtype).name for k, a in arrays.items()}
    if len(set(found.values())) != 1 or next(iter(found.values())) not in CTYPES:
        raise ValueError(f"cupy swiglu training: {found}; needs one dtype of {list(CTYPES)}")
    return next(iter(found.values()))


def _backward_launcher(steps: list[tuple[str, tuple]], n: int, dtype: str, opts: dict) -> Pass:
    """Each step is (mode, arrays): built and recorded now, launched in order by the returned pass."""
    gpu, option = sm_device(), BACKEND.option(opts, "block")
    block, blocks = elementwise_launch(n, option, gpu)
    grid, size = (blocks,), np.int64(n)
    launches = [(build(*source(mode, dtype), threads=block), (*arrays, size)) for mode, arrays in steps]
    context = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with context():
            for k, args in launches:
                k(grid, (block,), args)

    where = {"sms": gpu.sms, "sms_from": gpu.source}
    return Pass(run, notes=launch_notes({"block": block}, grid, block_chosen_by(option), kernels=len(steps), **where))


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """The forward's fused kernel; a and b are all it keeps."""
    a, b = inputs["a"], inputs["b"]
    _check({"a": a, "b": b, "y": y})
    launch = forward._launcher([(a, b, y, "fused")], y.size, opts)
    return Pass(launch.run, saved={"a": a, "b": b}, notes=launch.notes)


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel: a, b, dy read once; σ and silu recomputed; da and db written once."""
    arrays = {"a": saved["a"], "b": saved["b"], "dy": inputs["dy"], "da": grads["da"], "db": grads["db"]}
    dtype = _check(arrays)
    return _backward_launcher([("grads", tuple(arrays.values()))], inputs["dy"].size, dtype, opts)


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """silu(a) into s (allocated here, kept for the backward), then the product: the forward's two kernels."""
    a, b = inputs["a"], inputs["b"]
    dtype = _check({"a": a, "b": b, "y": y})
    s = TARGET.empty(a.shape, dtype)
    launch = forward._launcher([(a, a, s, "silu"), (s, b, y, "mul")], y.size, opts)
    return Pass(launch.run, saved={"a": a, "b": b, "s": s}, notes=launch.notes)


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """db = dy·s and ds = dy·b (the forward's product kernel; ds a temporary allocated here), then
    da = ds·silu′(a): three launches."""
    a, b, s, dy, da, db = saved["a"], saved["b"], saved["s"], inputs["dy"], grads["da"], grads["db"]
    dtype = _check({"a": a, "b": b, "s": s, "dy": dy, "da": da, "db": db})
    ds = TARGET.empty(dy.shape, dtype)
    steps = [("mul", (dy, s, db)), ("mul", (dy, b, ds)), ("silu_grad", (ds, a, da))]
    return _backward_launcher(steps, dy.size, dtype, opts)


training(
    "swiglu",
    backend="cupy",
    device="cuda",
    like=lambda a: TARGET.empty(a.shape, str(a.dtype)),
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
