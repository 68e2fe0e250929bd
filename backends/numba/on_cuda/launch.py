"""The GPU Numba CUDA kernels size their grids for: its SMs where one runs them, the nominal sm_90 elsewhere.

The simulator and compile-only runs have no device to ask, so they size for the architecture the resource report
compiles for (`suite.kit.launch_shape.NOMINAL`): the grid a row records is then the one an H100 would get.
"""

from __future__ import annotations

from backends.numba import simulating
from suite.kit.launch_shape import NOMINAL, Device


def device() -> Device:
    if simulating():
        return NOMINAL
    try:
        from numba import cuda

        if not cuda.is_available():
            return NOMINAL
        gpu = cuda.get_current_device()
        return Device(int(gpu.MULTIPROCESSOR_COUNT), int(gpu.MAX_THREADS_PER_MULTI_PROCESSOR), str(gpu.name))
    except Exception:  # no driver: nothing runs here, and the grid is only recorded
        return NOMINAL
