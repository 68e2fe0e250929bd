"""swiglu's training step on the host CPU with Numba: the forward that keeps what its backward reads, and the
backward, fused and unfused (`scenarios.swiglu.backward` says what each saves and moves).

Fused: the forward is the forward's one loop (nothing but a and b is kept); the backward is one parallel loop
that reads a, b and dy once, recomputes σ(a) and silu(a) in registers, and writes da and db. Unfused: the forward
writes silu(a) into s and keeps it; the backward is autograd's three kernels, db = dy · s and ds = dy · b (both
the forward module's product loop) and then silu's backward da = ds · silu′(a). Loops walk the flat arrays in
parallel chunks with the same branch-free exp as the forward, so they vectorise; halves travel as their bits.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import njit, prange

from backends.numba.on_cpu.arrays import storage
from backends.numba.on_cpu.swiglu import CHUNK, FASTMATH, _compiled, fused_kernel, mul_kernel, silu_kernel
from backends.numba.ops import ONE, VECTOR_CODECS, exp_float32
from suite.kit.training import Pass, training


@functools.cache
def fused_backward_kernel(dtype: str) -> Any:
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def swiglu_backward(a, b, dy, da, db):  # type: ignore[no-untyped-def]
        n = a.size
        for c in prange((n + CHUNK - 1) // CHUNK):
            lo = c * CHUNK
            hi = min(n, lo + CHUNK)
            ac, bc, gc, dac, dbc = a[lo:hi], b[lo:hi], dy[lo:hi], da[lo:hi], db[lo:hi]
            for j in range(hi - lo):
                v = load(ac[j])
                g = load(gc[j])
                sig = ONE / (ONE + exp_float32(-v))
                s = v * sig
                dbc[j] = store(g * s)
                dac[j] = store(g * load(bc[j]) * (sig + s * (ONE - sig)))

    return swiglu_backward


@functools.cache
def silu_backward_kernel(dtype: str) -> Any:
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def silu_backward(ds, a, da):  # type: ignore[no-untyped-def]
        n = a.size
        for c in prange((n + CHUNK - 1) // CHUNK):
            lo = c * CHUNK
            hi = min(n, lo + CHUNK)
            sc, ac, dac = ds[lo:hi], a[lo:hi], da[lo:hi]
            for j in range(hi - lo):
                v = load(ac[j])
                sig = ONE / (ONE + exp_float32(-v))
                dac[j] = store(load(sc[j]) * (sig + v * sig * (ONE - sig)))

    return silu_backward


def _dtype(arrays: dict[str, Any]) -> str:
    found = {k: str(a.dtype) for k, a in arrays.items()}
    if len(set(found.values())) != 1 or next(iter(found.values())) not in VECTOR_CODECS:
        raise ValueError(f"numba/cpu swiglu training: {found}; needs one dtype of {list(VECTOR_CODECS)}")
    return next(iter(found.values()))


def _flat(a: np.ndarray) -> np.ndarray:
    return storage(a).reshape(-1)  # a view: every buffer is contiguous


def fused_forward(inputs: dict[str, Any], y: np.ndarray, params: dict, opts: dict) -> Pass:
    """The forward's one loop; a and b are all it keeps."""
    dtype = _dtype({"a": inputs["a"], "b": inputs["b"], "y": y})
    a, b, out = _flat(inputs["a"]), _flat(inputs["b"]), _flat(y)
    run = _compiled(fused_kernel(dtype), a, b, out)
    return Pass(lambda: run(a, b, out), saved={"a": inputs["a"], "b": inputs["b"]})


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One loop: a, b, dy read once; σ and silu recomputed; da and db written once."""
    dtype = _dtype({"a": saved["a"], "b": saved["b"], "dy": inputs["dy"], **grads})
    args = tuple(_flat(t) for t in (saved["a"], saved["b"], inputs["dy"], grads["da"], grads["db"]))
    run = _compiled(fused_backward_kernel(dtype), *args)
    return Pass(lambda: run(*args))


def unfused_forward(inputs: dict[str, Any], y: np.ndarray, params: dict, opts: dict) -> Pass:
    """silu(a) into s (allocated here, kept for the backward), then the product."""
    dtype = _dtype({"a": inputs["a"], "b": inputs["b"], "y": y})
    s = np.empty_like(inputs["a"])
    a, b, sf, out = _flat(inputs["a"]), _flat(inputs["b"]), _flat(s), _flat(y)
    first, second = _compiled(silu_kernel(dtype), a, sf), _compiled(mul_kernel(dtype), sf, b, out)

    def run() -> None:
        first(a, sf)
        second(sf, b, out)

    return Pass(run, saved={"a": inputs["a"], "b": inputs["b"], "s": s})


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """db = dy · s; ds = dy · b into a temporary (allocated here); da = ds · silu′(a): three launches."""
    dtype = _dtype({"a": saved["a"], "b": saved["b"], "s": saved["s"], "dy": inputs["dy"], **grads})
    a, b, s, dy = (_flat(t) for t in (saved["a"], saved["b"], saved["s"], inputs["dy"]))
    da, db = _flat(grads["da"]), _flat(grads["db"])
    ds = np.empty_like(dy)
    product = _compiled(mul_kernel(dtype), dy, s, db)
    silu_grad = _compiled(silu_backward_kernel(dtype), ds, a, da)

    def run() -> None:
        product(dy, s, db)
        product(dy, b, ds)
        silu_grad(ds, a, da)

    return Pass(run)


training(
    "swiglu",
    backend="numba",
    device="cpu",
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
