"""What a run keeps on disk: every repetition by row id, typed Parquet copies, the environment; and reading it back."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from suite.core.errors import ConfigError
from suite.kit import store
from suite.run.results import REPS_NAME, aggregate, read, read_reps
from suite.run.runner import run
from tests.conftest import make_config

FAKE = ["plugins=[tests.fakes]", "scenario.name=fake_double", "preset=S", "backends=[fake]", "device=cpu",
        "timing=quick", "dtype=float32", "isolate=false"]  # fmt: skip


def test_every_repetition_is_kept_under_its_row_id(tmp_path):
    frame = run(make_config(*FAKE, "variants=[good,twice,wrong]"), tmp_path, show_progress=False, run_id="r").table
    reps = read_reps(tmp_path / REPS_NAME)
    assert frame["row_id"].tolist() == [f"r#{i}" for i in range(len(frame))]
    counts = reps.groupby("row_id").size()
    timed = frame[frame["time_ms"].notna()]
    assert len(timed) == 4 and set(counts.index) == set(timed["row_id"])  # wrong rows are never timed
    for row in timed.itertuples():
        mine = reps[reps["row_id"] == row.row_id].sort_values("round")
        assert mine["round"].tolist() == list(range(int(row.reps))) and set(mine["variant"]) == {row.variant}
        assert mine["time_ms"].median() == pytest.approx(row.time_ms)
        assert mine["time_ms"].min() == pytest.approx(row.time_min_ms)


def test_resume_numbers_rows_on_and_appends_their_repetitions(tmp_path):
    run(make_config(*FAKE, "variants=[good]"), tmp_path, show_progress=False, run_id="r")
    again = run(make_config(*FAKE, "variants=[good,twice]", "resume=true"), tmp_path, show_progress=False,
                run_id="r").table  # fmt: skip
    assert again["row_id"].tolist() == [f"r#{i}" for i in range(4)]
    assert set(read_reps(tmp_path / REPS_NAME)["row_id"]) == set(again["row_id"])


def test_parquet_round_trips_types_and_expands_params(tmp_path):
    frame = run(make_config(*FAKE, "variants=[good,wrong]"), tmp_path, show_progress=False).table
    back = pd.read_parquet(tmp_path / store.RESULTS_PARQUET)
    assert len(back) == len(frame)
    assert str(back["time_ms"].dtype) == "float64" and str(back["bytes_modeled"].dtype) == "Int64"
    assert str(back["cold_cache"].dtype) == "boolean" and str(back["status"].dtype) == "string"
    assert str(back["param_n"].dtype) == "Int64"
    assert back["param_n"].tolist() == [json.loads(p)["n"] for p in frame["params"]]
    assert back["time_ms"].isna().tolist() == frame["time_ms"].isna().tolist()
    reps = pd.read_parquet(tmp_path / store.REPS_PARQUET)
    assert list(reps.columns) == ["row_id", "variant", "round", "time_ms", "block", "canary_ms", "excluded"]
    assert str(reps["round"].dtype) == "int64" and str(reps["time_ms"].dtype) == "float64"
    assert len(reps) == frame["reps"].fillna(0).sum()


def test_params_of_every_kind_get_a_typed_column():
    frame = pd.DataFrame({"params": [
        json.dumps({"n": 8, "ops": ["scale", "gelu"], "causal": True, "tile": 256}),
        json.dumps({"m": 3, "tile": [16, 16, 16], "causal": False}),
    ]})  # fmt: skip
    out = store.typed(frame)
    assert out["param_n"].tolist()[0] == 8 and out["param_n"].isna().tolist() == [False, True]
    assert out["param_ops"].tolist()[0] == ["scale", "gelu"]
    assert out["param_causal"].tolist() == [True, False] and str(out["param_causal"].dtype) == "boolean"
    assert out["param_tile"].tolist() == ["256", "[16, 16, 16]"]  # an integer here, a list there: JSON text


def test_environment_names_the_machine_and_every_distribution(tmp_path):
    run(make_config(*FAKE, "variants=[good]"), tmp_path, show_progress=False)
    env = json.loads((tmp_path / store.ENVIRONMENT).read_text())
    assert env["python"].count(".") == 2 and env["os"] and env["cpu"]["model"]
    assert env["cpu"]["cpu_count"] >= 1 and isinstance(env["cpu"]["flags"], list)
    assert {"pandas", "numpy", "hydra-core"} <= set(env["distributions"])


def test_a_multirun_merges_rows_and_repetitions(tmp_path):
    for job in ("0", "1"):
        run(make_config(*FAKE, "variants=[good]"), tmp_path / job, show_progress=False, run_id=f"sweep/{job}")
    frame = aggregate([tmp_path / "0" / "results.csv", tmp_path / "1" / "results.csv"], tmp_path / "results.csv")
    reps = read_reps(tmp_path / REPS_NAME)
    assert frame["row_id"].is_unique and set(reps["row_id"]) == set(frame["row_id"])
    store.merge_environments([tmp_path / "0", tmp_path / "1"], tmp_path)
    assert json.loads((tmp_path / store.ENVIRONMENT).read_text())["python"]


def test_load_reads_a_run_back_and_refuses_what_is_not_one(tmp_path):
    frame = run(make_config(*FAKE, "variants=[good]"), tmp_path, show_progress=False).table
    loaded = store.load(tmp_path / "results.csv")
    assert loaded.path == tmp_path and len(loaded.results) == len(frame)
    first = frame["row_id"].iloc[0]
    assert len(loaded.times(first)) == frame["reps"].iloc[0] and loaded.environment
    with pytest.raises(ConfigError, match="no run at"):
        store.load(tmp_path / "nowhere")


def test_a_run_without_repetitions_still_loads(tmp_path):
    frame = run(make_config(*FAKE, "variants=[good]"), tmp_path, show_progress=False).table
    for name in (REPS_NAME, store.REPS_PARQUET, store.RESULTS_PARQUET, store.ENVIRONMENT):
        (tmp_path / name).unlink()
    frame.drop(columns=["row_id"]).to_csv(tmp_path / "results.csv", index=False)  # as runs wrote before ids
    loaded = store.load(tmp_path)
    assert loaded.reps.empty and loaded.times("") == [] and len(read(tmp_path / "results.csv")) == len(frame)
