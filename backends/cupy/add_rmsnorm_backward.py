"""add_rmsnorm's training step in CuPy, fused and unfused: generated CUDA C (`add_rmsnorm_backward_kernels`), sized,
compiled, recorded and launched here (`scenarios.add_rmsnorm.backward` says what each variant saves and moves).

Fused: the forward is the forward's fused kernel that also stores each row's rstd; it keeps h (out[0]), rstd and
γ. The backward is two launches: a block per row block of `partial_rows(rows)` writing dx, dresidual and the
block's float32 partial row of dweight, then the partials summed in order into dweight on a grid of column chunks.

Unfused: the forward is the forward's unfused walk (the residual add, then the normalization family's rmsnorm
steps), keeping h, the row mean square ms and ĥ, which it writes anyway. The backward is five launches: dĥ =
dy[1]·γ (the normalization family's scale step), dweight's partials of dy[1]·ĥ on a (row blocks, chunks) grid,
their reduction, dms per row, and h's gradient into dx and dresidual. dĥ, dms and the partials are allocated
while a pass is prepared, so a launch neither allocates nor compiles.

The geometry (BLOCK, THREADS) is the normalization family's for the same row. Without a GPU every kernel is
compiled for sm_90 through NVRTC and recorded, and launching raises NotRunnable: the training kit builds the
backward before it runs the forward, so the backward's kernels are all on record.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import TARGET
from backends.cupy import add_rmsnorm_backward_kernels as bk
from backends.cupy.add_rmsnorm_kernels import add_source
from backends.cupy.normalization import _compiled, _launcher, _step, geometry
from backends.cupy.normalization_kernels import step_source
from scenarios.add_rmsnorm import ROW_STATS, STEPS
from scenarios.add_rmsnorm.backward import partial_rows
from suite.core.decomposition import walk
from suite.kit.launch import cdiv
from suite.kit.training import Pass, training

Step = tuple[Any, tuple[int, ...], tuple[Any, ...]]


def _pass(launches: list[Step], block: int, threads: int, opts: dict, **saved: Any) -> Pass:
    launch = _launcher(launches, block, threads, opts)
    return Pass(launch.run, saved=saved, notes=launch.notes)


def _geometry(h: Any, params: dict, opts: dict) -> tuple[int, int, int, int, str]:
    """(rows, cols, BLOCK, THREADS, dtype) of a case."""
    rows, cols = h.shape
    block, threads = geometry(cols, params, opts)
    return rows, cols, block, threads, np.dtype(h.dtype).name


def _reduce(partials: Any, dweight: Any, dtype: str, block: int, threads: int) -> Step:
    blocks, cols = partials.shape
    k = _compiled(bk.reduce_source(dtype, block, threads), threads)
    return k, (cdiv(cols, block),), (partials, dweight, np.int64(blocks), np.int64(cols))


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """h and y as the forward's fused kernel, and each row's rstd, which the backward reads."""
    rows, cols, block, threads, dtype = _geometry(y[0], params, opts)
    rstd = TARGET.empty((rows,), "float32")
    k = _compiled(bk.fused_forward_source(dtype, block, threads), threads)
    args = (inputs["x"], inputs["residual"], inputs["weight"], y[0], y[1], rstd, np.int64(cols))
    return _pass([(k, (rows,), args)], block, threads, opts, h=y[0], rstd=rstd, weight=inputs["weight"])


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One pass over h and dy writing dx, dresidual and the partials; then the partials' reduction."""
    h, dy = saved["h"], inputs["dy"]
    rows, cols, block, threads, dtype = _geometry(h, params, opts)
    partials = TARGET.empty((partial_rows(rows), cols), "float32")
    main = _compiled(bk.fused_backward_source(dtype, block, threads), threads)
    args = (h, saved["rstd"], saved["weight"], dy[0], dy[1], grads["dx"], grads["dresidual"], partials)
    launches = [
        (main, (partials.shape[0],), (*args, np.int64(rows), np.int64(cols))),
        _reduce(partials, grads["dweight"], dtype, block, threads),
    ]
    return _pass(launches, block, threads, opts)


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """The forward's unfused walk; h, ms and ĥ (written by it anyway) and γ kept."""
    rows, cols, block, threads, dtype = _geometry(y[0], params, opts)
    env = dict(inputs) | {"h": y[0], "y": y[1]}
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
    saved = {"h": y[0], "ms": env["ms"], "hhat": env["hhat"], "weight": inputs["weight"]}
    return _pass([add, *norm], block, threads, opts, **saved)


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """dĥ = dy[1]·γ; dweight's partials of dy[1]·ĥ and their reduction; dms per row; dx = dresidual = dy[0] +
    dĥ·r + dms·2h/cols."""
    h, hhat, ms, weight, dy = saved["h"], saved["hhat"], saved["ms"], saved["weight"], inputs["dy"]
    rows, cols, block, threads, dtype = _geometry(h, params, opts)
    dhhat, dms = TARGET.empty((rows, cols), dtype), TARGET.empty((rows,), "float32")
    partials = TARGET.empty((partial_rows(rows), cols), "float32")
    placeholder = TARGET.empty((1,), "float32")  # the scale step reads no statistic
    n, chunks = np.int64(cols), (rows, cdiv(cols, block))

    def kernel(source: Any) -> Any:
        return _compiled(source(dtype, block, threads), threads)

    scale = _compiled(step_source("scale", dtype, block, threads), threads)
    partial_grid = (partials.shape[0], cdiv(cols, block))
    launches = [
        (scale, chunks, (dy[1], placeholder, weight, weight, dhhat, n)),
        (kernel(bk.weight_partials_source), partial_grid, (dy[1], hhat, partials, np.int64(rows), n)),
        _reduce(partials, grads["dweight"], dtype, block, threads),
        (kernel(bk.statistic_grad_source), (rows,), (dhhat, h, ms, dms, n)),
        (kernel(bk.h_grad_source), chunks, (dy[0], dhhat, h, ms, dms, grads["dx"], grads["dresidual"], n)),
    ]
    return _pass(launches, block, threads, opts)


training(
    "add_rmsnorm",
    backend="cupy",
    device="cuda",
    like=lambda a: TARGET.empty(a.shape, str(a.dtype)),
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
