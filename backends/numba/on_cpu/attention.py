"""Attention on the host CPU with Numba: a flash-style fused kernel against scores, softmax and P·V kernels.

Work is split as the scenario prescribes: one task per (batch·head, query tile of block_m rows), run in parallel
with `prange` (a head's tiles interleaved long with short, so that the causal triangle splits evenly between
threads); each task streams the keys in tiles of block_n, of its K/V head (b·kv_heads + h // (heads/kv_heads),
indexed, never copied: grouped-query attention reads a shared K/V head from each of its query heads' tasks). Both
variants share the tile code of `attention_tiles`, on float32 scratch tiles that stay in cache: the query tile
transposed and pre-scaled by 1/√d, a K and a V tile, and the scores key-major (st[j, i]). The two tile products
(Q·Kᵀ and P·V) are register-blocked micro-kernels on the host's widest float32 vectors (`attention_simd`: 8 lanes
with AVX2, 16 with AVX-512, recorded in the row as `extra.lanes`), each output summed in the reduction's order with
one fused multiply-add per term; the softmax loops run across queries, element by element, so LLVM vectorises them
without reassociating sums. Results do not depend on the vector width. The unfused kernels store S and P key-major
too (Sᵀ, Pᵀ: the same bytes, another order), so that the two variants differ only in fusion.

The kernels are `attention_kernels` (with the vectorisable exp both variants use); this module prepares
their arguments and compiles them for exactly those. Half-precision arrays arrive as their uint16 bits
(Numba's CPU target has no float16) and are converted as tiles are loaded or stored, with F16C where the host
has it (`VECTOR_CODECS`, which agree with NumPy bit for bit on every non-NaN half).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numba
import numpy as np

from backends.numba.on_cpu.arrays import storage
from backends.numba.on_cpu.attention_kernels import F32, kernels
from backends.numba.on_cpu.vector_width import HOST_LANES
from backends.numba.ops import CODECS
from suite.core.registry import Launch, Launcher, kernel


def _storage(a: np.ndarray) -> np.ndarray:
    """(batch, heads, L, d) -> (batch·heads, L, d) (K, V: batch·kv_heads), halves as their uint16 bits: views,
    no copies."""
    if not a.flags.c_contiguous:  # a reshape would copy, and the kernel would write into the copy
        raise ValueError("numba/cpu attention needs C-contiguous arrays")
    return storage(a.reshape(-1, *a.shape[2:]))


def _compiled(fn: Any, *args: Any) -> Any:
    """`fn` compiled now for exactly these arguments, so that no launch compiles."""
    fn.compile(tuple(numba.typeof(a) for a in args))
    return fn


def _prepare(inputs: dict[str, Any], out: np.ndarray, params: dict) -> tuple[SimpleNamespace, tuple, tuple]:
    dtype = str(out.dtype)
    if dtype not in CODECS or any(inputs[n].dtype != out.dtype for n in ("q", "k", "v")):
        raise ValueError(f"numba/cpu attention: q, k, v and out must share one dtype of {list(CODECS)}")
    arrays = (*(_storage(inputs[n]) for n in ("q", "k", "v")), _storage(out))
    tiles = (bool(params["causal"]), int(params["block_m"]), int(params["block_n"]))
    return kernels(dtype, HOST_LANES), arrays, tiles


@kernel(scenario="attention", backend="numba", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One kernel: per query tile, K and V streamed through in tiles, online softmax, nothing L×L stored."""
    ks, (q, k, v, o), (causal, block_m, block_n) = _prepare(inputs, out, params)
    args = (q, k, v, o, causal, block_m, block_n, F32(1.0 / math.sqrt(params["head_dim"])))
    flash = _compiled(ks.flash, *args)

    def launch() -> None:
        flash(*args)

    return Launch(launch, notes={"lanes": ks.lanes})


@kernel(scenario="attention", backend="numba", variant="unfused", device="cpu")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """Scores, softmax and P·V as three kernels; Sᵀ and Pᵀ (L×L per head) stored in the case's dtype."""
    ks, (q, k, v, o), (causal, block_m, block_n) = _prepare(inputs, out, params)
    seq_len = q.shape[1]
    sc, p = np.empty((q.shape[0], seq_len, seq_len), q.dtype), np.empty((q.shape[0], seq_len, seq_len), q.dtype)
    steps = [
        (ks.scores, (q, k, sc, causal, block_m, block_n, F32(1.0 / math.sqrt(params["head_dim"])))),
        (ks.softmax, (sc, p, causal, block_m)),
        (ks.pv, (p, v, o, causal, block_m, block_n)),
    ]
    steps = [(_compiled(fn, *args), args) for fn, args in steps]

    def launch() -> None:
        for fn, args in steps:
            fn(*args)

    return Launch(launch, notes={"lanes": ks.lanes})
