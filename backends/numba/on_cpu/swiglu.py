"""swiglu on the host CPU with Numba: one parallel loop fused, against silu into a temporary and a product.

Every variant walks the flat (contiguous) arrays in parallel blocks of elements and uses the same silu,
v / (1 + exp(−v)) with `exp_float32` (branch-free, so LLVM vectorises the loop; libm's expf would leave it
scalar and compute-bound). The fused loop reads a and b and stores y; unfused, the silu loop stores s in the
case's dtype and the product loop reads it back. Halves travel as their uint16 bits, converted in the loops
(`VECTOR_CODECS`); ordinary stores (write-allocate), as the ledger's CPU store model assumes.
"""

from __future__ import annotations

import functools
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.on_cpu.arrays import storage
from backends.numba.ops import ONE, VECTOR_CODECS, exp_float32
from suite.core.registry import Launcher, kernel

FASTMATH = {"contract"}
"""FMA only: no reduction to reassociate, and no `nnan`/`ninf` (a NaN must stay a NaN)."""
CHUNK = 1 << 14
"""Elements a parallel iteration takes: 64 KiB of float32 per stream, long loops with few iterations to schedule."""


@register_jitable
def silu(v: float) -> float:
    return v / (ONE + exp_float32(-v))


@functools.cache
def fused_kernel(dtype: str) -> Any:
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def swiglu_fused(a, b, y):  # type: ignore[no-untyped-def]
        n = a.size
        for c in prange((n + CHUNK - 1) // CHUNK):
            lo = c * CHUNK
            hi = min(n, lo + CHUNK)
            ac, bc, yc = a[lo:hi], b[lo:hi], y[lo:hi]
            for j in range(hi - lo):
                yc[j] = store(silu(load(ac[j])) * load(bc[j]))

    return swiglu_fused


@functools.cache
def silu_kernel(dtype: str) -> Any:
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def silu_map(a, s):  # type: ignore[no-untyped-def]
        n = a.size
        for c in prange((n + CHUNK - 1) // CHUNK):
            lo = c * CHUNK
            hi = min(n, lo + CHUNK)
            ac, sc = a[lo:hi], s[lo:hi]
            for j in range(hi - lo):
                sc[j] = store(silu(load(ac[j])))

    return silu_map


@functools.cache
def mul_kernel(dtype: str) -> Any:
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH)
    def product(s, b, y):  # type: ignore[no-untyped-def]
        n = s.size
        for c in prange((n + CHUNK - 1) // CHUNK):
            lo = c * CHUNK
            hi = min(n, lo + CHUNK)
            sc, bc, yc = s[lo:hi], b[lo:hi], y[lo:hi]
            for j in range(hi - lo):
                yc[j] = store(load(sc[j]) * load(bc[j]))

    return product


def _flat(inputs: dict[str, Any], out: np.ndarray) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    dtype = str(out.dtype)
    if dtype not in VECTOR_CODECS or any(a.dtype != out.dtype for a in inputs.values()):
        found = {k: str(a.dtype) for k, a in inputs.items()}
        raise ValueError(f"numba/cpu swiglu: inputs {found} -> out {dtype}; needs one of {list(VECTOR_CODECS)}")
    a, b, y = (storage(v).reshape(-1) for v in (inputs["a"], inputs["b"], out))  # views: all are contiguous
    return dtype, a, b, y


def _compiled(dispatcher: Any, *args: Any) -> Any:
    """The dispatcher, compiled now for exactly these arguments so that no launch compiles."""
    dispatcher.compile(tuple(numba.typeof(x) for x in args))
    return dispatcher


@kernel(scenario="swiglu", backend="numba", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> Launcher:
    """One loop: a and b read once, y written once."""
    dtype, a, b, y = _flat(inputs, out)
    run = _compiled(fused_kernel(dtype), a, b, y)

    def launch() -> None:
        run(a, b, y)

    return launch


@kernel(scenario="swiglu", backend="numba", variant="unfused", device="cpu")
def unfused(inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> Launcher:
    """silu(a) into a temporary in the case's dtype, allocated here; then the product."""
    dtype, a, b, y = _flat(inputs, out)
    s = np.empty_like(a)
    first, second = _compiled(silu_kernel(dtype), a, s), _compiled(mul_kernel(dtype), s, b, y)

    def launch() -> None:
        first(a, s)
        second(s, b, y)

    return launch
