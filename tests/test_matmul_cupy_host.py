"""The CuPy tiled matmul's CUDA source, run on the host where no GPU can run it, against the reference.

The kernel coordinates threads only with `__syncthreads`, so a small shim runs it as it is: each block in
turn, one std::thread per CUDA thread, a std::barrier for `__syncthreads`, one global array standing in for
the dynamic shared memory (poisoned with NaN before every block), 16-byte aligned vector structs, and
_Float16 for the half conversions (both round to nearest even, as cvt.rn.f16.f32 does). What runs is the
source NVRTC compiles minus its conversion prelude: the tile and edge index math, the float4/half2 runs
against the guarded scalar ones, the transposed A slice and the two-stage pipeline.

Operands sit between NaN guard bands: a load outside A, B or bias would carry NaN into some output (a
multiply by a zero-filled operand keeps NaN), and a store outside C would overwrite its band.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

from scenarios.matmul import SWEEP, Matmul
from suite.core.numerics import judge
from tests.support import host_shim_reason

mm = pytest.importorskip("backends.cupy.matmul_kernels")

HOST_PRELUDE = r"""
#include <barrier>
#include <bit>
#include <cmath>
#include <thread>
#include <vector>
struct Dim3 { unsigned x = 0, y = 0, z = 0; };
static thread_local Dim3 threadIdx;
static Dim3 blockIdx;  // one block at a time
static std::barrier<>* emu_barrier;
static inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(8) uint2 { unsigned int x, y; };
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline uint2 make_uint2(unsigned int x, unsigned int y) { return {x, y}; }
float4 smem4[MAX_SMEM / 16];
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__
#define __launch_bounds__(...)
typedef unsigned short half_bits;
static inline float load(const float* p) { return *p; }
static inline void store(float* p, float v) { *p = v; }
static inline float load(const half_bits* p) { return (float)std::bit_cast<_Float16>(*p); }
static inline void store(half_bits* p, float v) { *p = std::bit_cast<half_bits>((_Float16)v); }
"""

LAUNCHER = r"""
extern "C" void run(unsigned gx, unsigned gy, unsigned rx, unsigned ry, const ELEM* a, const ELEM* b, const ELEM* bias,
                    ELEM* c, int m, int n, int k) {
    for (unsigned by = 0; by < gy; ++by)
        for (unsigned bx = 0; bx < gx; ++bx) {
            float* words = reinterpret_cast<float*>(smem4);
            for (unsigned i = 0; i < MAX_SMEM / 4; ++i) words[i] = NAN;
            blockIdx = {bx, by, 0};
            std::barrier<> barrier(rx * ry);
            emu_barrier = &barrier;
            std::vector<std::thread> pool;
            for (unsigned y = 0; y < ry; ++y)
                for (unsigned x = 0; x < rx; ++x)
                    pool.emplace_back([=] { threadIdx = {x, y, 0}; KERNEL(a, b, bias, c, m, n, k); });
            for (auto& th : pool) th.join();
        }
}
"""

MM = Matmul()
GUARD = 64
"""Elements of NaN on either side of every operand (a multiple of 4: the operand stays 16-byte aligned)."""
TILES = [t for t in [*SWEEP, [32, 16, 16], [16, 64, 32], [256, 16, 16]] if not mm.refusal(t)]
SHAPES = {
    "awkward": {"m": 67, "n": 45, "k": 33},  # nothing a multiple of 4: every run is the guarded scalar one
    "aligned": {"m": 68, "n": 44, "k": 100},  # N, K multiples of 4: float4 / half2 runs, partial tiles still
}


REASON = host_shim_reason()


def _library(tile: list[int], dtype: str, epilogue: bool, tmp: Path) -> ctypes.CDLL:
    body, name = mm.body("tiled", dtype, tuple(tile), epilogue)
    head = f"#define MAX_SMEM {mm.smem_bytes(*tile)}\n#define ELEM {mm.CTYPES[dtype]}\n#define KERNEL {name}\n"
    path = tmp / f"{name}.cpp"
    path.write_text(head + HOST_PRELUDE + mm.OPS_SOURCE + body + LAUNCHER)
    lib = tmp / f"{name}.so"
    command = ["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-Wno-unknown-pragmas", path, "-o", lib]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


def _guarded(x: np.ndarray, shift: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(buffer, view): `x` copied into the middle of a NaN buffer, `shift` elements past an aligned start."""
    buf = np.full(x.size + 2 * GUARD + shift, np.nan, dtype=x.dtype)
    view = buf[GUARD + shift : GUARD + shift + x.size].reshape(x.shape)
    view[...] = x
    return buf, view


def _run(lib: ctypes.CDLL, tile: list[int], inputs: dict[str, np.ndarray], shift: int = 0) -> np.ndarray:
    """C for inputs a, b, bias: one launch of the kernel as `backends.cupy.matmul_kernels` configures it."""
    (m, k), n = inputs["a"].shape, inputs["b"].shape[1]
    config = mm.launch_config(m, n, tile)
    bufs = {name: _guarded(x, shift) for name, x in inputs.items()}
    c_buf, c = _guarded(np.full((m, n), np.nan, dtype=inputs["a"].dtype), shift)
    ptr = {name: ctypes.c_void_p(view.ctypes.data) for name, (_, view) in bufs.items()}
    assert all(p.value % 16 == (shift * c.itemsize) % 16 for p in ptr.values())
    lib.run(*config["grid"], *config["threads"], ptr["a"], ptr["b"], ptr["bias"], ctypes.c_void_p(c.ctypes.data),
            m, n, k)  # fmt: skip
    outside = np.concatenate([c_buf[: GUARD + shift], c_buf[GUARD + shift + c.size :]])
    assert np.isnan(outside).all(), "a store landed outside C"
    return c.copy()


def _check(lib: ctypes.CDLL, tile: list[int], dtype: str, epilogue: str, shape: dict, shift: int = 0) -> None:
    params = {**shape, "epilogue": epilogue, "tile": tile}
    inputs = MM.make_inputs(params, dtype, np.random.default_rng(20261207))
    ref = MM.reference(inputs, params)
    out = _run(lib, tile, inputs, shift)
    _, problem = judge(out, ref, MM.tolerance(inputs, params, dtype, ref))
    assert problem == "", f"{tile} {dtype} {epilogue} {shape} shift={shift}: {problem}"


@pytest.mark.skipif(bool(REASON), reason=REASON)
@pytest.mark.parametrize("tile", TILES, ids=lambda t: "x".join(map(str, t)))
def test_float32_tiles_on_awkward_and_aligned_shapes(tile: list[int], tmp_path: Path) -> None:
    for epilogue in ("none", "bias_gelu"):
        lib = _library(tile, "float32", epilogue == "bias_gelu", tmp_path)
        for shape in SHAPES.values():
            _check(lib, tile, "float32", epilogue, shape)


@pytest.mark.skipif(bool(REASON), reason=REASON)
@pytest.mark.parametrize("tile", [[16, 16, 16], [64, 64, 32], [128, 128, 32]], ids=lambda t: "x".join(map(str, t)))
def test_float16_tiles_accumulate_in_float32(tile: list[int], tmp_path: Path) -> None:
    lib = _library(tile, "float16", True, tmp_path)
    for shape in SHAPES.values():
        _check(lib, tile, "float16", "bias_gelu", shape)


@pytest.mark.skipif(bool(REASON), reason=REASON)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_misaligned_operands_take_the_scalar_runs(dtype: str, tmp_path: Path) -> None:
    """N and K multiples of 4 but every pointer one element past 16 bytes: vector runs would be misaligned."""
    tile = [64, 64, 32]
    lib = _library(tile, dtype, False, tmp_path)
    _check(lib, tile, dtype, "none", SHAPES["aligned"], shift=1)


@pytest.mark.skipif(bool(REASON), reason=REASON)
def test_the_host_run_can_fail(tmp_path: Path) -> None:
    """The same kernel with one k-row of each staged A slice dropped must be caught."""
    tile = [32, 32, 32]
    body, name = mm.body("tiled", "float32", tuple(tile), False)
    broken = body.replace("sa[(kk + 3) * SA + r] = ra[l].w;", "sa[(kk + 3) * SA + r] = 0.0f;")
    assert broken != body
    lib_path = tmp_path / "broken.cpp"
    head = f"#define MAX_SMEM {mm.smem_bytes(*tile)}\n#define ELEM float\n#define KERNEL {name}\n"
    lib_path.write_text(head + HOST_PRELUDE + mm.OPS_SOURCE + broken + LAUNCHER)
    command = ["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-Wno-unknown-pragmas", lib_path, "-o",
               tmp_path / "broken.so"]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True)
    with pytest.raises(AssertionError, match=r"shift=0: "):
        _check(ctypes.CDLL(str(tmp_path / "broken.so")), tile, "float32", "none", SHAPES["awkward"])
