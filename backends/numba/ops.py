"""The elementwise ops as float32 scalar functions that both Numba targets compile, and float16 storage codecs.

One definition serves `@njit` and `@cuda.jit` alike (`register_jitable`), so the CPU and CUDA kernels, fused
and unfused, run literally the same op code; on the CPU, math mode "fast" (`backends.numba.op_tables`) swaps libm's tanh and exp
for vectorisable float32 ones. Constants are NumPy float32 globals: Numba freezes globals as
typed constants, and a bare Python float would promote the arithmetic to float64.

Numba's CPU target has no float16 type, so CPU kernels see half-precision arrays as uint16 and convert in the
kernel: `half_to_float` and `float_to_half` reproduce NumPy's own conversion bit for bit (round to nearest
even, subnormals, infinities, NaN payloads).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from llvmlite import ir
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
"""The ops with libm's tanh and exp (math="libm"): what both targets compile (libdevice on CUDA)."""


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


# Row normalization on the CPU target: a vectorisable exp and max ----------------------------------------------

EXP_HI = np.float32(88.3762626647949)
"""Largest argument whose 2ⁿ scale is a normal float32 (n = 127); above it exp_float32 returns +inf."""
EXP_LO = np.float32(-87.3365478515625)
"""Smallest argument with a normal 2ⁿ (n = −126); below it the result, under the smallest normal, is 0."""
LOG2E = np.float32(1.4426950408889634)
LN2_HI, LN2_LO = np.float32(0.693359375), np.float32(-2.12194440e-4)
"""Cody–Waite split of ln 2: LN2_HI has 9 significant bits, so n·LN2_HI is exact for |n| ≤ 128."""
EXP_P = tuple(
    np.float32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1)
)
"""Cephes expf: exp(r) ≈ 1 + r + r²·(1/2 + r·P(r)) on |r| ≤ ln2/2."""
EXP_P0, EXP_P1, EXP_P2, EXP_P3, EXP_P4 = EXP_P
POS_INF, NEG_INF = np.float32(np.inf), np.float32(-np.inf)
ROUNDER = np.float32(1.5 * 2.0**23)
"""Added to |t| < 2²², it leaves t rounded to the nearest integer n, held in the sum's low mantissa bits as
2²² + n (two's complement for n < 0): those bits shifted left by 23 are n in the exponent field. Subtracting it
again gives n exactly, as a float."""
EXP_BIAS_BITS = np.int32(127 << 23)
"""The float32 exponent bias in the exponent field: added to n's shifted bits it makes 2ⁿ."""


@register_jitable
def exp_float32(x: float) -> float:
    """exp(x) in float32 within 2 ulp for x ≤ 88.37, without libm and without branches, so a loop calling it
    vectorises (LLVM turns the conditional expressions into selects). Range reduction x = n·ln2 + r with
    |r| ≤ ln2/2, a degree-7 polynomial for exp(r), and 2ⁿ built from its exponent bits. Results below the
    smallest normal flush to 0; NaN stays NaN.

    n is rounded by adding `ROUNDER` rather than by floor and a float-to-int conversion: the sum's low bits
    hold n, so 2ⁿ is the sum's bits shifted into the exponent field, and a rounding and a conversion become one
    subtraction. Softmax's loop is bound by the vector units when its rows sit in cache; this and its max over
    the floats' bits (`normalization_blocks.key`) made it 15% faster there.
    """
    v = EXP_HI if x > EXP_HI else x
    v = EXP_LO if v < EXP_LO else v
    t = v * LOG2E + ROUNDER
    n = t - ROUNDER
    r = v - n * LN2_HI
    r = r - n * LN2_LO
    p = (((EXP_P0 * r + EXP_P1) * r + EXP_P2) * r + EXP_P3) * r + EXP_P4
    p = (p * r + HALF) * r * r + r + ONE
    e = p * _float_from_bits(np.int32((np.int32(_bits_from_float(t)) << np.int32(23)) + EXP_BIAS_BITS))
    e = POS_INF if x > EXP_HI else e
    return ZERO if x < EXP_LO else e


@intrinsic
def fmax32(typingctx: object, a: types.Type, b: types.Type) -> tuple | None:
    """max of two float32 as LLVM's maxnum (a NaN operand yields the other one), which LLVM vectorises as a
    reduction; a conditional expression is not recognised as one without no-NaN fast-math flags."""
    if a == types.float32 and b == types.float32:

        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            fnty = ir.FunctionType(ir.FloatType(), [ir.FloatType(), ir.FloatType()])
            return builder.call(builder.module.declare_intrinsic("llvm.maxnum", [ir.FloatType()], fnty), args)

        return types.float32(a, b), codegen
    return None


@intrinsic
def _half_bits_to_float(typingctx: object, bits: types.Type) -> tuple | None:
    """binary16 bits -> float32 as LLVM's fpext from half: one vcvtph2ps per vector with F16C."""
    if isinstance(bits, types.Integer) and bits.bitwidth == 16:

        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

        return types.float32(bits), codegen
    return None


@intrinsic
def _float_to_half_bits(typingctx: object, value: types.Type) -> tuple | None:
    """float32 -> binary16 bits as LLVM's fptrunc to half (round to nearest even): vcvtps2ph with F16C."""
    if value == types.float32:

        def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
            return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

        return types.uint16(value), codegen
    return None


def _host_has_f16c() -> bool:
    """Whether Numba compiles for this host and it converts halves in hardware (else LLVM would call libgcc)."""
    from llvmlite import binding

    from backends.numba.full_width import builds_for_host

    if not builds_for_host():
        return False
    return bool(binding.get_host_cpu_features().get("f16c", False))


HARDWARE_HALF = _host_has_f16c()
VECTOR_CODECS: dict[str, tuple[Callable, Callable]] = {
    "float32": CODECS["float32"],
    "float16": (_half_bits_to_float, _float_to_half_bits) if HARDWARE_HALF else CODECS["float16"],
}
"""CODECS for loops that should vectorise: with F16C the hardware's conversions, which agree with NumPy's bit
for bit on every non-NaN half (tests/test_normalization_kernels.py) and run ~6× faster than the branchy
software ones; a NaN stays a NaN, its payload may not. Without F16C, the software CODECS."""
