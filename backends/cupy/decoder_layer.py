"""The decoder layer in CuPy: the registry's CuPy kernel of each op, cuBLAS (`cupy.matmul`) for the projections.

The layer writes no kernel: `scenarios.decoder_layer.steps` lays its chain out, `suite.kit.layer.compose` looks
each op up among the CuPy kernels in the variant the layer's variant picks. What this module adds is how the
CuPy backend multiplies (`cupy.matmul(a, w, out=)`, the library GEMM linear_cross_entropy uses here too),
copies (`cupy.copyto` from a transposed view) and allocates (the target's `empty`), the whole chain in the
suite's stream. Without a GPU the ops' kernels compile for sm_90 (their resources are the row's) and the layer
cannot run, as CuPy's linear_cross_entropy: nothing of cuBLAS or of a copy is built ahead of time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET, cupy
from backends.cupy.build import ARCH
from backends.cupy.matmul import _cublas
from scenarios.decoder_layer import VARIANTS, op_variants, steps
from suite.core.registry import Launch, Launcher, kernel
from suite.core.targets import NATIVE, NotRunnable
from suite.kit.layer import compose


def _copy(dst: Any, src: Any) -> Launcher:
    """cupy.copyto from src with its first two axes swapped; without a GPU, a launcher that cannot run."""
    if TARGET.probe().mode != NATIVE:

        def refuse() -> None:
            raise NotRunnable(f"a CuPy copy needs a GPU: the layer's kernels are compiled for {ARCH} only")

        return refuse
    swapped = src.transpose(1, 0, 2)
    return lambda: cupy.copyto(dst, swapped)


def _empty(shape: tuple[int, ...], dtype: Any) -> Any:
    return TARGET.empty(shape, np.dtype(dtype).name)


@kernel(scenario="decoder_layer", backend="cupy", variant=VARIANTS, device="cuda")
def layer(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """The layer's chain with each op's CuPy kernel in the variant `variant` picks for it."""
    chain = steps(inputs, out, params, gemm=_cublas, copy=_copy, empty=_empty)
    within = BACKEND.launch_stream(opts.get("stream"))
    return compose(chain, op_variants(variant, params), backend="cupy", device="cuda", opts=opts, within=within)
