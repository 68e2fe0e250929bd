"""The CPU ceiling is a copy that stores as the kernels do, and the streaming copies are kept beside it."""

from __future__ import annotations

import numpy as np

from backends.numba.copies import copy_kernels
from suite.core import registry
from suite.run import ceiling


def test_the_ordinary_store_copy_copies_and_cannot_become_memcpy() -> None:
    memcpy_loop, ordinary = copy_kernels()
    rng = np.random.default_rng(3)
    src, dst = rng.standard_normal(10_001).astype(np.float32), np.full(10_001, np.nan, np.float32)
    ordinary(src, dst, np.float32(0.0))
    np.testing.assert_array_equal(dst, src)
    asm = ordinary.inspect_asm(ordinary.signatures[0])
    assert "memcpy" not in asm and "movnt" not in asm  # else it may stream, and is no ordinary-store bound
    memcpy_loop(src, dst)
    assert "memcpy" in memcpy_loop.inspect_asm(memcpy_loop.signatures[0])  # the other copy is the memcpy one


def test_cpu_rows_are_held_to_the_ordinary_store_copy_even_when_a_streaming_copy_is_faster() -> None:
    rates = {"numpy copyto": 22.0, "numba parallel memcpy": 40.0, "numba ordinary-store copy": 25.0}
    assert ceiling.held_to(rates, {"numba ordinary-store copy"}) == "numba ordinary-store copy"
    assert ceiling.held_to({"numpy copyto": 22.0, "torch copy_": 19.0}, set()) == "numpy copyto"
    assert ceiling.held_to({"cupy copy": 4100.0, "torch copy_": 4250.0}, {"cupy copy", "torch copy_"}) == "torch copy_"


def test_the_backends_bring_the_cpu_copies_and_say_which_may_stream() -> None:
    registry.discover()
    found = {c.method: c for c in ceiling.copies("cpu", 1000, None)}
    assert not found["numba ordinary-store copy"].streams
    assert found["numba parallel memcpy"].streams and found["numpy copyto"].streams
    for copy in found.values():
        copy.launch()  # each is ready to time
    assert not ceiling.copies("cuda", 1000, None)  # no stream, no GPU copy
