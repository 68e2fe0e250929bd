"""Shapes from real models: every model file composes with every family, sweeps of models are one sweep, rows
name their model and layer, and a model case too large for the machine is refused before any work."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from suite import cli
from suite.core import host_memory
from suite.core.errors import ConfigError
from suite.core.scenario import discover
from suite.run import validate

MODELS = sorted(p.stem for p in (Path(cli.CONF) / "model").glob("*.yaml"))
FAMILIES = {"elementwise_chain", "layernorm", "rmsnorm", "softmax", "attention", "matmul", "add_rmsnorm", "swiglu",
            "rope", "decoder_layer"}  # fmt: skip
"""The in-tree families of the model tour; a plug-in that declares `model_tour` joins them (tests/toy_family.py)."""


def touring() -> set[str]:
    return {name for name, scn in discover().items() if scn.model_tour}


def test_the_shipped_models_name_their_source() -> None:
    assert {"llama3_8b", "llama3_70b", "mistral_7b", "qwen2_5_7b", "gpt2", "smollm2_135m"} <= set(MODELS)
    for name in MODELS:
        data = yaml.safe_load((Path(cli.CONF) / "model" / f"{name}.yaml").read_text())
        assert data["name"] == name and data["source"].startswith("https://")
        assert data["hidden_size"] == data["num_attention_heads"] * data["head_dim"]


@pytest.mark.parametrize("model", MODELS)
def test_a_model_sets_every_familys_axes(model: str) -> None:
    args = cli.with_model_tour([f"model={model}", "tokens=1024", "device=cpu"])
    assert args[0] == "-m" and any(a.startswith("experiment=model_") for a in args)
    jobs = cli.compose_jobs(args)
    spec = yaml.safe_load((Path(cli.CONF) / "model" / f"{model}.yaml").read_text())
    seen = set()
    for cfg in jobs:
        plan = validate.plan(cfg)
        params = plan.cases[0]
        seen.add(plan.scenario.name)
        assert cfg.model.name == model and cfg.layer
        if plan.scenario.name in ("layernorm", "rmsnorm"):
            assert (params["rows"], params["cols"]) == (1024, spec["hidden_size"])
        if "tile" in plan.scenario.resolvers:  # the family's own resolver: a tile that holds the row whole
            assert params["tile"] == plan.scenario.resolvers["tile"](params["cols"]) >= min(params["cols"], 16384)
        if plan.scenario.name == "matmul":
            assert (params["m"], params["k"], params["n"]) == (1024, spec["hidden_size"], spec["intermediate_size"])
        if plan.scenario.name == "attention":
            seq = min(1024, spec["context"])
            assert params["batch"] * params["seq_len"] == 1024 and params["seq_len"] == seq
            assert (params["heads"], params["head_dim"]) == (spec["num_attention_heads"], spec["head_dim"])
            assert params["kv_heads"] == spec["num_key_value_heads"]
        if plan.scenario.name == "rope":
            assert (params["heads"], params["kv_heads"]) == (spec["num_attention_heads"], spec["num_key_value_heads"])
            assert {case["pairing"] for case in plan.cases} == {spec.get("rope_pairing", "half")}
        if plan.scenario.name == "elementwise_chain":
            assert params["n"] == 1024 * spec["intermediate_size"] and params["ops"][-1] == spec["hidden_act"]
    assert seen == touring() and seen >= FAMILIES
    (cfg,) = cli.compose_jobs([f"model={model}", "tokens=1024", "experiment=model_cross_entropy"])
    params = validate.plan(cfg).cases[0]
    assert (params["tokens"], params["vocab"]) == (1024, spec["vocab_size"])


def test_models_sweep_as_one_sweep_and_a_scenario_keeps_its_own() -> None:
    args = cli.with_model_tour(["-m", "model=llama3_8b,mistral_7b", "device=cpu"])
    assert args.count("-m") == 1
    names = {(cfg.model.name, cfg.scenario.name) for cfg in cli.compose_jobs(args)}
    assert len(names) == 2 * len(touring())
    # a scenario or experiment named: the model only feeds its interpolations, no tour is added
    assert cli.with_model_tour(["model=gpt2", "experiment=model_softmax"]) == ["model=gpt2", "experiment=model_softmax"]
    assert cli.with_model_tour(["scenario=softmax"]) == ["scenario=softmax"]


def test_seq_len_must_divide_the_tokens() -> None:
    with pytest.raises(ConfigError, match="not a whole number of sequences"):
        cli.precheck(["model=gpt2", "tokens=1500", "seq_len=1024", "experiment=model_attention", "device=cpu"])


def test_an_unknown_model_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown model 'llama9'; valid: .*llama3_8b"):
        cli.precheck(cli.with_model_tour(["model=llama9", "device=cpu"]))


def test_a_model_case_too_large_for_the_machine_is_refused_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 8 * 2**30 // 4096}  # an 8 GiB machine
    monkeypatch.setattr(host_memory.os, "sysconf", lambda name: pages[name])
    args = ["model=llama3_70b", "tokens=131072", "seq_len=8192", "experiment=model_attention", "device=cpu"]
    # q and O 4 GiB each, K and V (8 K/V heads of 64) 0.5 GiB each: the fused kernel's and the library's peak
    with pytest.raises(ConfigError, match=r"needs about 9\.0 GiB \(its smallest variant's peak.*has 8\.0 GiB"):
        cli.precheck(args)


def test_rows_name_their_model_and_layer(tmp_path: Path) -> None:
    from suite.run.runner import run
    from tests.conftest import make_config

    cfg = make_config("model=gpt2", "tokens=64", "experiment=model_rmsnorm", "backends=[numba]", "device=cpu",
                      "timing=quick", "isolate=false", "variants=[fused]")  # fmt: skip
    frame = run(cfg, tmp_path, show_progress=False).table
    assert set(frame["model"]) == {"gpt2"} and set(frame["layer"]) == {"RMSNorm, tokens × hidden"}
    assert (frame["status"] == "ok").all()
    from suite.kit.tidy import tidy

    both = tidy(pd.concat([frame, frame.assign(model="mistral_7b"), frame.assign(model="")]))
    assert {t.split(":")[0] for t in both["title"]} >= {"gpt2", "mistral_7b"}  # one facet per model
    assert both.groupby("model")["series"].nunique().eq(1).all() and both["series"].nunique() == 3
    assert not both.loc[both["model"] == "", "title"].iloc[0].startswith(":")  # synthetic rows keep their titles
