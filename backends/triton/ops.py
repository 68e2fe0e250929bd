"""The elementwise-chain ops as Triton device functions on float32, and how a chain of them is applied.

Triton cannot loop over a Python list at run time, so a chain is a `tl.constexpr` tuple of op codes: the
kernel unrolls it with `tl.static_range` and each step picks its op with a constexpr if/elif, which the
compiler resolves away. Every chain is its own specialisation of one kernel, so the fused kernel and the
unfused one-op kernels run exactly the same op code, and the same source works in the interpreter and in
the compiler (checked on Triton 3.6 and 3.9).

tanh is written with `exp` rather than libdevice's, which the interpreter lacks: an odd polynomial below
|v| = 0.55 (where the exp form would cancel) and 1 - 2e/(1+e), e = exp(-2|v|), above it, which never
overflows. Its relative error is about 2e-7 in float32 for any |v| (about 3 float32 epsilons).
"""

from __future__ import annotations

import triton
import triton.language as tl

from scenarios.elementwise_chain import OPS

CODES: dict[str, int] = {name: i for i, name in enumerate(OPS)}
"""Op name -> the code a chain carries; the order of the scenario's table, matched by the constants below."""

SCALE: tl.constexpr = tl.constexpr(CODES["scale"])
SHIFT: tl.constexpr = tl.constexpr(CODES["shift"])
RELU: tl.constexpr = tl.constexpr(CODES["relu"])
SQUARE: tl.constexpr = tl.constexpr(CODES["square"])
TANH: tl.constexpr = tl.constexpr(CODES["tanh"])
SIGMOID: tl.constexpr = tl.constexpr(CODES["sigmoid"])
SILU: tl.constexpr = tl.constexpr(CODES["silu"])
GELU: tl.constexpr = tl.constexpr(CODES["gelu"])

# tanh(v) = v + v·s·P(s), s = v², for |v| < 0.55: a Chebyshev fit of degree 4, truncation error < 5e-9.
T1: tl.constexpr = tl.constexpr(-0.33333332)
T2: tl.constexpr = tl.constexpr(0.13333118)
T3: tl.constexpr = tl.constexpr(-0.053910066)
T4: tl.constexpr = tl.constexpr(0.021312740)
T5: tl.constexpr = tl.constexpr(-0.0066157486)


def codes(ops: list[str] | tuple[str, ...]) -> tuple[int, ...]:
    """The constexpr chain for a list of op names."""
    return tuple(CODES[op] for op in ops)


@triton.jit
def tanh(v):
    a = tl.abs(v)
    s = v * v
    small = v + v * s * (T1 + s * (T2 + s * (T3 + s * (T4 + s * T5))))
    e = tl.exp(-2.0 * a)
    big = 1.0 - 2.0 * e / (1.0 + e)
    return tl.where(a < 0.55, small, tl.where(v < 0.0, -big, big))


@triton.jit
def sigmoid(v):
    return 1.0 / (1.0 + tl.exp(-v))


@triton.jit
def gelu(v):
    return 0.5 * v * (1.0 + tanh(0.7978845608 * (v + 0.044715 * v * v * v)))


@triton.jit
def apply_op(v, OP: tl.constexpr):
    """One op on float32 `v`; OP is resolved at compile time, so only its branch is emitted."""
    if OP == SCALE:
        v = 1.25 * v
    elif OP == SHIFT:
        v = v + 0.5
    elif OP == RELU:
        v = tl.maximum(v, 0.0)
    elif OP == SQUARE:
        v = v * v
    elif OP == TANH:
        v = tanh(v)
    elif OP == SIGMOID:
        v = sigmoid(v)
    elif OP == SILU:
        v = v * sigmoid(v)
    elif OP == GELU:
        v = gelu(v)
    return v


@triton.jit
def apply_chain(v, CHAIN: tl.constexpr):
    """Every op of the constexpr tuple CHAIN in order, unrolled."""
    for i in tl.static_range(len(CHAIN)):
        v = apply_op(v, CHAIN[i])
    return v
