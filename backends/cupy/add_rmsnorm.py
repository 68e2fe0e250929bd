"""add_rmsnorm in CuPy: generated CUDA C, one thread block per row fused (`add_rmsnorm_kernels`).

Unfused: the residual add on a (rows, cdiv(cols, BLOCK)) grid writes h = out[0], then the normalization
family's rmsnorm steps (its `_step`, sources and launcher, reused as they are) read h and write y = out[1]. The
geometry (BLOCK, THREADS) is the normalization family's for the same row, so the two families' kernels differ
only in what they compute.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import TARGET
from backends.cupy.add_rmsnorm_kernels import add_source, fused_source
from backends.cupy.normalization import _compiled, _launcher, _step, geometry
from scenarios.add_rmsnorm import ROW_STATS, STEPS
from suite.core.decomposition import walk
from suite.core.registry import Launcher, kernel
from suite.kit.launch import cdiv


@kernel(scenario="add_rmsnorm", backend="cupy", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    rows, cols = out.shape[1], out.shape[2]
    (block, threads), dtype = geometry(cols, params, opts), np.dtype(out.dtype).name
    k = _compiled(fused_source(dtype, block, threads), threads)
    args = (inputs["x"], inputs["residual"], inputs["weight"], out[0], out[1], np.int64(cols))
    return _launcher([(k, (rows,), args)], block, threads, opts)


@kernel(scenario="add_rmsnorm", backend="cupy", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    rows, cols = out.shape[1], out.shape[2]
    (block, threads), dtype = geometry(cols, params, opts), np.dtype(out.dtype).name
    env = dict(inputs) | {"h": out[0], "y": out[1]}
    placeholder = TARGET.empty((1,), "float32")
    steps = list(
        walk(
            STEPS,
            env,
            stats=ROW_STATS,
            stat=lambda: TARGET.empty((rows,), "float32"),
            matrix=lambda: TARGET.empty((rows, cols), dtype),
        )
    )
    add = (
        _compiled(add_source(dtype, block, threads), threads),
        (rows, cdiv(cols, block)),
        (env["x"], env["residual"], env["h"], np.int64(cols)),
    )
    norm = [_step(st, env, dtype, block, threads, placeholder) for st in steps[1:]]
    return _launcher([add, *norm], block, threads, opts)
