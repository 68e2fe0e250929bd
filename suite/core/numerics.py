"""How outputs are judged: one relative-error metric, used against the float64 reference and between peers.

The error of an element is |out - ref| / max(|ref|, floor), with the floor at 1e-3 of the largest reference
magnitude (and never below the smallest normal of the output dtype): elements that cancel to nearly zero are
then judged against the scale of the result rather than against themselves. A NaN or an infinity where the
reference is finite (an unwritten, poisoned element) makes the error infinite.
"""

from __future__ import annotations

import numpy as np

from suite.core import dtypes

FLOOR = 1e-3
CHUNK = 1 << 14
"""Elements judged at a time: the float64 temporaries of a chunk stay in cache, so judging a 2^25-element output
costs a few passes over it instead of a dozen full-size arrays through memory (3-4× faster here)."""


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    """Max elementwise relative error of `out` against `ref` (both brought to float64)."""
    out, ref = np.asarray(out), np.asarray(ref)
    if out.shape != ref.shape:
        raise ValueError(f"output shape {out.shape} != reference shape {ref.shape}")
    if out.size == 0:
        return 0.0
    flat_out, flat_ref = out.reshape(-1), ref.reshape(-1)
    scale = max((_scale(flat_ref[i : i + CHUNK]) for i in range(0, flat_ref.size, CHUNK)), default=0.0)
    tiny = float(dtypes.finfo(out.dtype).tiny) if dtypes.is_float(out.dtype) else 0.0
    floor = max(FLOOR * scale, tiny, np.finfo(np.float64).tiny)
    worst = 0.0
    for i in range(0, flat_out.size, CHUNK):
        out64 = flat_out[i : i + CHUNK].astype(np.float64)
        ref64 = flat_ref[i : i + CHUNK].astype(np.float64)
        if (~np.isfinite(out64) & np.isfinite(ref64)).any():
            return float("inf")
        err = np.abs(out64 - ref64) / np.maximum(np.abs(ref64), floor)
        worst = max(worst, float(np.max(np.where(np.isfinite(err), err, 0.0))))
    return worst


def _scale(ref: np.ndarray) -> float:
    ref64 = np.abs(ref.astype(np.float64))
    return float(np.max(ref64[np.isfinite(ref64)], initial=0.0))


def unwritten(out: np.ndarray) -> int:
    """Elements still NaN after a run into a NaN-poisoned buffer (where the reference is finite)."""
    return int(np.count_nonzero(np.isnan(np.asarray(out, dtype=np.float64))))


def judge(out: np.ndarray, ref: np.ndarray, tol: float) -> tuple[float, str]:
    """Return (max_rel_err, reason); reason is empty when the output is within `tol`."""
    nan = int(np.count_nonzero(np.isnan(np.asarray(out, dtype=np.float64)) & np.isfinite(ref)))
    err = rel_err(out, ref)
    if nan:
        return err, f"{nan} of {out.size} elements unwritten or NaN"
    if not err <= tol:
        return err, f"max relative error {err:.3g} exceeds tolerance {tol:.3g}"
    return err, ""
