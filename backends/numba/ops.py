"""The elementwise ops as float32 scalar functions that both Numba targets compile, and float16 storage codecs.

One definition serves `@njit` and `@cuda.jit` alike (`register_jitable`), so the CPU and CUDA kernels, fused
and unfused, run literally the same op code. Constants are NumPy float32 globals: Numba freezes globals as
typed constants, and a bare Python float would promote the arithmetic to float64.

Numba's CPU target has no float16 type, so CPU kernels see half-precision arrays as uint16 and convert in the
kernel: `half_to_float` and `float_to_half` reproduce NumPy's own conversion bit for bit (round to nearest
even, subnormals, infinities, NaN payloads).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from numba import types
from numba.extending import intrinsic, register_jitable

from scenarios.elementwise_chain import GELU_A, GELU_C

ZERO, HALF, ONE = np.float32(0.0), np.float32(0.5), np.float32(1.0)
SCALE, SHIFT = np.float32(1.25), np.float32(0.5)
C, A = np.float32(GELU_C), np.float32(GELU_A)


@register_jitable
def scale(v: float) -> float:
    return SCALE * v


@register_jitable
def shift(v: float) -> float:
    return v + SHIFT


@register_jitable
def relu(v: float) -> float:
    return ZERO if v < ZERO else v  # NaN passes through, as with np.maximum


@register_jitable
def square(v: float) -> float:
    return v * v


@register_jitable
def tanh(v: float) -> float:
    return math.tanh(v)


@register_jitable
def sigmoid(v: float) -> float:
    return ONE / (ONE + math.exp(-v))


@register_jitable
def silu(v: float) -> float:
    return v * sigmoid(v)


@register_jitable
def gelu(v: float) -> float:
    return HALF * v * (ONE + math.tanh(C * (v + A * v * v * v)))


OPS: dict[str, Callable[[float], float]] = {
    "scale": scale,
    "shift": shift,
    "relu": relu,
    "square": square,
    "tanh": tanh,
    "sigmoid": sigmoid,
    "silu": silu,
    "gelu": gelu,
}


@functools.cache
def chain(ops: tuple[str, ...]) -> Callable[[float], float]:
    """v -> op_k(...op_1(v)): one jitable function, the head op composed with the chain of the rest.

    A one-op chain is the op itself, so an unfused kernel and a fused one run the same code.
    """
    if not ops:
        raise ValueError("an op chain needs at least one op")
    head = OPS[ops[0]]
    if len(ops) == 1:
        return head
    tail = chain(ops[1:])

    @register_jitable
    def composed(v: float) -> float:
        return tail(head(v))

    return composed


@register_jitable
def load_float32(v: float) -> float:
    return np.float32(v)


@register_jitable
def store_float32(v: float) -> float:
    return v


# float16 storage on the CPU target ------------------------------------------------------------------------


def _bitcast(to: types.Type) -> Callable:
    """The codegen of a same-width reinterpretation of a scalar's bits as type `to`."""

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(args[0], context.get_value_type(to))

    return codegen


@intrinsic
def _float_from_bits(typingctx: object, bits: types.Type) -> tuple | None:
    """Reinterpret a 32-bit integer as float32 (the payload of a NaN survives, unlike any arithmetic)."""
    if isinstance(bits, types.Integer) and bits.bitwidth == 32:
        return types.float32(bits), _bitcast(types.float32)
    return None


@intrinsic
def _bits_from_float(typingctx: object, value: types.Type) -> tuple | None:
    """Reinterpret a float32 as its uint32 bit pattern."""
    if value == types.float32:
        return types.uint32(value), _bitcast(types.uint32)
    return None


HALF_ULP = np.float32(2.0**-24)
"""Value of the last bit of a subnormal half: a subnormal with significand s is exactly s · 2⁻²⁴."""


@register_jitable
def half_to_float(h: int) -> float:
    """IEEE binary16 bits -> float32, exact (every half is a float32)."""
    h = np.int64(h)
    sign = (h & 0x8000) << 16
    exp = h & 0x7C00
    sig = h & 0x03FF
    if exp == 0:  # zero or subnormal: exact in float32 arithmetic
        mag = np.float32(sig) * HALF_ULP
        return -mag if sign else mag
    if exp == 0x7C00:  # infinity or NaN, payload kept
        return _float_from_bits(np.uint32(sign | 0x7F800000 | (sig << 13)))
    return _float_from_bits(np.uint32(sign | (((h & 0x7FFF) + 0x1C000) << 13)))  # rebias 15 -> 127


@register_jitable
def float_to_half(v: float) -> int:
    """float32 -> IEEE binary16 bits, round to nearest even; the algorithm of NumPy's npy_floatbits_to_halfbits."""
    f = np.int64(_bits_from_float(np.float32(v)))
    sign = (f >> 16) & 0x8000
    f_exp = f & 0x7F800000
    f_sig = f & 0x007FFFFF
    if f_exp >= 0x47800000:  # overflow to infinity, or infinity / NaN
        if f_exp == 0x7F800000 and f_sig != 0:
            payload = f_sig >> 13
            return np.uint16(sign | 0x7C00 | (payload if payload != 0 else 1))  # a NaN must stay a NaN
        return np.uint16(sign | 0x7C00)
    if f_exp <= 0x38000000:  # a subnormal half, or signed zero
        if f_exp < 0x33000000:
            return np.uint16(sign)
        sig = (0x00800000 + f_sig) >> (113 - (f_exp >> 23))
        # Ties go to even; the bits shifted out above (at most 11) must be zero for a tie.
        if (sig & 0x3FFF) != 0x1000 or (f & 0x7FF) != 0:
            sig += 0x1000
        return np.uint16(sign + (sig >> 13))  # a carry into the exponent is the correct result
    h_exp = (f_exp - 0x38000000) >> 13
    if (f_sig & 0x3FFF) != 0x1000:  # round half to even
        f_sig += 0x1000
    return np.uint16(sign + h_exp + (f_sig >> 13))  # a carry may reach the exponent, up to infinity


CODECS: dict[str, tuple[Callable, Callable]] = {
    "float32": (load_float32, store_float32),
    "float16": (half_to_float, float_to_half),
}
"""dtype -> (load, store) between the stored element and the float32 the ops compute in (CPU target)."""
