"""Matmul with NumPy's BLAS (`np.matmul`), and with the epilogue as NumPy ufuncs: the CPU library baseline.

float32 goes straight to BLAS sgemm. float16 has no BLAS routine, and NumPy's own float16 matmul is a scalar
emulation far slower than anything it would be compared with, so the launch converts A and B to float32,
calls sgemm and rounds the product to float16: the conversions are part of the timed work, as they are the
price of float16 storage here. The epilogue is a sequence of in-place ufuncs on a float32 scratch (one pass
each, not one fused kernel), then a single rounding store; the library's way, not the ledger's one kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scenarios.elementwise_chain import GELU_A, GELU_C
from suite.core.registry import Launcher, kernel

A, C = np.float32(GELU_A), np.float32(GELU_C)


def _bias_gelu(x: np.ndarray, bias: np.ndarray, t: np.ndarray, out: np.ndarray) -> None:
    """out <- gelu(x + bias), the tanh gelu one ufunc pass per operation; x and t (float32) are overwritten."""
    np.add(x, bias, out=x)
    np.multiply(x, x, out=t)
    np.multiply(t, x, out=t)
    np.multiply(t, A, out=t)
    np.add(t, x, out=t)
    np.multiply(t, C, out=t)
    np.tanh(t, out=t)
    np.add(t, 1.0, out=t)
    np.multiply(x, t, out=t)
    np.multiply(t, np.float32(0.5), out=out, casting="same_kind")


@kernel(scenario="matmul", backend="numpy", variant="library", device="cpu")
def library(inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> Launcher:
    """sgemm (after converting float16 operands), then, with the epilogue, bias+gelu as ufunc passes."""
    a, b = inputs["a"], inputs["b"]
    half, epilogue = out.dtype.itemsize == 2, params["epilogue"] == "bias_gelu"  # float16, bfloat16
    a32 = np.empty(a.shape, np.float32) if half else a
    b32 = np.empty(b.shape, np.float32) if half else b
    c32 = np.empty(out.shape, np.float32) if half or epilogue else out
    scratch = np.empty(out.shape, np.float32) if epilogue else None
    bias32 = inputs["bias"].astype(np.float32)  # N values converted once, outside the timed launch

    def launch() -> None:
        if half:
            np.copyto(a32, a)
            np.copyto(b32, b)
        np.matmul(a32, b32, out=c32)
        if half:  # A·B stored in 16 bits: the result, or the intermediate the epilogue reads back
            np.copyto(out, c32, casting="same_kind")
        if epilogue:
            if half:
                np.copyto(c32, out)
            _bias_gelu(c32, bias32, scratch, out)

    return launch
