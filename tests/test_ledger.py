"""The elementwise ledger against hand counts, and the ledger arithmetic itself."""

from __future__ import annotations

import pytest

from scenarios.elementwise_chain import ElementwiseChain
from suite.core.ledger import WRITE_ALLOCATE, WRITE_ONCE, Intermediate, KernelTraffic, VariantLedger, stream_bytes

CHAIN = ElementwiseChain()


def test_seed_example_one_million_halves_saves_four_megabytes():
    lg = CHAIN.ledger({"n": 1_000_000, "ops": ["scale", "gelu"]}, "float16")
    assert lg["fused"].saved_bytes == 4_000_000
    assert [i.elements for i in lg["fused"].removed] == [1_000_000]


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
@pytest.mark.parametrize("ops", [["gelu"], ["scale", "shift", "relu", "square", "tanh", "sigmoid", "silu", "gelu"]])
def test_hand_counts(dtype, s, ops):
    n, k = 1000, len(ops)
    lg = CHAIN.ledger({"n": n, "ops": ops}, dtype)
    unfused, fused = lg["unfused"], lg["fused"]
    assert (unfused.launches, fused.launches) == (k, 1)
    assert unfused.bytes_read == k * n * s and unfused.bytes_written == k * n * s
    assert fused.bytes_read == n * s and fused.bytes_written == n * s
    assert unfused.bytes_moved(WRITE_ONCE) - fused.bytes_moved(WRITE_ONCE) == fused.saved_bytes == 2 * (k - 1) * n * s
    # write-allocate: every written byte is read first, so each kernel moves 3·n·s
    assert unfused.bytes_moved(WRITE_ALLOCATE) == 3 * k * n * s
    assert fused.bytes_moved(WRITE_ALLOCATE) == 3 * n * s
    assert fused.flops == unfused.flops


def test_gelu_flops_and_totals():
    lg = CHAIN.ledger({"n": 10, "ops": ["scale", "gelu"]}, "float32")
    assert lg["fused"].flops == 10 * (1 + 9)


def test_variant_ledger_sums():
    lg = VariantLedger("x", (KernelTraffic("a", 10, 20, 3), KernelTraffic("b", 1, 2, 4)), (Intermediate("t", 5, 2),))
    assert (lg.bytes_read, lg.bytes_written, lg.flops, lg.launches, lg.saved_bytes) == (11, 22, 7, 2, 20)
    assert stream_bytes(100, 4, WRITE_ONCE) == 800 and stream_bytes(100, 4, WRITE_ALLOCATE) == 1200
