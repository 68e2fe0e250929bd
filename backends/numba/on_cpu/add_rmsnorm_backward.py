"""add_rmsnorm's training step on the host CPU with Numba, fused and unfused (`scenarios.add_rmsnorm.backward`
says what each saves and moves; `add_rmsnorm_backward_kernels` has the loops).

Fused: the forward is the fused forward kernel that also stores rstd; it keeps h (the output's first half), rstd
and γ. The backward is one parallel loop over row blocks writing dx, dresidual and dweight's per-block float32
partials, then the small reduction of the partials into dweight: two launches.

Unfused: the forward is the family's unfused walk (the add and rmsnorm's step kernels, as
`backends.numba.on_cpu.add_rmsnorm`), keeping h, the row mean square ms and ĥ, which it writes anyway. The
backward is five launches: dĥ = dy[1]·γ (the normalization family's affine step kernel), dweight's partials from
dy[1] and the saved ĥ, their reduction, dms per row, and h's gradient into dx and dresidual.

Everything a pass needs (temporaries, partials, γ in float32) is allocated here and every kernel compiled for its
exact arguments, so a launch neither allocates nor compiles. Halves travel as their uint16 bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.numba.on_cpu import add_rmsnorm_backward_kernels as bk
from backends.numba.on_cpu.add_rmsnorm import _arrays, _compiled, _step
from backends.numba.on_cpu.arrays import storage
from backends.numba.on_cpu.normalization_kernels import CODES, step_kernel
from scenarios.add_rmsnorm import INPUTS, ROW_STATS, STEPS
from scenarios.add_rmsnorm.backward import partial_rows
from suite.core.decomposition import walk
from suite.kit.training import Pass, training


def _forward_arrays(inputs: dict[str, Any], y: np.ndarray) -> tuple[str, dict[str, np.ndarray]]:
    return _arrays({name: inputs[name] for name in INPUTS}, y)


def _backward_arrays(inputs: dict[str, Any], grads: dict[str, Any]) -> tuple[str, dict[str, np.ndarray]]:
    """(dtype, dy's halves and the gradients as the kernels see them)."""
    dtype = str(inputs["dy"].dtype)
    if any(str(g.dtype) != dtype for g in grads.values()):
        raise ValueError(f"numba/cpu add_rmsnorm backward: dy {dtype}, grads {[str(g.dtype) for g in grads.values()]}")
    dy = storage(inputs["dy"])
    return dtype, {"dy0": dy[0], "dy1": dy[1]} | {name: storage(g) for name, g in grads.items()}


def fused_forward(inputs: dict[str, Any], y: np.ndarray, params: dict, opts: dict) -> Pass:
    """h and y as the forward's fused kernel, and each row's rstd, which the backward reads."""
    dtype, env = _forward_arrays(inputs, y)
    rows, cols, tile = env["x"].shape[0], env["x"].shape[1], int(params["tile"])
    rstd, wf = np.empty(rows, np.float32), np.empty(cols, np.float32)
    arrays = (env["x"], env["residual"], env["weight"], env["h"], env["y"], rstd, wf)
    if cols > tile:
        args, kernel = (*arrays, tile), bk.fused_forward_wide_kernel(dtype)
    else:
        args, kernel = arrays, bk.fused_forward_kernel(dtype)
    run = _compiled(kernel, *args)
    return Pass(lambda: run(*args), saved={"h": y[0], "rstd": rstd, "weight": inputs["weight"]})


def fused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """One pass over h and dy writing dx, dresidual and the partials; then the partials' reduction."""
    dtype, env = _backward_arrays(inputs, grads)
    h, weight = storage(saved["h"]), storage(saved["weight"])
    rows, cols = h.shape
    partials, wf = np.empty((partial_rows(rows), cols), np.float32), np.empty(cols, np.float32)
    args = (h, saved["rstd"], weight, env["dy0"], env["dy1"], env["dx"], env["dresidual"], partials, wf)
    main = _compiled(bk.fused_backward_kernel(dtype), *args)
    reduce = _compiled(bk.reduce_kernel(dtype), partials, env["dweight"])

    def run() -> None:
        main(*args)
        reduce(partials, env["dweight"])

    return Pass(run)


def unfused_forward(inputs: dict[str, Any], y: np.ndarray, params: dict, opts: dict) -> Pass:
    """The forward's unfused walk; h, ms and ĥ (written by it anyway) and γ kept."""
    dtype, env = _forward_arrays(inputs, y)
    rows = env["x"].shape[0]
    writes = walk(
        STEPS,
        env,
        stats=ROW_STATS,
        stat=lambda: np.empty(rows, np.float32),
        matrix=lambda: np.empty_like(env["x"]),
    )
    steps = [_step(st, env, dtype) for st in writes]

    def run() -> None:
        for step, args in steps:
            step(*args)

    saved = {"h": y[0], "ms": env["ms"], "hhat": env["hhat"].view(y.dtype), "weight": inputs["weight"]}
    return Pass(run, saved=saved)


def unfused_backward(inputs: dict[str, Any], saved: dict, grads: dict, params: dict, opts: dict) -> Pass:
    """dĥ = dy[1]·γ; dweight's partials of dy[1]·ĥ and their reduction; dms per row; dx = dresidual = dy[0] +
    dĥ·r + dms·2h/cols. dĥ, dms and the partials are allocated here."""
    dtype, env = _backward_arrays(inputs, grads)
    h, hhat, ms, weight = storage(saved["h"]), storage(saved["hhat"]), saved["ms"], storage(saved["weight"])
    rows, cols = h.shape
    dhhat, dms = np.empty_like(h), np.empty(rows, np.float32)
    partials = np.empty((partial_rows(rows), cols), np.float32)
    scale = (env["dy1"], weight, np.empty(0, weight.dtype), dhhat)
    scale += (np.empty(cols, np.float32), np.empty(0, np.float32), CODES["scale"])
    steps = [
        (step_kernel("affine", dtype), scale),
        (bk.partials_kernel(dtype), (env["dy1"], hhat, partials)),
        (bk.reduce_kernel(dtype), (partials, env["dweight"])),
        (bk.dms_kernel(dtype), (dhhat, h, ms, dms)),
        (bk.h_grad_kernel(dtype), (env["dy0"], dhhat, h, ms, dms, env["dx"], env["dresidual"])),
    ]
    steps = [(_compiled(kernel, *args), args) for kernel, args in steps]

    def run() -> None:
        for step, args in steps:
            step(*args)

    return Pass(run)


training(
    "add_rmsnorm",
    backend="numba",
    device="cpu",
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
