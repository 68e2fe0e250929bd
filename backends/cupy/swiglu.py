"""swiglu in CuPy: generated CUDA C, the elementwise chain's grid-stride template with two inputs.

One source per (dtype, mode): fused loads a and b and stores silu(a)·b; the unfused variant launches the silu
mode (a -> s in the case's dtype) and the product mode (s, b -> y). silu is the chain's `op_silu` (CUDA's
accurate expf, no fast-math) from `backends.cupy.device`, so every variant computes it alike. The grid is sized
per shape (`suite.kit.launch_shape.elementwise_launch`), as the chain's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET, sm_device
from backends.cupy.build import build
from backends.cupy.device import CONVERSIONS, CTYPES, OPS_SOURCE
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch_shape import block_chosen_by, elementwise_launch, launch_notes

KERNEL = r"""
extern "C" __global__ void {name}(const {T}* __restrict__ p, const {T}* __restrict__ q, {T}* __restrict__ y,
                                  long long n) {{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
        store(y + i, {expr});
    }}
}}
"""
EXPRS = {
    "fused": "op_silu(load(p + i)) * load(q + i)",
    "silu": "op_silu(load(p + i))",
    "mul": "load(p + i) * load(q + i)",
}


def source(mode: str, dtype: str) -> tuple[str, str]:
    """(CUDA source, kernel name) of one mode for arrays of `dtype`."""
    name = f"swiglu_{mode}_{dtype}"
    return CONVERSIONS + OPS_SOURCE + KERNEL.format(name=name, T=CTYPES[dtype], expr=EXPRS[mode]), name


def _launcher(steps: list[tuple[Any, Any, Any, str]], n: int, opts: dict) -> Launcher:
    gpu, option = sm_device(), BACKEND.option(opts, "block")
    block, blocks = elementwise_launch(n, option, gpu)
    grid, size = (blocks,), np.int64(n)
    launches = [
        (build(*source(mode, np.dtype(y.dtype).name), threads=block), (p, q, y, size)) for p, q, y, mode in steps
    ]
    context = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for k, args in launches:
                k(grid, (block,), args)

    where = {"sms": gpu.sms, "sms_from": gpu.source}
    notes = launch_notes({"block": block}, grid, block_chosen_by(option), kernels=len(steps), **where)
    return Launch(launch, notes=notes)


@kernel(scenario="swiglu", backend="cupy", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    return _launcher([(inputs["a"], inputs["b"], out, "fused")], out.size, opts)


@kernel(scenario="swiglu", backend="cupy", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    a, b = inputs["a"], inputs["b"]
    s = TARGET.empty(out.shape, np.dtype(out.dtype).name)
    return _launcher([(a, a, s, "silu"), (s, b, out, "mul")], out.size, opts)
