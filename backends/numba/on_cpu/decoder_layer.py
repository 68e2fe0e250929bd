"""The decoder layer on the host CPU: the registry's Numba CPU kernel of each op, NumPy's BLAS for the projections.

The layer writes no kernel: `scenarios.decoder_layer.steps` lays its chain out, `suite.kit.layer.compose` looks
each op up among the Numba CPU kernels in the variant the layer's variant picks. What this module adds is how
the Numba CPU backend multiplies (`np.matmul(a, w, out=)`, the library GEMM linear_cross_entropy uses here too),
copies (`np.copyto` from a transposed view) and allocates (`np.empty`), all on host arrays. float32
only: NumPy has no half-precision BLAS (its float16 matmul is a scalar loop, which would time NumPy rather than
the layer), so float16 cases are `Unsupported`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from scenarios.decoder_layer import VARIANTS, op_variants, steps
from suite.core.registry import Launch, Unsupported, kernel
from suite.kit.layer import compose


def _gemm(a: np.ndarray, w: np.ndarray, out: np.ndarray) -> Any:
    return functools.partial(np.matmul, a, w, out=out)


def _copy(dst: np.ndarray, src: np.ndarray) -> Any:
    return functools.partial(np.copyto, dst, src.transpose(1, 0, 2))


@kernel(scenario="decoder_layer", backend="numba", variant=VARIANTS, device="cpu")
def layer(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """The layer's chain with each op's Numba CPU kernel in the variant `variant` picks for it."""
    if out.dtype != np.float32:
        raise Unsupported(f"{out.dtype}: NumPy has no half-precision BLAS for the layer's projections")
    chain = steps(inputs, out, params, gemm=_gemm, copy=_copy, empty=np.empty)
    return compose(chain, op_variants(variant, params), backend="numba", device="cpu", opts=opts)
