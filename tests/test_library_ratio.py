"""The hand kernel against the library, where a case timed two libraries (torch's GEMM and NumPy's): each named
with its own ratio, never one median across them, which would be neither library's."""

from __future__ import annotations

import pandas as pd

from suite.report.glance import library_ratio


def _rows(times: dict[str, float]) -> pd.DataFrame:
    case = {"scenario": "matmul", "params": '{"m": 1024}', "phase": "forward", "dtype": "float32", "device": "cpu"}
    return pd.DataFrame(
        [{**case, "impl": impl, "variant": variant, "time_ms": t} for (impl, variant), t in times.items()]
    )


def test_two_libraries_each_get_their_ratio() -> None:
    timed = _rows({("numba/cpu", "tiled"): 10.0, ("torch/cpu", "library"): 6.5, ("numpy/cpu", "library"): 12.4})
    hand = timed.iloc[0]
    assert library_ratio(hand, timed) == "0.65× (torch), 1.24× (numpy)"


def test_one_library_is_one_ratio_and_none_is_empty() -> None:
    timed = _rows({("numba/cpu", "fused"): 10.0, ("torch/cpu", "library"): 25.0})
    assert library_ratio(timed.iloc[0], timed) == "2.50×"
    alone = _rows({("numba/cpu", "fused"): 10.0})
    assert library_ratio(alone.iloc[0], alone) == ""
