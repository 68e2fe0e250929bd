"""Numba kernels for device `cuda` (`@cuda.jit`), one module per scenario; they also run in the simulator.

Where numba-cuda is missing these modules still import and register their entries (`numba.cuda` is imported
under a guard); the target's probe then says why nothing runs.

The package is `on_cuda`, not `cuda`: numba-cuda's import hook (`_numba_cuda_redirector`) claims every module
whose dotted name contains "numba.cuda" and recurses without end on `backends.numba.cuda`. Its sibling
`on_cpu` serves device `cpu`: each package is named for the device its kernels are registered on.
"""
