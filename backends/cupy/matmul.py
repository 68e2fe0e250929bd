"""Matmul in CuPy: generated CUDA C (RawKernels, so NVRTC checks them without a GPU) and cuBLAS as `library`.

The kernels' source and their launch shape are in `backends.cupy.matmul_kernels`; this module compiles and
launches them. `unblocked` is one thread per output; `tiled` the register-tiled, double-buffered shared-memory
kernel; `fused` the tiled kernel with the bias+gelu epilogue applied to its register tile before its only store;
`unfused` (the same as `tiled`) and `library` (`cupy.matmul`, cuBLAS) run the epilogue as its own elementwise
kernel reading A·B back in the storage dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET, cupy, sm_device
from backends.cupy.build import ARCH, build
from backends.cupy.matmul_kernels import STATIC_SMEM, launch_config, refusal, source
from suite.core.registry import Launch, Launcher, kernel
from suite.core.targets import NATIVE, NotRunnable
from suite.kit.launch import cdiv
from suite.kit.launch_shape import block_chosen_by, flat_threads, launch_notes


def _compiled(
    kind: str,
    dtype: str,
    threads: int,
    tile: tuple[int, int, int] = (0, 0, 0),
    epilogue: bool = False,
    dynamic_smem: int = 0,
) -> Any:
    """The built kernel (cached by `build`), recorded with its block size for the resource report."""
    return build(*source(kind, dtype, tile, epilogue), threads=threads, dynamic_smem=dynamic_smem)


@kernel(scenario="matmul", backend="cupy", variant=("unblocked", "tiled", "unfused", "fused", "library"))
def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """`unblocked`, `tiled` or `library` (cuBLAS) into out, then the epilogue as its own kernel (`unfused` is
    `tiled`); `fused` applies the epilogue to the tiled kernel's register tile before its only store."""
    matmul, fuse = {"unfused": "tiled", "fused": "tiled"}.get(variant, variant), variant == "fused"
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    dtype = np.dtype(out.dtype).name
    m, n = out.shape
    k = a.shape[1]
    epilogue = params["epilogue"] == "bias_gelu"
    separate = epilogue and not fuse
    mid = TARGET.empty(out.shape, dtype) if separate else out
    option = BACKEND.option(opts, "block")
    block = flat_threads(m * n, option, sm_device())  # the flat kernels (unblocked, epilogue): a thread per output
    flat = (max(1, cdiv(m * n, block)),)
    dims = (np.int32(m), np.int32(n), np.int32(k))
    steps: list[Launcher] = []
    notes: dict[str, Any] = {}
    if matmul == "unblocked":
        steps.append(_step(_compiled("unblocked", dtype, block), flat, (block,), (a, b, mid, *dims)))
        notes = launch_notes({"block": block}, flat, block_chosen_by(option))
    elif matmul == "tiled":
        if why := refusal(params["tile"]):
            raise NotRunnable(f"cupy tiled matmul: {why}")
        config = launch_config(m, n, params["tile"])
        smem, threads = config["dynamic_smem_bytes"], config["threads_per_block"]
        k_tiled = _compiled("tiled", dtype, threads, tuple(params["tile"]), epilogue and fuse, smem)
        if smem > STATIC_SMEM and hasattr(k_tiled, "max_dynamic_shared_size_bytes"):
            k_tiled.max_dynamic_shared_size_bytes = smem  # the opt-in, on the loaded kernel
        steps.append(_step(k_tiled, tuple(config["grid"]), tuple(config["threads"]), (a, b, bias, mid, *dims), smem))
        notes = config
    else:
        steps.append(_cublas(a, b, mid))
    if separate:
        args = (mid, bias, out, np.int64(m * n), np.int32(n))
        steps.append(_step(_compiled("bias_gelu", dtype, block), flat, (block,), args))
    context = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for step in steps:
                step()

    return Launch(launch, notes=notes, allocates={"mid": mid.nbytes} if separate else {})


def _step(k: Any, grid: tuple, block: tuple, args: tuple, smem: int = 0) -> Launcher:
    if smem:
        return lambda: k(grid, block, args, shared_mem=smem)
    return lambda: k(grid, block, args)


def _cublas(a: Any, b: Any, c: Any) -> Launcher:
    """cupy.matmul into c: cuBLAS on a GPU; without one there is nothing to build ahead, so it cannot run."""
    if TARGET.probe().mode != NATIVE:

        def refuse() -> None:
            raise NotRunnable(f"cuBLAS through CuPy needs a GPU: nothing of it is compiled for {ARCH} ahead of time")

        return refuse
    return lambda: cupy.matmul(a, b, out=c)
