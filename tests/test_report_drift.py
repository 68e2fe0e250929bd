"""The report's line about a copy ceiling that moved during the run: said per device where the per-case
readings spread beyond `SPREAD`, silent where they agree or the ceiling was measured once."""

from __future__ import annotations

import pandas as pd

from suite.report.drift import SPREAD, drifted


def _frame(cpu: list[float], cuda: list[float]) -> pd.DataFrame:
    rows = [{"device": "cpu", "ceiling_gbps": g} for g in cpu] + [{"device": "cuda", "ceiling_gbps": g} for g in cuda]
    return pd.DataFrame(rows)


def test_a_moved_ceiling_is_said_once_for_its_device() -> None:
    # three cases on the CPU, two rows each; the GPU's two readings agree
    lines = drifted(_frame([40.0, 40.0, 41.0, 41.0, 75.0, 75.0, None], [3000.0, 3010.0]))
    assert len(lines) == 1
    assert "(cpu)" in lines[0] and "40.0 to 75.0 GB/s" in lines[0] and "1.88×" in lines[0]
    assert "median 41.0 over 3 readings" in lines[0]


def test_readings_within_the_spread_or_measured_once_say_nothing() -> None:
    assert drifted(_frame([40.0, 40.0 * SPREAD], [])) == []
    assert drifted(_frame([40.0] * 6, [3000.0] * 4)) == []
    assert drifted(pd.DataFrame({"device": ["cpu"], "time_ms": [1.0]})) == []


def test_the_line_is_in_the_report(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from suite.report.report import sections
    from suite.run.runner import run
    from tests.conftest import make_config

    cfg = make_config("plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]",
                      "variants=[good]", "device=cpu", "dtype=float32", "timing=quick", "isolate=false")  # fmt: skip
    frame = run(cfg, tmp_path, show_progress=False).table
    assert not any("Bandwidth moved" in part for part in sections(frame, [], tmp_path))
    timed = frame["ceiling_gbps"].notna()
    assert timed.sum() >= 2
    frame.loc[timed, "ceiling_gbps"] = [10.0 + 20.0 * (i % 2) for i in range(int(timed.sum()))]
    text = "\n\n".join(sections(frame, [], tmp_path))
    assert "**Bandwidth moved during the run (cpu):** the copy timed beside each case read 10.0 to 30.0 GB/s" in text
