"""swiglu in Triton: one elementwise kernel with three modes — fused silu(a)·b, silu alone, the product alone.

One template keeps the variants' code identical but for fusion: the fused mode loads a and b and stores y; the
unfused variant launches the silu mode (a -> s, stored in the case's dtype) and then the product mode (s, b -> y).
silu is v / (1 + exp(−v)) in float32 in every mode. BLOCK and num_warps are the elementwise chain's
(`launch.chain_config`: the vector-add tutorial's 1024 elements and 4 warps, smaller blocks for small n).
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.launch import chain_config, device
from backends.triton.record import record_triton
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch import cdiv
from suite.kit.launch_shape import chosen_by, launch_notes

FUSED, SILU, MUL = 0, 1, 2


@triton.jit
def _swiglu(p_ptr, q_ptr, y_ptr, n, MODE: tl.constexpr, BLOCK: tl.constexpr):
    """MODE 0: y = silu(p)·q; 1: y = silu(p) (q unread); 2: y = p·q."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(p_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if MODE != 2:
        v = v / (1.0 + tl.exp(-v))
    if MODE != 1:
        v = v * tl.load(q_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, v.to(y_ptr.dtype.element_ty), mask=mask)


def _launcher(steps: list[tuple[Any, Any, Any, int]], n: int, opts: dict) -> Launcher:
    """Compile every step now (a no-op in the interpreter) and return a closure that only launches."""
    config = chain_config(n, opts, device().sms)
    block, warps = config["block"], config["num_warps"]
    grid = (cdiv(n, block),)
    context = BACKEND.launch_stream(opts.get("stream"))
    for p, q, y, mode in steps:
        compiled = _swiglu.warmup(p, q, y, n, MODE=mode, BLOCK=block, num_warps=warps, grid=grid)
        record_triton(_swiglu, (p, q, y, n), {"MODE": mode, "BLOCK": block}, warps, compiled=compiled)

    def launch() -> None:
        with context():
            for p, q, y, mode in steps:
                _swiglu[grid](p, q, y, n, MODE=mode, BLOCK=block, num_warps=warps)

    return Launch(launch, notes=launch_notes(config, grid, chosen_by(opts, ("block", "num_warps")), kernels=len(steps)))


@kernel(scenario="swiglu", backend="triton", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    return _launcher([(inputs["a"], inputs["b"], out, FUSED)], out.numel(), opts)


@kernel(scenario="swiglu", backend="triton", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    a, b = inputs["a"], inputs["b"]
    s = out.new_empty(out.shape)
    return _launcher([(a, a, s, SILU), (s, b, out, MUL)], out.numel(), opts)
