"""Cross-entropy on the host CPU with Numba: one pass per row fused, against log-softmax, gather and mean.

Fused: a parallel loop over tokens walks each row in chunks of `tile` columns, converted into the thread's
float32 buffer (L1) where the case is half precision (float32 rows are read in place), and keeps an online max
and a rescaled sum of exponentials (`online_chunk`, `row_stats`): the row is
read from memory once and the target's logit picked from it, so only the token's float32 loss is stored. The
mean kernel sums the losses in token order (in float64) over the counted tokens. Unfused: the log-softmax row
kernel writes logp (the case's dtype; the row's second pass finds it in L2), then gather and the same mean.
Exponentials are the branch-free `exp_float32` and sums reassociate into vector lanes (`FASTMATH`), so the
loops vectorise; a chunk's max is taken over the floats' bits.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.on_cpu.arrays import per_thread, storage
from backends.numba.on_cpu.normalization_blocks import KEY_MAX, KEY_MIN, key, max_from_keys
from backends.numba.ops import VECTOR_CODECS, exp_float32
from scenarios.cross_entropy import IGNORE_INDEX
from suite.core.registry import Launcher, kernel

FASTMATH = {"reassoc", "contract"}
"""No `nnan`/`ninf`: the running max starts at −inf, and a NaN must still come out as a NaN."""
ZERO, NEG_INF = np.float32(0.0), np.float32(-np.inf)


@register_jitable
def online_chunk(c, m, total):  # type: ignore[no-untyped-def]
    """The running (max, Σ exp(v − max)) of a row merged with the float32 chunk `c`. The chunk's max is taken
    over the floats' bits (`normalization_blocks.key`): two integer instructions a vector, where `fmax32`'s
    NaN-aware maxnum takes a compare and a blend more; a NaN still makes the row's loss NaN (through the max or
    through its exponential)."""
    hi, lo = KEY_MIN, KEY_MAX
    for j in range(c.size):
        k = key(c[j])
        hi, lo = max(hi, k), min(lo, k)
    mc = max_from_keys(hi, lo)
    sc = ZERO
    for j in range(c.size):
        sc += exp_float32(c[j] - mc)
    new = max(m, mc)
    return new, total * exp_float32(m - new) + sc * exp_float32(mc - new)


@functools.cache
def row_stats(dtype: str) -> Any:
    """stats(row, tile, buf) -> (max, Σ exp(v − max)) of a row, `tile` columns at a time. float32 rows are read
    where they lie; half rows are converted into the thread's float32 buffer `buf` (L1) first. The float32 copy
    was a load and a store per value for nothing: the loop is bound by its arithmetic, not by memory, here."""
    load = VECTOR_CODECS[dtype][0]
    if dtype == "float32":

        @register_jitable(inline="always")
        def stats(row, tile, buf):  # type: ignore[no-untyped-def]
            m, total = NEG_INF, ZERO
            for start in range(0, row.size, tile):
                m, total = online_chunk(row[start : start + tile], m, total)
            return m, total

        return stats

    @register_jitable(inline="always")
    def stats_converted(row, tile, buf):  # type: ignore[no-untyped-def]
        m, total = NEG_INF, ZERO
        for start in range(0, row.size, tile):
            n = min(tile, row.size - start)
            chunk, c = row[start : start + n], buf[:n]
            for j in range(n):
                c[j] = load(chunk[j])
            m, total = online_chunk(c, m, total)
        return m, total

    return stats_converted


@functools.cache
def fused_rows(dtype: str) -> Any:
    load = VECTOR_CODECS[dtype][0]
    stats = row_stats(dtype)

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def rows(x, targets, losses, tile, scratch):  # type: ignore[no-untyped-def]
        for t in prange(x.shape[0]):
            row = x[t]
            m, total = stats(row, tile, scratch[numba.get_thread_id()])
            target = targets[t]
            losses[t] = ZERO if target == IGNORE_INDEX else m + np.float32(math.log(total)) - load(row[target])

    return rows


@functools.cache
def _log_softmax(dtype: str) -> Any:
    load, store = VECTOR_CODECS[dtype]
    stats = row_stats(dtype)

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def log_softmax(x, logp, tile, scratch):  # type: ignore[no-untyped-def]
        tokens, vocab = x.shape
        for t in prange(tokens):
            row, out = x[t], logp[t]
            m, total = stats(row, tile, scratch[numba.get_thread_id()])
            shift = m + np.float32(math.log(total))
            for j in range(vocab):
                out[j] = store(load(row[j]) - shift)

    return log_softmax


@functools.cache
def _gather(dtype: str) -> Any:
    load = VECTOR_CODECS[dtype][0]

    @njit(parallel=True, cache=False)
    def gather(logp, targets, losses):  # type: ignore[no-untyped-def]
        for t in prange(targets.size):
            target = targets[t]
            losses[t] = ZERO if target == IGNORE_INDEX else -load(logp[t, target])

    return gather


@functools.cache
def mean_kernel(dtype: str) -> Any:
    """out[0] = Σ losses / counted tokens, summed in token order in float64."""
    store = VECTOR_CODECS[dtype][1]

    @njit(cache=False)
    def mean(losses, targets, out):  # type: ignore[no-untyped-def]
        total, count = 0.0, 0
        for t in range(targets.size):
            if targets[t] != IGNORE_INDEX:
                total += losses[t]
                count += 1
        out[0] = store(np.float32(total / count))

    return mean


def compiled(dispatcher: Any, *args: Any) -> Any:
    """The dispatcher, compiled now for exactly these arguments so that no launch compiles."""
    dispatcher.compile(tuple(numba.typeof(a) for a in args))
    return dispatcher


def _arrays(inputs: dict[str, Any], out: np.ndarray) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    dtype = str(out.dtype)
    x, targets = inputs["logits"], inputs["targets"]
    if dtype not in VECTOR_CODECS or x.dtype != out.dtype or targets.dtype != np.int64:
        raise ValueError(
            f"numba/cpu cross_entropy: logits {x.dtype}, targets {targets.dtype} -> out {dtype}; "
            f"needs logits and out of one of {list(VECTOR_CODECS)}, int64 targets"
        )
    return dtype, storage(x), targets, storage(out)


@kernel(scenario="cross_entropy", backend="numba", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """Each row read once (online max and sum, the target's logit on the way), then the mean."""
    dtype, x, targets, y = _arrays(inputs, out)
    tile = min(int(params["tile"]), x.shape[1])
    losses, scratch = np.empty(x.shape[0], np.float32), per_thread(tile)
    rows = compiled(fused_rows(dtype), x, targets, losses, tile, scratch)
    mean = compiled(mean_kernel(dtype), losses, targets, y)

    def launch() -> None:
        rows(x, targets, losses, tile, scratch)
        mean(losses, targets, y)

    return launch


@kernel(scenario="cross_entropy", backend="numba", variant="unfused", device="cpu")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """log-softmax into logp (the case's dtype), gather −logp[target], mean."""
    dtype, x, targets, y = _arrays(inputs, out)
    tile = min(int(params["tile"]), x.shape[1])
    logp, losses, scratch = np.empty_like(x), np.empty(x.shape[0], np.float32), per_thread(tile)
    log_softmax = compiled(_log_softmax(dtype), x, logp, tile, scratch)
    gather = compiled(_gather(dtype), logp, targets, losses)
    mean = compiled(mean_kernel(dtype), losses, targets, y)

    def launch() -> None:
        log_softmax(x, logp, tile, scratch)
        gather(logp, targets, losses)
        mean(losses, targets, y)

    return launch
