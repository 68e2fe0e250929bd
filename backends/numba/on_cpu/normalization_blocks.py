"""Numba's fused CPU normalization over rows of one chunk, software-pipelined over a block of rows.

Row by row, a row's passes take turns: its statistics read it from memory, the passes after read it from L1/L2
and compute, its output is stored. Nothing overlaps the memory traffic with the arithmetic but the core's
out-of-order window, a few hundred instructions, far short of a row. Over a block of rows each loop instead
carries the memory stream of one row beside the work of another, so loads, stores and arithmetic are in
flight together:

- rmsnorm: one loop per row writes row i's output and takes row i+1's sum of squares (its first read);
- layernorm: one loop writes row i's output and takes row i+1's sum and sum of squares, both shifted by the
  row's first value, so a row far from zero loses nothing to the offset; where the shift is far from the mean
  in units of the spread (the variance would cancel more than 8 bits of the sum of squares), the centred
  squares are summed again from L1/L2, the two-pass variance;
- softmax: one loop computes row i's exponentials and their sum, row i+1's max and row i−1's output.

LLVM does not vectorise a loop holding both a maxnum and an fadd reduction, so softmax's max is taken over the
floats' bits as integers (`key`): their max and min give the floats' max, two integer instructions a vector.
Each block's first row is read alone (the pipeline's fill); `normalization_kernels` gives each thread several
blocks. Half-precision rows are converted as they are read (F16C), with no staging buffer.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba.extending import register_jitable

from backends.numba.on_cpu.normalization_rows import reciprocal, reciprocal_std
from backends.numba.ops import NEG_INF, VECTOR_CODECS, ZERO, exp_float32, fmax32
from backends.numba.ops import _bits_from_float as bits_from_float
from backends.numba.ops import _float_from_bits as float_from_bits

KEPT = np.float32(2.0**-8)
"""Layernorm: the share of the shifted sum of squares the variance must keep (at most 8 bits cancelled, a relative
error of 2⁸ ulp in the variance), else it is summed again about the mean. The row's first value, the shift, is
in the row, so it is at most √n spreads from the mean: the second pass is for long rows that start far out."""
KEY_MIN, KEY_MAX = np.int32(-(2**31)), np.int32(2**31 - 1)


@register_jitable
def key(v: float) -> int:
    """v's bits as an int32. Non-negative floats (sign bit clear) are the keys ≥ 0 and order as their keys do;
    negative floats are the keys < 0 and order in reverse, −0 the least key. So the largest float is the largest
    key if that is ≥ 0, else the least key (`max_from_keys`): a max of floats in two integer instructions."""
    return np.int32(bits_from_float(v))


@register_jitable
def max_from_keys(hi: int, lo: int) -> float:
    """The largest of floats whose keys have max hi and min lo. A NaN with its sign bit clear has a key above
    +inf's, so a row holding one gets a NaN max and NaN outputs; one with its sign bit set is never the max,
    and makes its row's outputs NaN through its exponential."""
    return float_from_bits(hi if hi >= 0 else lo)


def block_function(op: str, dtype: str) -> Any:
    """block(x, y, r0, r1, buf, wf, bf): `op` over rows r0..r1 − 1, pipelined; buf is the thread's float32
    scratch of two rows (softmax's exponentials), wf and bf the weight and bias in float32."""
    return {"layernorm": _layernorm_block, "rmsnorm": _rmsnorm_block, "softmax": _softmax_block}[op](dtype)


@functools.cache
def _rmsnorm_block(dtype: str) -> Any:
    load, store = VECTOR_CODECS[dtype]

    @register_jitable
    def square_sum(row):  # type: ignore[no-untyped-def]
        total = ZERO
        for j in range(row.size):
            v = load(row[j])
            total += v * v
        return total

    @register_jitable
    def output_then_square_sum(row, out, rstd, wf, nxt):  # type: ignore[no-untyped-def]
        """out = row · rstd · w; Σ nxt²."""
        total = ZERO
        for j in range(row.size):
            out[j] = store(load(row[j]) * rstd * wf[j])
            v = load(nxt[j])
            total += v * v
        return total

    @register_jitable
    def output(row, out, rstd, wf):  # type: ignore[no-untyped-def]
        for j in range(row.size):
            out[j] = store(load(row[j]) * rstd * wf[j])

    @register_jitable
    def block(x, y, r0, r1, buf, wf, bf):  # type: ignore[no-untyped-def]
        n = np.float32(x.shape[1])
        total = square_sum(x[r0])
        for r in range(r0, r1 - 1):
            total = output_then_square_sum(x[r], y[r], reciprocal_std(total / n), wf, x[r + 1])
        output(x[r1 - 1], y[r1 - 1], reciprocal_std(total / n), wf)

    return block


@functools.cache
def _layernorm_block(dtype: str) -> Any:
    load, store = VECTOR_CODECS[dtype]

    @register_jitable
    def shifted_moments(row, c):  # type: ignore[no-untyped-def]
        """(Σ (v − c), Σ (v − c)²) of a row."""
        s1, s2 = ZERO, ZERO
        for j in range(row.size):
            d = load(row[j]) - c
            s1 += d
            s2 += d * d
        return s1, s2

    @register_jitable
    def output_then_moments(row, out, mean, rstd, wf, bf, nxt, c):  # type: ignore[no-untyped-def]
        """out = (row − mean) · rstd · w + b; the shifted moments of nxt."""
        s1, s2 = ZERO, ZERO
        for j in range(row.size):
            out[j] = store((load(row[j]) - mean) * rstd * wf[j] + bf[j])
            d = load(nxt[j]) - c
            s1 += d
            s2 += d * d
        return s1, s2

    @register_jitable
    def statistics(row, s1, s2, c, n):  # type: ignore[no-untyped-def]
        """(mean, 1/std) from the moments shifted by c; where Σ (v − mean)² = s2 − s1²/n would cancel more of s2
        than `KEPT` allows (c far from the mean in units of the spread), or is not finite, summed again from
        L1/L2."""
        mean = c + s1 / n
        m2 = s2 - s1 * s1 / n
        if not m2 > KEPT * s2:
            m2 = ZERO
            for j in range(row.size):
                d = load(row[j]) - mean
                m2 += d * d
        return mean, reciprocal_std(m2 / n)

    @register_jitable
    def output(row, out, mean, rstd, wf, bf):  # type: ignore[no-untyped-def]
        for j in range(row.size):
            out[j] = store((load(row[j]) - mean) * rstd * wf[j] + bf[j])

    @register_jitable
    def block(x, y, r0, r1, buf, wf, bf):  # type: ignore[no-untyped-def]
        n = np.float32(x.shape[1])
        c = load(x[r0][0])
        s1, s2 = shifted_moments(x[r0], c)
        c_next = load(x[min(r0 + 1, r1 - 1)][0])
        for r in range(r0, r1 - 1):
            mean, rstd = statistics(x[r], s1, s2, c, n)
            # Each shift is loaded a row ahead: every moment of the row waits on it, and loaded just before
            # the loop it misses the cache and stalls the row (6% of the time at 1,024 columns).
            c, c_next = c_next, load(x[min(r + 2, r1 - 1)][0])
            s1, s2 = output_then_moments(x[r], y[r], mean, rstd, wf, bf, x[r + 1], c)
        mean, rstd = statistics(x[r1 - 1], s1, s2, c, n)
        output(x[r1 - 1], y[r1 - 1], mean, rstd, wf, bf)

    return block


@functools.cache
def _softmax_block(dtype: str) -> Any:
    load, store = VECTOR_CODECS[dtype]

    @register_jitable
    def row_max(row):  # type: ignore[no-untyped-def]
        m = NEG_INF
        for j in range(row.size):
            m = fmax32(m, load(row[j]))
        return m

    @register_jitable
    def exps(row, m, e, nxt, prev, inv, out):  # type: ignore[no-untyped-def]
        """Σ exp(row − m) with each term in e; the max of nxt; out = prev · inv. One loop, three rows."""
        total, hi, lo = ZERO, KEY_MIN, KEY_MAX
        for j in range(row.size):
            v = exp_float32(load(row[j]) - m)
            e[j] = v
            total += v
            k = key(load(nxt[j]))
            hi, lo = max(hi, k), min(lo, k)
            out[j] = store(prev[j] * inv)
        return total, max_from_keys(hi, lo)

    @register_jitable
    def first_exps(row, m, e, nxt):  # type: ignore[no-untyped-def]
        """As `exps`, with no previous row to write. A block's last row passes itself as nxt (read again from
        L1, its max unused), and is written apart, so that one loop serves every row but the middle ones."""
        total, hi, lo = ZERO, KEY_MIN, KEY_MAX
        for j in range(row.size):
            v = exp_float32(load(row[j]) - m)
            e[j] = v
            total += v
            k = key(load(nxt[j]))
            hi, lo = max(hi, k), min(lo, k)
        return total, max_from_keys(hi, lo)

    @register_jitable
    def scaled(e, inv, out):  # type: ignore[no-untyped-def]
        for j in range(e.size):
            out[j] = store(e[j] * inv)

    @register_jitable
    def block(x, y, r0, r1, buf, wf, bf):  # type: ignore[no-untyped-def]
        cols = x.shape[1]
        e = buf[: 2 * cols].reshape((2, cols))  # e[i % 2]: row i's exponentials, e[(i - 1) % 2] the previous row's
        m = row_max(x[r0])
        if r1 - r0 == 1:
            scaled(e[0], reciprocal(first_exps(x[r0], m, e[0], x[r0])[0]), y[r0])
            return
        total, m = first_exps(x[r0], m, e[0], x[r0 + 1])
        for i in range(1, r1 - r0 - 1):
            r = r0 + i
            inv = reciprocal(total)
            total, m = exps(x[r], m, e[i % 2], x[r + 1], e[(i - 1) % 2], inv, y[r - 1])
        i = r1 - r0 - 1
        scaled(e[(i - 1) % 2], reciprocal(total), y[r1 - 2])
        total = first_exps(x[r1 - 1], m, e[i % 2], x[r1 - 1])[0]
        scaled(e[i % 2], reciprocal(total), y[r1 - 1])

    return block
