"""A case's output: one array (a forward pass), or several named ones (a backward pass writes dx, dweight, dbias).

Every stage that allocates, reads back, judges or compares an output goes through here, so that each of the
stages handles both forms the same way: a mapping is allocated and poisoned buffer by buffer, read back as a
mapping of host arrays, and judged output by output against its own reference and tolerance (the row keeps the
worst output's error and tolerance, measured by how close the error comes to its tolerance, and names every
output's in `extra.outputs`). Comparisons between outputs (peers, fresh buffer sets) take the largest relative
error over the names, so that a small dweight is never judged on the scale of a large dx.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from suite.core import numerics

Output = Any
"""An array (of any target), or a mapping of them by name."""


def allocate(target: Any, shape: tuple[int, ...] | Mapping[str, tuple[int, ...]], dtype: str) -> Output:
    """The output buffer(s) of `shape` on `target`, each poisoned (NaN where the dtype has it)."""
    if isinstance(shape, Mapping):
        return {name: allocate(target, each, dtype) for name, each in shape.items()}
    out = target.empty(tuple(shape), dtype)
    target.poison(out)
    return out


def empty(target: Any, shape: tuple[int, ...] | Mapping[str, tuple[int, ...]], dtype: str) -> Output:
    """As `allocate`, never written: buffers a compile-only build is handed (untouched pages cost nothing)."""
    if isinstance(shape, Mapping):
        return {name: target.empty(tuple(each), dtype) for name, each in shape.items()}
    return target.empty(tuple(shape), dtype)


def to_host(target: Any, out: Output) -> np.ndarray | dict[str, np.ndarray]:
    if isinstance(out, Mapping):
        return {name: np.asarray(target.to_host(a)) for name, a in out.items()}
    return np.asarray(target.to_host(out))


def each(out: Output, fn: Callable[[Any], Any]) -> Any:
    """`fn` of the array, or of each array of a mapping (a mapping back)."""
    return {name: fn(a) for name, a in out.items()} if isinstance(out, Mapping) else fn(out)


def first(out: Output) -> Any:
    """The array, or a mapping's first (a probe that needs one buffer of the output)."""
    return next(iter(out.values())) if isinstance(out, Mapping) else out


def nbytes(out: Output) -> int:
    return sum(int(a.nbytes) for a in out.values()) if isinstance(out, Mapping) else int(out.nbytes)


def rel_err(a: Output, b: Output) -> float:
    """The largest relative error of `a` against `b`, name by name for mappings."""
    if isinstance(a, Mapping):
        return max((numerics.rel_err(a[name], b[name]) for name in a), default=0.0)
    return numerics.rel_err(a, b)


def judge(out: Output, ref: Output, tol: float | Mapping[str, float]) -> tuple[float, str, float, dict[str, Any]]:
    """(max_rel_err, problem, tolerance, per output): for a mapping, each output judged against its own reference
    and tolerance; the error and tolerance returned are those of the output closest to (or furthest past) its
    tolerance, and `problem` names every output that fails."""
    if not isinstance(out, Mapping):
        err, problem = numerics.judge(out, ref, tol)
        return err, problem, float(tol), {}
    missing = sorted(set(ref) - set(out))
    if missing:
        return float("inf"), f"no output {', '.join(missing)}", 0.0, {}
    found = {name: (*numerics.judge(out[name], ref[name], tol[name]), tol[name]) for name in ref}
    worst = max(found, key=lambda n: found[n][0] / found[n][2] if found[n][2] > 0 else np.inf)
    problem = "; ".join(f"{name}: {why}" for name, (_, why, _) in found.items() if why)
    detail = {name: {"max_rel_err": float(err), "tolerance": float(t)} for name, (err, _, t) in found.items()}
    return float(found[worst][0]), problem, float(found[worst][2]), detail


def loosest(tol: float | Mapping[str, float]) -> float:
    """One tolerance for comparisons between implementations: the largest of a mapping's."""
    return float(max(tol.values())) if isinstance(tol, Mapping) else float(tol)
