"""Liger-Kernel as a library rival on CUDA: its Triton kernels for the transformer families (variant `library`).

Liger's fused kernels (RMSNorm with the residual add, SiLU·mul, and more) are what a practitioner installs instead
of writing their own, so each of its kernels that computes a family's op runs as that family's `library` row,
checked and timed like every other. Its kernels are launched directly into the suite's output (the same kernel
and launch settings Liger's autograd functions use, without their output allocation), on the suite's stream.

liger-kernel is optional (`pip install fusebench[liger]`); without it, or without a GPU, the rows are skipped with
the reason. Liger 0.8.5's kernels cast scalar arguments inside the kernel (`gate_multiplier.to(tl.float32)`),
which Triton's interpreter cannot do (a scalar stays a Python float there), so on a machine without a GPU their
numerics are not checked either: the rows say so. Family modules beside this one register the kernels; each
imports liger_kernel only when its entry is built, so this package loads wherever Triton does.
"""

from __future__ import annotations

import importlib.util

import torch

from backends.triton import Triton, TritonTarget, interpreting
from suite.core.backend import register_backend
from suite.core.targets import NATIVE, UNAVAILABLE, Availability, cuda_device_count

INSTALL = "pip install 'fusebench[liger]'"


class LigerTarget(TritonTarget):
    """Torch tensors on the GPU, as Triton's target; available where liger-kernel is installed and a GPU answers."""

    backend = "liger"

    def probe(self) -> Availability:
        if importlib.util.find_spec("liger_kernel") is None:
            return Availability(UNAVAILABLE, f"liger-kernel is not installed ({INSTALL})")
        if interpreting():
            return Availability(UNAVAILABLE, "Liger's kernels cast scalar arguments in-kernel, which Triton's "
                                "interpreter cannot run: checked and timed on a GPU only")  # fmt: skip
        if cuda_device_count() > 0 and torch.cuda.is_available():
            return Availability(NATIVE, f"Liger-Kernel on {torch.cuda.get_device_name()}")
        return Availability(UNAVAILABLE, "no CUDA GPU: Liger's Triton kernels run on a GPU only")


class Liger(Triton):
    """Triton's launch stream and resource hooks; no options of its own (Liger picks its launch settings)."""

    name = "liger"
    packages = ("liger_kernel", "triton")
    options = ()


TARGET = LigerTarget()
BACKEND = register_backend(Liger(TARGET))
