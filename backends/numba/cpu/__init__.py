"""Numba kernels for the host CPU: `@njit(parallel=True)` loops over NumPy arrays, one module per scenario."""
