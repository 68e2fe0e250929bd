"""The CuPy attention kernels' CUDA source, run on the host where no GPU can run it, against the reference.

The kernels coordinate threads only with `__syncthreads`, so a small shim runs them as they are: each block
in turn, one std::thread per CUDA thread, a std::barrier for `__syncthreads`, `static` arrays for
`__shared__` (one block at a time owns them) and _Float16 for the half conversions (both round to nearest
even, as cvt.rn.f16.f32 does). What is tested is the source NVRTC compiles, minus the two-line prelude.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

from scenarios.attention import Attention
from suite.core.numerics import judge
from tests.support import host_shim_reason

cupy_attention = pytest.importorskip("backends.cupy.attention_kernels")

HOST_PRELUDE = r"""
#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>
using std::max;
using std::min;
struct Dim3 { unsigned x = 0, y = 0, z = 0; };
static thread_local Dim3 threadIdx, blockIdx;
static std::barrier<>* emu_barrier;
static inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict
typedef unsigned short half_bits;
static inline float to_float(float x) { return x; }
static inline float to_float(half_bits h) { return (float)std::bit_cast<_Float16>(h); }
static inline void store(float* p, float v) { *p = v; }
static inline void store(half_bits* p, float v) { *p = std::bit_cast<half_bits>((_Float16)v); }
#define NEG_INF (-INFINITY)
"""

LAUNCHERS = r"""
template <class F> static void emulate(unsigned gx, unsigned gy, unsigned threads, F body) {
    for (unsigned by = 0; by < gy; ++by)
        for (unsigned bx = 0; bx < gx; ++bx) {
            std::barrier<> barrier(threads);
            emu_barrier = &barrier;
            std::vector<std::thread> pool;
            for (unsigned t = 0; t < threads; ++t)
                pool.emplace_back([=, &body] { threadIdx = {t, 0, 0}; blockIdx = {bx, by, 0}; body(); });
            for (auto& th : pool) th.join();
        }
}
extern "C" void run_flash(unsigned gx, unsigned gy, unsigned n, const T* q, const T* k, const T* v, T* o, int L,
                          float scale) {
    emulate(gx, gy, n, [=] { attn_flash(q, k, v, o, L, scale); });
}
extern "C" void run_scores(unsigned gx, unsigned gy, unsigned n, const T* q, const T* k, T* s, int L, float scale) {
    emulate(gx, gy, n, [=] { attn_scores(q, k, s, L, scale); });
}
extern "C" void run_softmax(unsigned gx, unsigned n, const T* s, T* p, long long rows, int L) {
    emulate(gx, 1, n, [=] { attn_softmax(s, p, rows, L); });
}
extern "C" void run_pv(unsigned gx, unsigned gy, unsigned n, const T* p, const T* v, T* o, int L) {
    emulate(gx, gy, n, [=] { attn_pv(p, v, o, L); });
}
"""

SCN = Attention()
CASES = [*SCN.checks, *({"batch": 1, "heads": 2, "seq_len": 193, "head_dim": 64, "causal": c, "block_m": 64,
                         "block_n": 64} for c in (False, True))]  # fmt: skip


REASON = host_shim_reason()


def _library(params: dict, dtype: str, tmp: Path) -> ctypes.CDLL:
    src = cupy_attention.source(params, dtype, prelude=HOST_PRELUDE) + LAUNCHERS
    path = tmp / "attn.cpp"
    path.write_text(src)
    lib = tmp / "attn.so"
    command = ["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-Wno-unknown-pragmas", path, "-o", lib]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _run(lib: ctypes.CDLL, variant: str, inputs: dict[str, np.ndarray], params: dict) -> np.ndarray:
    q, k, v = (np.ascontiguousarray(inputs[n]) for n in ("q", "k", "v"))
    out = np.full(q.shape, np.nan, dtype=q.dtype)
    seq_len, threads = params["seq_len"], 2 * params["block_m"]
    gx, gy = -(-seq_len // params["block_m"]), params["batch"] * params["heads"]
    scale = ctypes.c_float(1 / np.sqrt(params["head_dim"]))
    if variant == "fused":
        lib.run_flash(gx, gy, threads, _ptr(q), _ptr(k), _ptr(v), _ptr(out), seq_len, scale)
        return out
    s = np.full((gy, seq_len, seq_len), np.nan, dtype=q.dtype)
    p = np.full_like(s, np.nan)
    rows, per_block = gy * seq_len, cupy_attention.ROWS
    lib.run_scores(gx, gy, threads, _ptr(q), _ptr(k), _ptr(s), seq_len, scale)
    lib.run_softmax(-(-rows // per_block), per_block * cupy_attention.ROW_THREADS, _ptr(s), _ptr(p),
                    ctypes.c_longlong(rows), seq_len)  # fmt: skip
    lib.run_pv(gx, gy, threads, _ptr(p), _ptr(v), _ptr(out), seq_len)
    if params["causal"]:  # masked elements of S and P are never written
        hidden = np.triu(np.ones((seq_len, seq_len), dtype=bool), 1)
        assert np.isnan(s[:, hidden]).all() and np.isnan(p[:, hidden]).all()
    return out


@pytest.mark.skipif(bool(REASON), reason=REASON)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("params", CASES, ids=[f"L{c['seq_len']}-d{c['head_dim']}-causal{c['causal']}" for c in CASES])
def test_cupy_source_on_the_host(params: dict, dtype: str, tmp_path: Path) -> None:
    lib = _library(params, dtype, tmp_path)
    inputs = SCN.make_inputs(params, dtype, np.random.default_rng(5))
    ref = SCN.reference(inputs, params)
    tol = SCN.tolerance(inputs, params, dtype, ref)
    for variant in ("fused", "unfused"):
        _, problem = judge(_run(lib, variant, inputs, params), ref, tol)
        assert problem == "", f"{variant}: {problem}"
