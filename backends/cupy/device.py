"""CUDA C snippets the CuPy kernels share: float16 conversions, the elementwise ops, the storage C types.

They live apart from any one kernel module so that the elementwise chain, matmul's epilogue and normalization
compile the same device code from one place. float16 is stored as raw 16-bit words and converted with the
PTX instructions cuda_fp16.h itself uses (cvt.f32.f16, cvt.rn.f16.f32), so no header is needed: NVRTC from
the pip wheels has no include path to cuda_fp16.h.
"""

from __future__ import annotations

CTYPES = {"float32": "float", "float16": "half_bits"}
"""The C type a kernel stores each dtype as."""

CONVERSIONS = r"""
typedef unsigned short half_bits;

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ float load(const half_bits* p) {
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(*p));
    return v;
}
__device__ __forceinline__ void store(half_bits* p, float v) {
    half_bits h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    *p = h;
}
"""

OPS_SOURCE = r"""
__device__ __forceinline__ float op_scale(float v) { return 1.25f * v; }
__device__ __forceinline__ float op_shift(float v) { return v + 0.5f; }
__device__ __forceinline__ float op_relu(float v) { return fmaxf(v, 0.0f); }
__device__ __forceinline__ float op_square(float v) { return v * v; }
__device__ __forceinline__ float op_tanh(float v) { return tanhf(v); }
__device__ __forceinline__ float op_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }
__device__ __forceinline__ float op_silu(float v) { return v * op_sigmoid(v); }
__device__ __forceinline__ float op_gelu(float v) {
    return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}
"""
