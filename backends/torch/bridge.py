"""NumPy arrays to torch tensors and back, bfloat16 included.

`torch.from_numpy` and `Tensor.numpy` know no bfloat16 (NumPy has none; the suite's is `ml_dtypes`'), so a
bfloat16 array crosses as its 16-bit pattern, reinterpreted on the other side: no rounding, no copy beyond the
one a device transfer makes. Every target whose arrays are torch tensors (torch, Triton, Liger) goes through here.
"""

from __future__ import annotations

import numpy as np
import torch

from suite.core import dtypes  # noqa: F401  registers bfloat16 with NumPy

BF16 = np.dtype("bfloat16")


def to_torch(a: np.ndarray, device: str = "cpu") -> torch.Tensor:
    a = np.ascontiguousarray(a)
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(a).to(device)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.uint16).numpy().view(BF16)
    return t.numpy()


def torch_dtype(dtype: str) -> torch.dtype:
    """torch's dtype of a dtype name or NumPy dtype (every storage dtype of `suite.core.dtypes` has one)."""
    return getattr(torch, np.dtype(dtype).name)
