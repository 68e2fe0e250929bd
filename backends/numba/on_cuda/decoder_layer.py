"""The decoder layer on CUDA with Numba (the same chain runs in the simulator): the registry's Numba CUDA kernel of
each op, the matmul family's tiled kernel for the projections (numba-cuda has no BLAS).

The layer writes no kernel of its own beyond a layout copy: `scenarios.decoder_layer.steps` lays its chain out,
`suite.kit.layer.compose` looks each op up among the Numba CUDA kernels in the variant the layer's variant
picks. What this module adds is how the backend multiplies (the tiled GEMM of `backends.numba.on_cuda.matmul`
at `TILE` (BM, BN, BK) = 32³ with its epilogue off, as linear_cross_entropy runs it: the bias it is handed is
never read), copies (`swap`, a grid-stride kernel, since a device array has no transposed view of three axes)
and allocates (`cuda.device_array`). Every variant runs the same GEMMs and copies, so the variants differ in
the ops alone; how fast this GEMM is next to cuBLAS is the matmul family's question.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cuda import matmul
from backends.numba.on_cuda.launch import device
from backends.numba.record import record_numba
from scenarios.decoder_layer import VARIANTS, op_variants, steps
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch_shape import elementwise_launch
from suite.kit.layer import compose

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

TILE = (32, 32, 32)


def swap(src, dst):  # type: ignore[no-untyped-def]
    """dst[j, i, k] = src[i, j, k], a grid-stride loop over dst in order: consecutive threads write consecutive
    values of dst and read consecutive values of src's rows (both are walked along their last axis)."""
    n0, d = src.shape[0], src.shape[2]
    i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    stride = np.int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < dst.size:
        k = i % d
        a = (i // d) % n0
        j = i // (d * n0)
        dst[j, a, k] = src[a, j, k]
        i += stride


_SWAP = cuda.jit(swap) if cuda is not None else None


def swap_launcher(dst: Any, src: Any, stream: Any = 0, option: int | None = None) -> Launcher:
    """A launcher of `swap` from src into dst (the chain's `Copy`), compiled now on a GPU and recorded for the
    resource report; its grid is the elementwise kernels' for dst's size (`option`: the backend's block)."""
    block, grid = elementwise_launch(dst.size, option, device())
    args = (src, dst)
    compiled = None if simulating() else _SWAP.compile(tuple(numba.typeof(x) for x in args))
    record_numba((__name__, "swap", None), args, block, name="decoder_layer swap", compiled=compiled)

    def launch() -> None:  # configured per launch: the simulator's kernel object keeps its last configuration
        _SWAP[grid, block, stream](*args)

    return launch


@kernel(scenario="decoder_layer", backend="numba", variant=VARIANTS, device="cuda")
def layer(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """The layer's chain with each op's Numba CUDA kernel in the variant `variant` picks for it."""
    if str(out.dtype) not in matmul.DTYPES:
        raise ValueError(f"numba/cuda decoder_layer: out {out.dtype}, not one of {', '.join(matmul.DTYPES)}")
    stream, option = stream_arg(opts.get("stream")), BACKEND.option(opts, "block")
    biases: dict[int, Any] = {}  # one zero bias per GEMM width, made before any launch and never read

    def gemm(a: Any, w: Any, c: Any) -> Launcher:
        m, n = c.shape
        if n not in biases:
            biases[n] = cuda.to_device(np.zeros(n, dtype=c.dtype))
        bias = biases[n]
        config = matmul.launch_config(m, n, list(TILE))
        factory = (matmul.__name__, "tiled_source", (*TILE, False))
        return matmul._prepare(factory, tuple(config["grid"]), tuple(config["threads"]), stream, a, w, bias, c)

    def copy(dst: Any, src: Any) -> Launcher:
        return swap_launcher(dst, src, stream, option)

    def empty(shape: tuple[int, ...], dtype: Any) -> Any:
        return cuda.device_array(shape, dtype=dtype)

    chain = steps(inputs, out, params, gemm=gemm, copy=copy, empty=empty)
    composed = compose(chain, op_variants(variant, params), backend="numba", device="cuda", opts=opts)
    composed.notes["gemm_tile"] = list(TILE)
    return composed
