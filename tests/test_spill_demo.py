"""The spill demonstration (conf/experiment/spill.yaml) shows what the seed's trade-off looks like in numbers.

The fused CuPy layernorm holding 256 values of a 16,384-column row per thread must spill in its sm_90 build,
while the unfused steps (which stream) and the same kernel at 64 values per thread must not; the report must
say so next to the kernel. A Triton case emulated on a slice must report the kernels built for the case
itself, not for the slice (a narrower slice compiles a smaller tile).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from suite.report.report import write_report
from suite.run.runner import run
from tests.support import missing, nvrtc_reason

pytestmark = pytest.mark.usefixtures("fresh_resource_cache")


def _kernels(row: pd.Series) -> list[dict]:
    return json.loads(row["extra"])["kernels"]


@pytest.mark.compile
@pytest.mark.skipif(bool(nvrtc_reason()), reason=nvrtc_reason())
def test_spill_experiment_spills_only_the_fused_wide_row(config, tmp_path) -> None:
    cfg = config("experiment=spill", "scenario.rows=[2]", "isolate=false")
    frame = run(cfg, tmp_path, show_progress=False).table
    assert set(frame["backend"]) == {"cupy"} and len(frame) == 4, frame[["params", "variant", "status"]]
    cols = frame["params"].map(lambda p: json.loads(p)["cols"])
    wide_fused = frame[(cols == 16384) & (frame["variant"] == "fused")].iloc[0]
    assert wide_fused["spill_bytes"] > 0 and wide_fused["regs"] == 255, wide_fused.to_dict()
    (kernel,) = _kernels(wide_fused)
    assert kernel["threads"] == 64 and kernel["local_bytes"] > 0
    for _, row in frame[(cols == 4096) | (frame["variant"] == "unfused")].iterrows():
        assert row["spill_bytes"] == 0, (row["params"], row["variant"], _kernels(row))
    text = write_report(frame, [], tmp_path).read_text()
    section = text[text.index("### Resource pressure") :]
    assert f"`{kernel['name']}` spills {int(wide_fused['spill_bytes']):,} bytes per thread" in section
    assert "the unfused kernels: at most" in section and "no spills" in section


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton")), reason=missing("triton"))
def test_emulated_rows_report_the_kernels_of_the_case_not_the_slice(config, tmp_path) -> None:
    cfg = config("scenario=layernorm", "scenario.rows=[3]", "scenario.cols=[16384]", "scenario.tile=[16384]",
                 "dtype=[float16]", "backends=[triton]", "device=cuda", "isolate=false")  # fmt: skip
    frame = run(cfg, tmp_path, show_progress=False).table
    assert len(frame) == 2 and (frame["mode"] == "emulated").all(), frame[["variant", "status", "reason"]]
    for _, row in frame.iterrows():
        assert row["status"] == "ok", row["reason"]
        assert json.loads(row["checked_params"])["cols"] < 16384  # numerics ran on a slice
        extra = json.loads(row["extra"])
        assert "resources_params" not in extra
        names = [k["name"] for k in extra["kernels"]]
        assert names and all("TILE=16384" in n for n in names), names
