"""The float16 codecs of the Numba CPU kernels are bit-exact against NumPy's own conversions.

Numba's CPU target has no float16, so CPU kernels convert half bits in the loop; a conversion that is off by
one ulp somewhere (ties, subnormals, the overflow edge, NaN payloads) would show up as a numerics difference
between backends that is not the kernel's fault. Every half is checked, and float32 values in bulk.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from backends.numba.ops import float_to_half, half_to_float


@njit
def _to_float(h: np.ndarray) -> np.ndarray:
    out = np.empty(h.size, np.float32)
    for i in range(h.size):
        out[i] = half_to_float(h[i])
    return out


@njit
def _to_half(f: np.ndarray) -> np.ndarray:
    out = np.empty(f.size, np.uint16)
    for i in range(f.size):
        out[i] = float_to_half(f[i])
    return out


def _numpy_half_bits(f: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return f.astype(np.float16).view(np.uint16)


def _assert_bits_equal(got: np.ndarray, want: np.ndarray, inputs: np.ndarray) -> None:
    bad = np.flatnonzero(got != want)
    shown = ", ".join(f"{inputs[i]:#x}: got {got[i]:#x}, want {want[i]:#x}" for i in bad[:8])
    assert bad.size == 0, f"{bad.size} of {got.size} conversions differ from NumPy ({shown})"


ALL_HALVES = np.arange(2**16, dtype=np.uint32).astype(np.uint16)


def test_every_half_to_float() -> None:
    got = _to_float(ALL_HALVES).view(np.uint32)
    want = ALL_HALVES.view(np.float16).astype(np.float32).view(np.uint32)
    _assert_bits_equal(got, want, ALL_HALVES)


def test_every_half_round_trips() -> None:
    """float_to_half(half_to_float(h)) == h for every half, NaN payloads and signed zeros included."""
    _assert_bits_equal(_to_half(_to_float(ALL_HALVES)), ALL_HALVES, ALL_HALVES)


def _ties_and_neighbours() -> np.ndarray:
    """The float32 halfway between every pair of adjacent finite halves, and the floats either side of it."""
    h = ALL_HALVES[(ALL_HALVES & 0x7C00) != 0x7C00]  # finite halves
    lo = h.view(np.float16).astype(np.float64)
    hi = (h + 1).astype(np.uint16).view(np.float16).astype(np.float64)  # the next half away from zero
    hi[np.abs(lo) == 65504.0] = np.copysign(65520.0, lo[np.abs(lo) == 65504.0])  # the tie with infinity
    mid = ((lo + hi) / 2).astype(np.float32)  # exact: a half has 11 significant bits
    bits = mid.view(np.uint32)
    return np.concatenate([bits, bits + 1, bits - 1]).view(np.float32)


EDGES = np.array(
    [
        *(0.0, -0.0, 1.0, 65504.0, 65519.996, 65520.0, 1e5, 3.4e38, np.inf, 2.0**-14, 6.1e-5, 5.96e-8, 1e-45),
        *(2.0**-24, 1.5 * 2.0**-24, 2.0**-25, 2.0**-25 * (1 + 2.0**-23), 2.0**-26),  # the subnormal edge
    ],
    dtype=np.float32,
)
NANS = np.array(
    [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7F801FFF, 0x7F802000, 0x7FFFFFFF, 0xFF812345, 0x7FA00000],
    dtype=np.uint32,
).view(np.float32)


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(_ties_and_neighbours(), id="ties"),
        pytest.param(np.concatenate([EDGES, -EDGES, NANS]), id="edges"),
        pytest.param(
            np.random.default_rng(1).integers(0, 2**32, 2**21, dtype=np.uint64).astype(np.uint32).view(np.float32),
            id="random-bits",
        ),
        pytest.param(
            (
                np.random.default_rng(2).choice([-1, 1], 2**21)
                * 2.0 ** np.random.default_rng(3).uniform(-27, 17, 2**21)
            ).astype(np.float32),
            id="half-range",
        ),
    ],
)
def test_float_to_half(values: np.ndarray) -> None:
    _assert_bits_equal(_to_half(values), _numpy_half_bits(values), values.view(np.uint32))
