"""The memory boundary named: a case whose removed intermediates fit in the last-level cache is cache-resident and
its prediction an upper bound, and every row above the copy ceiling is given the reason its own figures give."""

from __future__ import annotations

import pandas as pd

from suite.report import boundary
from suite.report.verdict import _why

MIB = 2**20


def row(**changes: object) -> pd.Series:
    base = {"series": "rows=64", "size_axis": "cols", "size": 4096, "impl": "numba/cpu", "variant": "unfused",
            "status": "ok", "series_rank": 0, "store_model": "write-allocate", "launches": 2, "gbps": 40.0,
            "ceiling_gbps": 36.0, "ceiling_streaming_gbps": 38.0, "pct_of_ceiling": 111.0,
            "bytes_read": 400 * MIB, "bytes_written": 200 * MIB, "cache_bytes": 32 * MIB,
            "bytes_saved": 120 * MIB}  # fmt: skip
    return pd.Series({**base, **changes})


def test_intermediates_that_fit_in_the_last_level_cache_are_cache_resident() -> None:
    assert boundary.resident(row(bytes_saved=60 * MIB))  # 30 MiB held, a 32 MiB cache
    assert boundary.fit(row(bytes_saved=60 * MIB)) == "31.5 MB in 32 MiB: cache-resident"
    assert not boundary.resident(row())  # 60 MiB held
    assert boundary.fit(row()) == "62.9 MB over 32 MiB: memory"
    assert not boundary.resident(row(cache_bytes=None)) and boundary.fit(row(cache_bytes=None)) == ""
    assert not boundary.resident(row(bytes_saved=0))  # nothing removed: nothing to be resident


def _reason(**changes: object) -> str:
    text = boundary.above_ceiling(pd.DataFrame([row(**changes)]))
    assert text is not None
    return text.splitlines()[-1]


def test_every_row_above_the_ceiling_is_explained_not_only_far_above_it() -> None:
    assert boundary.above_ceiling(pd.DataFrame([row(pct_of_ceiling=99.0)])) is None
    streaming = _reason()  # 40 GB/s: above the 38 GB/s non-temporal copy, 300 MiB per launch: beyond the cache
    assert "111%" in streaming and "do not account for it" in streaming
    assert "non-temporal copy's 41.0 GB/s" in _reason(ceiling_streaming_gbps=41.0)
    cached = _reason(bytes_read=20 * MIB, bytes_written=10 * MIB)  # 15 MiB per launch, a 32 MiB cache
    assert "working set (15 MiB) fits in the 32 MiB last-level cache" in cached
    once = _reason(store_model="write-once", ceiling_streaming_gbps=41.0)  # no allocate read to skip
    assert "non-temporal" in once and "do not account for it" in once


def test_the_verdict_calls_a_cache_resident_prediction_an_upper_bound() -> None:
    line = pd.DataFrame([{"size": 4096, "size_axis": "cols", "variant": "fused", "baseline": "unfused",
                          "speedup": 1.6, "predicted": 1.8, "pct_of_ceiling": 70.0, "pct_of_ceiling_base": 90.0,
                          "bytes_saved": 20e6, "cache_bytes": 32 * MIB}])  # fmt: skip
    assert "cache-resident: the 10 MB of intermediates fusion removes fit in the 32 MiB" in _why(line)
    assert "cache-resident" not in _why(line.assign(bytes_saved=200e6))
