"""swiglu's training step in Triton: the forward that keeps what its backward reads, and the backward, fused and
unfused (`scenarios.swiglu.backward` says what each saves and moves).

The forwards are the forward module's own launches (`backends.triton.swiglu`): fused is its one fused kernel and
keeps only a and b; unfused writes silu(a) into s with the silu mode, keeps it, and multiplies it by b. The
backward is one elementwise kernel with two modes, so both variants compute silu′ from the same code: the fused
mode reads a, b and dy once, recomputes σ(a) and silu(a) in registers and writes da = dy·b·silu′(a) and
db = dy·silu(a); the silu mode is silu's own backward, da = ds·silu′(a). Unfused is autograd's three kernels: the
forward module's product mode twice (db = dy·s, then ds = dy·b into a temporary), then the silu mode. Everything
computes in float32 and stores in the case's dtype; BLOCK and num_warps are the elementwise chain's, as the
forward's.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.launch import chain_config, device
from backends.triton.record import record_triton
from backends.triton.swiglu import FUSED, MUL, SILU, _launcher, _swiglu
from suite.kit.launch import cdiv
from suite.kit.launch_shape import chosen_by, launch_notes
from suite.kit.training import Pass, training

GRADS, SILU_GRAD = 0, 1


@triton.jit
def _swiglu_backward(a_ptr, b_ptr, g_ptr, da_ptr, db_ptr, n, MODE: tl.constexpr, BLOCK: tl.constexpr):
    """MODE 0: da = g·b·silu′(a), db = g·silu(a) (g is dy); 1: da = g·silu′(a) (g is ds; b and db untouched)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    sig = 1.0 / (1.0 + tl.exp(-v))
    s = v * sig
    grad = sig + s * (1.0 - sig)
    if MODE == 0:
        tl.store(db_ptr + offs, (g * s).to(db_ptr.dtype.element_ty), mask=mask)
        g = g * tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(da_ptr + offs, (g * grad).to(da_ptr.dtype.element_ty), mask=mask)


def _check(arrays: dict[str, Any]) -> None:
    found = {k: str(t.dtype).removeprefix("torch.") for k, t in arrays.items()}
    if len(set(found.values())) != 1 or next(iter(found.values())) not in ("float32", "float16"):
        raise ValueError(f"triton swiglu training: {found}; needs one dtype of float32 or float16")


def _backward_launcher(steps: list[tuple[Any, tuple, int]], n: int, opts: dict) -> Pass:
    """Each step is (kernel, args, MODE): compiled and recorded now, launched in order by the returned pass."""
    config = chain_config(n, opts, device().sms)
    block, warps = config["block"], config["num_warps"]
    grid = (cdiv(n, block),)
    context = BACKEND.launch_stream(opts.get("stream"))
    for fn, args, mode in steps:
        compiled = fn.warmup(*args, n, MODE=mode, BLOCK=block, num_warps=warps, grid=grid)
        record_triton(fn, (*args, n), {"MODE": mode, "BLOCK": block}, warps, compiled=compiled)

    def run() -> None:
        with context():
            for fn, args, mode in steps:
                fn[grid](*args, n, MODE=mode, BLOCK=block, num_warps=warps)

    notes = launch_notes(config, grid, chosen_by(opts, ("block", "num_warps")), kernels=len(steps))
    return Pass(run, notes=notes)


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """The forward's fused kernel; a and b are all it keeps."""
    a, b = inputs["a"], inputs["b"]
    _check({"a": a, "b": b, "y": y})
    launch = _launcher([(a, b, y, FUSED)], y.numel(), opts)
    return Pass(launch.run, saved={"a": a, "b": b}, notes=launch.notes)


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One kernel: a, b, dy read once; σ and silu recomputed; da and db written once."""
    a, b, dy, da, db = saved["a"], saved["b"], inputs["dy"], grads["da"], grads["db"]
    _check({"a": a, "b": b, "dy": dy, "da": da, "db": db})
    return _backward_launcher([(_swiglu_backward, (a, b, dy, da, db), GRADS)], dy.numel(), opts)


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """silu(a) into s (allocated here, kept for the backward), then the product: the forward's two kernels."""
    a, b = inputs["a"], inputs["b"]
    _check({"a": a, "b": b, "y": y})
    s = a.new_empty(a.shape)
    launch = _launcher([(a, a, s, SILU), (s, b, y, MUL)], y.numel(), opts)
    return Pass(launch.run, saved={"a": a, "b": b, "s": s}, notes=launch.notes)


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """db = dy·s and ds = dy·b (the forward's product mode; ds a temporary allocated here), then
    da = ds·silu′(a): three launches."""
    a, b, s, dy, da, db = saved["a"], saved["b"], saved["s"], inputs["dy"], grads["da"], grads["db"]
    _check({"a": a, "b": b, "s": s, "dy": dy, "da": da, "db": db})
    ds = dy.new_empty(dy.shape)
    steps = [
        (_swiglu, (dy, s, db), MUL),
        (_swiglu, (dy, b, ds), MUL),
        (_swiglu_backward, (a, a, ds, da, da), SILU_GRAD),  # b and db unread in this mode
    ]
    return _backward_launcher(steps, dy.numel(), opts)


training(
    "swiglu",
    backend="triton",
    device="cuda",
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
