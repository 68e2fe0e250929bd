"""The CPU ceiling is a copy that stores as the kernels do, and the streaming copies are kept beside it."""

from __future__ import annotations

import numpy as np

from suite.run import ceiling


def test_the_ordinary_store_copy_copies_and_cannot_become_memcpy() -> None:
    memcpy_loop, ordinary = ceiling.numba_copies()
    rng = np.random.default_rng(3)
    src, dst = rng.standard_normal(10_001).astype(np.float32), np.full(10_001, np.nan, np.float32)
    ordinary(src, dst, np.float32(0.0))
    np.testing.assert_array_equal(dst, src)
    asm = ordinary.inspect_asm(ordinary.signatures[0])
    assert "memcpy" not in asm and "movnt" not in asm  # else it may stream, and is no ordinary-store bound
    memcpy_loop(src, dst)
    assert "memcpy" in memcpy_loop.inspect_asm(memcpy_loop.signatures[0])  # the other copy is the memcpy one


def test_cpu_rows_are_held_to_the_ordinary_store_copy_even_when_a_streaming_copy_is_faster() -> None:
    rates = {"numpy copyto": 22.0, "numba parallel memcpy": 40.0, ceiling.ORDINARY_STORE_COPY: 25.0}
    assert ceiling.held_to("cpu", rates) == ceiling.ORDINARY_STORE_COPY
    assert ceiling.held_to("cpu", {"numpy copyto": 22.0, "torch copy_": 19.0}) == "numpy copyto"
    assert ceiling.held_to("cuda", {"cupy copy": 4100.0, "torch copy_": 4250.0}) == "torch copy_"
