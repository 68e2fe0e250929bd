"""Peers: every correct output held against the others of the same params, large ones on a seeded sample."""

from __future__ import annotations

import numpy as np

from suite.core.registry import KernelKey
from suite.run import measure
from suite.run.stages import Availability, Check, Stages


def _found(*outs: np.ndarray) -> measure.Found:
    return {
        KernelKey("s", f"b{i}", "fused", "cpu"): Stages(
            Availability("native"), check=Check("ok", tolerance=1e-5, out=o)
        )
        for i, o in enumerate(outs)
    }


def _errs(found: measure.Found) -> list[float]:
    return [s.peer.peer_err for s in measure.peers(found, seed=3).values()]


def test_a_small_output_is_compared_element_by_element():
    a = np.random.default_rng(0).standard_normal(4099).astype(np.float32) + 3
    b = a.copy()
    b[1234] *= 1.01
    found = measure.peers(_found(a, b, a.copy()))
    assert [s.peer.status for s in found.values()] == ["mismatch", "mismatch", "mismatch"]
    assert max(s.peer.peer_err for s in found.values()) > 9e-3


def test_a_large_output_is_compared_on_a_sample_that_keeps_both_ends():
    a = np.random.default_rng(1).standard_normal(measure.PEER_SAMPLE * 3).astype(np.float32) + 3
    last, spread = a.copy(), a.copy()
    last[-1] *= 1.01  # only the last element differs: a tail a kernel left wrong
    spread[::97] *= 1.01  # one element in 97 differs: the sample cannot miss it
    assert min(_errs(_found(a, last))) > 9e-3
    assert min(_errs(_found(a, spread))) > 9e-3
    assert _errs(_found(a, a.copy())) == [0.0, 0.0]
