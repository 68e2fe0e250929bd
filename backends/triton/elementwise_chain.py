"""Elementwise chain in Triton: one kernel, specialised per chain of ops; fused and unfused differ only there.

Fused launches it once with the whole chain: load x, every op in float32 registers, store y. Unfused launches
it once per op with a one-op chain, each reading the previous intermediate (stored in the chain's dtype) and
writing the next; two scratch buffers alternate, so the traffic is the ledger's while the footprint stays at
two intermediates. Offsets are 64-bit: with n near 2**31 the last block's 32-bit offsets would wrap.
BLOCK and num_warps come from n (`backends.triton.launch.chain_config`) unless the options set them; the
launcher's notes record them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.launch import chain_config, device
from backends.triton.ops import apply_chain, codes
from backends.triton.record import record_triton
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch import cdiv
from suite.kit.launch_shape import chosen_by, launch_notes


@triton.jit
def _chain_kernel(x_ptr, y_ptr, n, CHAIN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    v = apply_chain(v, CHAIN)
    tl.store(y_ptr + offs, v.to(y_ptr.dtype.element_ty), mask=mask)


def _launcher(steps: list[tuple[Any, Any, tuple[int, ...]]], n: int, opts: dict) -> Launcher:
    """Compile every step now (so the first timed call does not) and return a closure that only launches."""
    config = chain_config(n, opts, device().sms)
    block, num_warps = config["block"], config["num_warps"]
    grid = (cdiv(n, block),)
    context: Callable[[], contextlib.AbstractContextManager] = BACKEND.launch_stream(opts.get("stream"))
    for x, y, chain in steps:  # compiles without launching (a no-op in the interpreter)
        compiled = _chain_kernel.warmup(x, y, n, CHAIN=chain, BLOCK=block, num_warps=num_warps, grid=grid)
        record_triton(_chain_kernel, (x, y, n), {"CHAIN": chain, "BLOCK": block}, num_warps, compiled=compiled)

    def launch() -> None:
        with context():
            for x, y, chain in steps:
                _chain_kernel[grid](x, y, n, CHAIN=chain, BLOCK=block, num_warps=num_warps)

    return Launch(launch, notes=launch_notes(config, grid, chosen_by(opts, ("block", "num_warps"))))


@kernel(scenario="elementwise_chain", backend="triton", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    return _launcher([(inputs["x"], out, codes(params["ops"]))], params["n"], opts)


@kernel(scenario="elementwise_chain", backend="triton", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    ops = params["ops"]
    scratch = [out.new_empty(out.shape) for _ in range(min(len(ops) - 1, 2))]
    srcs = [inputs["x"]] + [scratch[i % 2] for i in range(len(ops) - 1)]
    dsts = [*srcs[1:], out]
    return _launcher([(s, d, codes([op])) for s, d, op in zip(srcs, dsts, ops, strict=True)], params["n"], opts)
