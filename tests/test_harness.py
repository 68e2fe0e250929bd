"""The harness on a fake scenario and backend: every fault becomes a row with a status and a reason."""

from __future__ import annotations

import pandas as pd
import pytest

from suite.run.results import Table, read
from suite.run.runner import run
from tests.conftest import make_config

FAKE = ["plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]", "device=cpu",
        "timing=quick", "dtype=float32"]  # fmt: skip


def by_variant(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {v: g for v, g in frame.groupby("variant")}


def test_faults_in_process_become_rows(tmp_path):
    cfg = make_config(*FAKE, "isolate=false", "variants=[good,twice,wrong,partial,raises]")
    rows = by_variant(run(cfg, tmp_path, show_progress=False).table)
    assert set(rows["good"]["status"]) == {"ok"} and rows["good"]["time_ms"].notna().all()
    assert (rows["good"]["peer_err"] == 0).all()  # compared with `twice`, not with the wrong ones
    assert set(rows["wrong"]["status"]) == {"mismatch"}
    assert rows["wrong"]["reason"].str.contains("exceeds tolerance").all()
    assert set(rows["partial"]["status"]) == {"mismatch"}
    assert rows["partial"]["reason"].str.contains("unwritten").all()
    assert set(rows["raises"]["status"]) == {"error"}
    assert rows["raises"]["reason"].str.contains("failed on purpose").all()
    assert rows["wrong"]["time_ms"].isna().all()  # wrong results are never timed


def test_rows_are_on_disk_and_carry_ledger_and_provenance(tmp_path):
    cfg = make_config(*FAKE, "isolate=false", "variants=[good]", "seed=7")
    frame = run(cfg, tmp_path, show_progress=False).table
    on_disk = read(tmp_path / "results.csv")
    assert len(on_disk) == len(frame) == 2
    row = on_disk.iloc[0]
    assert row["bytes_modeled"] > 0 and row["gbps"] > 0 and row["ceiling_gbps"] > 0
    assert row["pct_of_ceiling"] > 0
    assert row["store_model"] == "write-allocate"
    assert row["command"].startswith("python -m suite 'plugins=[tests.fakes]' scenario=fake_double")
    assert "variants=[good]" in row["command"]
    assert '"numpy"' in row["versions"] and row["seed"] > 0


def test_crash_and_timeout_cost_one_row_each(tmp_path):
    cfg = make_config(*FAKE, "isolate=true", "variants=[good,crash,slow]", "scenario.n=50",
                      "timing.case_timeout_s=3")  # fmt: skip
    rows = by_variant(run(cfg, tmp_path, show_progress=False).table)
    assert rows["good"]["status"].tolist() == ["ok"]
    assert rows["crash"]["status"].tolist() == ["error"]
    assert "worker died" in rows["crash"]["reason"].iloc[0]
    assert rows["slow"]["status"].tolist() == ["error"]
    assert "timeout" in rows["slow"]["reason"].iloc[0]


def test_resume_skips_finished_rows(tmp_path):
    cfg = make_config(*FAKE, "isolate=false", "variants=[good]")
    first = run(cfg, tmp_path, show_progress=False).table
    again = run(make_config(*FAKE, "isolate=false", "variants=[good,twice]", "resume=true"), tmp_path,
                show_progress=False).table  # fmt: skip
    assert len(again) == len(first) + 2
    assert again["variant"].value_counts().to_dict() == {"good": 2, "twice": 2}


def test_table_survives_a_cut_last_line(tmp_path):
    table = Table(tmp_path)
    table.close()
    with (tmp_path / "results.csv").open("a") as f:
        f.write("elementwise_chain,{broken")
    assert read(tmp_path / "results.csv").empty


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_save_io_writes_inputs_output_reference_meta(tmp_path, dtype):
    import json

    import numpy as np

    cfg = make_config(*FAKE[:-1], f"dtype={dtype}", "isolate=false", "variants=[good]", "save_io=true",
                      "scenario.n=9")  # fmt: skip
    run(cfg, tmp_path, show_progress=False)
    (path,) = (tmp_path / "io").glob("*.npz")
    data = np.load(path)
    assert data["x"].dtype == dtype and np.allclose(data["out"], 2 * data["x"].astype(np.float64), rtol=1e-3)
    meta = json.loads(str(data["meta"]))
    assert meta["backend"] == "fake" and meta["params"] == {"n": 9} and meta["variant"] == "good"
