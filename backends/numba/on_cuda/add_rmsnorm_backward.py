"""add_rmsnorm's training step on CUDA with Numba, fused and unfused; the same kernels run in the simulator
(`scenarios.add_rmsnorm.backward` says what each variant saves and moves, `add_rmsnorm_backward_kernels` has the
kernels).

Fused: the forward is the forward's fused kernel that also stores each row's rstd; it keeps h (out[0]), rstd
and γ. The backward is two launches: a block per row block of `partial_rows(rows)` writing dx, dresidual and
the block's float32 partial row of dweight, then the partials summed in order into dweight by a small kernel on
a grid of column chunks.

Unfused: the forward is the forward's unfused walk (its residual add, then the normalization family's rmsnorm
steps), keeping h, the row mean square ms and ĥ, which it writes anyway. The backward is five launches: dĥ =
dy[1]·γ (the normalization family's scale step), dweight's partials of dy[1]·ĥ on a (row blocks, chunks) grid,
their reduction, dms per row, and h's gradient into dx and dresidual. dĥ, dms and the partials are allocated
while a pass is prepared, so a launch neither allocates nor compiles.

The geometry (BLOCK, THREADS) is the normalization family's for the same row; every kernel is compiled for its
launch's arrays (on a GPU) and recorded for the resource report through the importable `_dispatcher`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import simulating, stream_arg
from backends.numba.on_cuda.add_rmsnorm import _check
from backends.numba.on_cuda.add_rmsnorm import _prepared as forward_prepared
from backends.numba.on_cuda.add_rmsnorm_backward_kernels import SOURCES
from backends.numba.on_cuda.normalization import _notes, _step, geometry
from backends.numba.record import record_numba
from scenarios.add_rmsnorm import ROW_STATS, STEPS
from scenarios.add_rmsnorm.backward import partial_rows
from scenarios.normalization import Step
from suite.core.decomposition import walk
from suite.kit.launch import cdiv
from suite.kit.training import Pass, training

try:
    from numba import cuda
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

SCALE_BACKWARD = Step("scale backward", "scale", ("dy1", "weight"), "dhhat", 1)
"""dĥ = dy[1]·γ: the forward's scale step applied to dy[1], run by the normalization family's step kernel."""


@functools.cache
def _dispatcher(name: str, block: int, threads: int) -> Any:
    """The `cuda.jit` dispatcher of one kernel (importable: the resource report rebuilds it), bounded to blocks of
    `threads` (as CuPy's `__launch_bounds__(THREADS, 1)`): unbounded, ptxas gave the fused backward 96 registers
    a thread, more than a block of 1024 threads can have, and the launch would fail. The simulator takes no
    bounds."""
    source = SOURCES[name](block, threads)
    return cuda.jit(source) if simulating() else cuda.jit(source, launch_bounds=(threads, 1))


def _prepared(
    name: str, block: int, threads: int, grid: tuple[int, ...], stream: Any, args: tuple
) -> Callable[[], None]:
    """Kernel `name` compiled (on a GPU) and recorded for `args`; the closure only launches it."""
    key = (name, block, threads)
    dispatcher = _dispatcher(*key)
    compiled = None if simulating() else dispatcher.compile(tuple(numba.typeof(a) for a in args))
    record_numba((__name__, "_dispatcher", key), args, threads, name=f"add_rmsnorm {name}", compiled=compiled)

    def launch() -> None:
        dispatcher[grid, threads, stream](*args)  # configured at each launch (the simulator keeps the last)

    return launch


def _pass(launches: list[Callable[[], None]], block: int, threads: int, grid: tuple, opts: dict, **saved: Any) -> Pass:
    def run() -> None:
        for launch in launches:
            launch()

    return Pass(run, saved=saved, notes=_notes(block, threads, grid, len(launches), opts))


def _partials(rows: int, cols: int) -> Any:
    """dweight's float32 partial rows, one a row block."""
    return cuda.device_array((partial_rows(rows), cols), dtype=np.float32)


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """h and y as the forward's fused kernel, and each row's rstd, which the backward reads."""
    _check({n: inputs[n] for n in ("x", "residual", "weight")}, y)
    rows, cols = y.shape[1], y.shape[2]
    (block, threads), stream = geometry(cols, params, opts), stream_arg(opts.get("stream"))
    rstd = cuda.device_array(rows, dtype=np.float32)
    args = (inputs["x"], inputs["residual"], inputs["weight"], y[0], y[1], rstd)
    launch = _prepared("fused forward", block, threads, (rows,), stream, args)
    return _pass([launch], block, threads, (rows,), opts, h=y[0], rstd=rstd, weight=inputs["weight"])


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One pass over h and dy writing dx, dresidual and the partials; then the partials' reduction."""
    h, dy = saved["h"], inputs["dy"]
    rows, cols = h.shape
    (block, threads), stream = geometry(cols, params, opts), stream_arg(opts.get("stream"))
    partials = _partials(rows, cols)
    main = (h, saved["rstd"], saved["weight"], dy[0], dy[1], grads["dx"], grads["dresidual"], partials)
    grid = (partials.shape[0],)
    launches = [
        _prepared("fused backward", block, threads, grid, stream, main),
        _prepared("reduce", block, threads, (cdiv(cols, block),), stream, (partials, grads["dweight"])),
    ]
    return _pass(launches, block, threads, grid, opts)


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """The forward's unfused walk; h, ms and ĥ (written by it anyway) and γ kept."""
    _check({n: inputs[n] for n in ("x", "residual", "weight")}, y)
    rows, cols = y.shape[1], y.shape[2]
    (block, threads), stream = geometry(cols, params, opts), stream_arg(opts.get("stream"))
    env = dict(inputs) | {"h": y[0], "y": y[1]}
    placeholder = cuda.device_array(1, dtype=np.float32)
    steps = list(
        walk(
            STEPS,
            env,
            stats=ROW_STATS,
            stat=lambda: cuda.device_array(rows, dtype=np.float32),
            matrix=lambda: cuda.device_array((rows, cols), dtype=y.dtype),
        )
    )
    add_args = (env["x"], env["residual"], env["h"])
    add = forward_prepared(
        ("unfused", block, threads), (rows, cdiv(cols, block)), threads, stream, add_args, "residual add"
    )
    launches = [add, *(_step(st, env, block, threads, stream, placeholder) for st in steps[1:])]
    saved = {"h": y[0], "ms": env["ms"], "hhat": env["hhat"], "weight": inputs["weight"]}
    return _pass(launches, block, threads, (rows,), opts, **saved)


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """dĥ = dy[1]·γ; dweight's partials of dy[1]·ĥ and their reduction; dms per row; dx = dresidual = dy[0] +
    dĥ·r + dms·2h/cols."""
    h, hhat, ms, weight, dy = saved["h"], saved["hhat"], saved["ms"], saved["weight"], inputs["dy"]
    rows, cols = h.shape
    (block, threads), stream = geometry(cols, params, opts), stream_arg(opts.get("stream"))
    dhhat, dms = cuda.device_array((rows, cols), dtype=h.dtype), cuda.device_array(rows, dtype=np.float32)
    partials = _partials(rows, cols)
    env = {"y": dhhat, "dy1": dy[1], "weight": weight, "dhhat": dhhat}
    placeholder = cuda.device_array(1, dtype=np.float32)  # the scale step reads no statistic
    chunks = cdiv(cols, block)
    dx, dres = grads["dx"], grads["dresidual"]
    launches = [
        _step(SCALE_BACKWARD, env, block, threads, stream, placeholder),
        _prepared("weight partials", block, threads, (partials.shape[0], chunks), stream, (dy[1], hhat, partials)),
        _prepared("reduce", block, threads, (chunks,), stream, (partials, grads["dweight"])),
        _prepared("statistic grad", block, threads, (rows,), stream, (dhhat, h, ms, dms)),
        _prepared("h grad", block, threads, (rows, chunks), stream, (dy[0], dhhat, h, ms, dms, dx, dres)),
    ]
    return _pass(launches, block, threads, (rows,), opts)


training(
    "add_rmsnorm",
    backend="numba",
    device="cuda",
    like=lambda a: cuda.device_array_like(a),
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
