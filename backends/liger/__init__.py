"""Liger-Kernel as a library rival on CUDA: its Triton kernels for the transformer families (variant `library`).

Liger's fused kernels (RMSNorm with the residual add, SiLU·mul, and more) are what a practitioner installs instead
of writing their own, so each of its kernels that computes a family's op runs as that family's `library` row,
checked and timed like every other. Its kernels are launched directly into the suite's output (the same kernel
and launch settings Liger's autograd functions use, without their output allocation), on the suite's stream.

liger-kernel is optional (`pip install -e '.[liger]'`); without it, or without a GPU, the rows are skipped with
the reason. Where Triton's interpreter is on, the kernels that it can run (rope, cross-entropy) are checked
there like Triton's own; Liger 0.8.5's RMSNorm and SwiGLU kernels cast scalar arguments inside the kernel
(`gate_multiplier.to(tl.float32)`), which the interpreter cannot do (a scalar stays a Python float there), so
their entries say `Unsupported` (`needs_gpu`) and their numerics wait for a GPU; tests/test_liger_compile.py
compiles all four for sm_90. Family modules beside this one register the kernels; each imports liger_kernel only
when its entry is built, so this package loads wherever Triton does.
"""

from __future__ import annotations

import importlib.util

import torch

from backends.triton import Triton, TritonTarget, interpreting
from suite.core.backend import register_backend
from suite.core.install import hint
from suite.core.registry import Unsupported
from suite.core.targets import EMULATED, NATIVE, UNAVAILABLE, Availability, cuda_device_count

INSTALL = hint("liger")


class LigerTarget(TritonTarget):
    """Torch tensors on the GPU, as Triton's target; available where liger-kernel is installed and a GPU answers."""

    backend = "liger"

    def probe(self) -> Availability:
        if importlib.util.find_spec("liger_kernel") is None:
            return Availability(UNAVAILABLE, f"liger-kernel is not installed ({INSTALL})")
        if interpreting():
            return Availability(EMULATED, "Triton interpreter: Liger's rope and cross-entropy, numerics only")
        if cuda_device_count() > 0 and torch.cuda.is_available():
            return Availability(NATIVE, f"Liger-Kernel on {torch.cuda.get_device_name()}")
        return Availability(UNAVAILABLE, "no CUDA GPU: Liger's Triton kernels run on a GPU only")


class Liger(Triton):
    """Triton's launch stream and resource hooks; no options of its own (Liger picks its launch settings)."""

    name = "liger"
    packages = ("liger_kernel", "triton")
    options = ()


def needs_gpu(what: str) -> None:
    """Raise `Unsupported` under Triton's interpreter for a Liger kernel that casts a scalar argument in-kernel."""
    if interpreting():
        raise Unsupported(
            f"Liger's {what} kernel casts a scalar argument in-kernel, which Triton's interpreter "
            "cannot run: checked on a GPU only"
        )


def bfloat16_arithmetic(what: str, dtype: object) -> None:
    """Raise `Unsupported` under Triton's interpreter for a Liger kernel that computes in bfloat16 itself: the
    interpreter holds bfloat16 as uint16 and its arithmetic then works on the bit patterns (NaNs and garbage)."""
    if interpreting() and str(dtype).endswith("bfloat16"):
        raise Unsupported(
            f"Liger's {what} kernel computes in bfloat16, which Triton's interpreter does on the "
            "16-bit patterns: checked on a GPU only"
        )


TARGET = LigerTarget()
BACKEND = register_backend(Liger(TARGET))
