"""NumPy as the CPU library rival: its BLAS matmul (and ufuncs for elementwise steps), registered as `library`.

The target is the host itself: NumPy arrays in and out, timed for real like Numba's CPU target. NumPy has no
float16 arithmetic of its own worth timing (its float16 matmul is a slow scalar emulation), so kernels that
take half-precision storage compute in float32 and round, inside the timed launch; each kernel module says so.
"""

from __future__ import annotations

import numpy as np

from suite.core.backend import Backend, Copy, register_backend
from suite.core.targets import NATIVE, Availability, Target


class NumpyCPU(Target):
    backend, device = "numpy", "cpu"

    def probe(self) -> Availability:
        return Availability(NATIVE, f"NumPy {np.__version__} ({_blas()}) on the host CPU")


def _blas() -> str:
    """The BLAS NumPy was built against, as its build configuration names it."""
    try:
        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{info.get('name', 'BLAS')} {info.get('version', '')}".strip()
    except Exception:  # older NumPy: no dict mode; the name is provenance, not a requirement
        return "BLAS"


class Numpy(Backend):
    name = "numpy"
    packages = ("numpy",)

    def copies(self, device: str, n: int, stream: int | None) -> list[Copy]:
        """`np.copyto`: memcpy underneath, whose stores may stream on large buffers."""
        if device != "cpu":
            return []
        src, dst = np.ones(n, np.float32), np.empty(n, np.float32)
        return [Copy("numpy copyto", lambda: np.copyto(dst, src), streams=True)]


BACKEND = register_backend(Numpy(NumpyCPU()))
