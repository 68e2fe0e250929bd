"""GPU resources: compiling kernels for an architecture, ptxas logs, occupancy, the CUDA driver."""
