"""Numba kernels for device `cpu`: `@njit(parallel=True)` loops over NumPy arrays, one module per scenario.

Named `on_cpu` like its sibling `on_cuda` (which cannot be `cuda`): each package says the device it serves."""
