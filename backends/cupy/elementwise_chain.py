"""Elementwise chain in CuPy: generated CUDA C (a RawKernel, so NVRTC can check it without a GPU).

Every kernel is the same template: a grid-stride loop with 64-bit indexing, load, convert to float32, apply a
chain of `__device__` ops, convert back, store. The grid is sized per shape (`suite.kit.launch_shape.
elementwise_launch`): one element per thread up to a few waves of resident blocks, each thread looping beyond. Fused instantiates it with the whole chain (one source
per chain and dtype); unfused with one op per kernel (one source per op and dtype, shared between chains),
each reading the previous intermediate in the chain's dtype. Two scratch buffers alternate between the
unfused kernels: the traffic is the ledger's, the footprint two intermediates.

float16 is stored as raw 16-bit words and converted with the device snippets of `backends.cupy.device`; the
ops (the same snippets) use CUDA's accurate tanhf and expf (no fast-math), the same in both variants.
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
extern "C" __global__ void {name}(const {T}* __restrict__ x, {T}* __restrict__ y, long long n) {{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
        float v = load(x + i);
{body}
        store(y + i, v);
    }}
}}
"""


def chain_body(ops: tuple[str, ...], indent: str = " " * 8) -> str:
    """The statements applying `ops` to the float32 `v`, one line per op."""
    return "\n".join(f"{indent}v = op_{op}(v);" for op in ops)


def source(ops: tuple[str, ...], dtype: str) -> tuple[str, str]:
    """(CUDA source, kernel name) of the kernel applying `ops` to arrays of `dtype`."""
    name = f"chain_{dtype}_{'_'.join(ops)}"
    kernel_source = KERNEL.format(name=name, T=CTYPES[dtype], body=chain_body(ops))
    return CONVERSIONS + OPS_SOURCE + kernel_source, name


def _compiled(ops: tuple[str, ...], dtype: str, block: int) -> Any:
    """The kernel (compiled once per source: `build` caches), recorded for the resource report at `block`."""
    return build(*source(ops, dtype), threads=block)


def _launcher(steps: list[tuple[Any, Any, tuple[str, ...]]], n: int, opts: dict) -> Launcher:
    gpu, option = sm_device(), BACKEND.option(opts, "block")
    block, blocks = elementwise_launch(n, option, gpu)
    grid, size = (blocks,), np.int64(n)
    launches = [(_compiled(ops, np.dtype(y.dtype).name, block), (x, y, size)) for x, y, ops in steps]
    context = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for k, args in launches:
                k(grid, (block,), args)

    where = {"sms": gpu.sms, "sms_from": gpu.source}  # threads: the option or n, capped by n; the grid: n and SMs
    return Launch(launch, notes=launch_notes({"block": block}, grid, block_chosen_by(option), **where))


@kernel(scenario="elementwise_chain", backend="cupy", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    return _launcher([(inputs["x"], out, tuple(params["ops"]))], params["n"], opts)


@kernel(scenario="elementwise_chain", backend="cupy", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    ops = params["ops"]
    scratch = [TARGET.empty(out.shape, np.dtype(out.dtype).name) for _ in range(min(len(ops) - 1, 2))]
    srcs = [inputs["x"]] + [scratch[i % 2] for i in range(len(ops) - 1)]
    dsts = [*srcs[1:], out]
    return _launcher([(s, d, (op,)) for s, d, op in zip(srcs, dsts, ops, strict=True)], params["n"], opts)
