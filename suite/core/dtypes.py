"""The storage dtypes the suite sweeps, by name, and what each one's rounding is.

NumPy has float32 and float16 but no bfloat16; `ml_dtypes` (the bfloat16 of JAX and TensorFlow) registers one
with NumPy, so inputs are made, rounded and judged against the float64 reference in NumPy like the others, and
`np.dtype("bfloat16")` works in every process that imported this module. Importing it is what makes the name
known: `suite.core.scenario` and `suite.core.targets` do, so every family and backend sees it.

A target that has no bfloat16 arrays (NumPy kernels compiled by Numba, CuPy) says so through
`Target.dtype_refusal`, and its rows are `skipped` with that reason.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

DTYPES = ("float32", "float16", "bfloat16")
"""Every storage dtype a family may sweep, widest first."""


def finfo(dtype: str | np.dtype) -> ml_dtypes.finfo:
    """np.finfo for every dtype here (NumPy's refuses bfloat16)."""
    return ml_dtypes.finfo(np.dtype(dtype))


def eps(dtype: str | np.dtype) -> float:
    """Machine epsilon: 2^-23 (float32), 2^-10 (float16), 2^-7 (bfloat16)."""
    return float(finfo(dtype).eps)


def is_float(dtype: str | np.dtype) -> bool:
    """Whether the dtype is a floating type, bfloat16 included (its NumPy kind is 'V', not 'f')."""
    d = np.dtype(dtype)
    return np.issubdtype(d, np.floating) or d == np.dtype(ml_dtypes.bfloat16)
