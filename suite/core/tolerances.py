"""The limits a family's tolerance is held within: per storage dtype, a floor and a ceiling.

A family derives its tolerance from the case itself (most: four times the error the unfused decomposition makes
when NumPy does it in the case's storage precision) and clips it to its `Tolerance`. The floor is a few units in
the last place of the stored result, where a maximum over few elements is a noisy measure; the ceiling is where
storage precision can no longer be the excuse. Both are written for float32 and float16; bfloat16's default to
float16's scaled by the ratio of their epsilons (2⁻⁷ / 2⁻¹⁰ = 8), the same number of its units in the last place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from suite.core import dtypes


def per_dtype(float32: float, float16: float, bfloat16: float | None = None) -> dict[str, float]:
    """A limit for every dtype of DTYPES; bfloat16's, where not given, is float16's in bfloat16's units."""
    scaled = float16 * dtypes.eps("bfloat16") / dtypes.eps("float16")
    return {"float32": float32, "float16": float16, "bfloat16": scaled if bfloat16 is None else bfloat16}


FLOOR = per_dtype(1e-5, 2e-3)
"""The usual floor: a few units in the last place of a stored float32 or half-precision result."""


@dataclass(frozen=True)
class Tolerance:
    """A family's floor and ceiling per dtype (a number: the same for every dtype)."""

    floor: Mapping[str, float] | float = field(default_factory=lambda: FLOOR)
    ceiling: Mapping[str, float] | float = math.inf

    def __post_init__(self) -> None:
        for side in ("floor", "ceiling"):
            value = getattr(self, side)
            limits = dict.fromkeys(dtypes.DTYPES, float(value)) if isinstance(value, int | float) else dict(value)
            if set(limits) != set(dtypes.DTYPES):
                raise ValueError(f"Tolerance {side} needs a limit for each of {', '.join(dtypes.DTYPES)}")
            object.__setattr__(self, side, limits)
        if any(self.floor[d] > self.ceiling[d] for d in dtypes.DTYPES):
            raise ValueError(f"Tolerance floor {self.floor} exceeds its ceiling {self.ceiling}")

    def clip(self, dtype: str, derived: float) -> float:
        """`derived` within this dtype's floor and ceiling (NaN stays NaN: a tolerance nothing passes)."""
        return float(np.clip(derived, self.floor[dtype], self.ceiling[dtype]))
