"""decoder_layer: every variant on Numba CPU against the float64 chain, with and without the model's head, the
registry's kernels doing the ops, the ledger as the sum of its ops' ledgers, and the one-line refusals of a bad
case, variant or model, or of a head that would not fit."""

from __future__ import annotations

import re

import numpy as np
import pytest

from scenarios.decoder_layer import HEAD, OPS, VARIANTS, op_params, op_variants, ops_of
from scenarios.decoder_layer.chain import gemms
from scenarios.decoder_layer.ledger import RIVALS
from suite import cli
from suite.core import host_memory, numerics, registry, targets
from suite.core import scenario as scenarios
from suite.core.errors import ConfigError
from suite.core.registry import KernelKey, Unsupported
from suite.run import validate
from tests.conftest import make_config

registry.discover()
LAYER = scenarios.get("decoder_layer")
SMALL = {k: v[0] for k, v in LAYER.presets["S"].items()}
CASES = [LAYER.checks[0], SMALL]
"""The awkward check (3:1 heads, interleaved, hidden ≠ heads·head_dim) and the S preset (2:1, half)."""
HEADED = {**SMALL, "lm_head": True}
"""The S preset with the model's head: a vocabulary of 781, chunks of 4 tokens (8 of them and one ragged)."""
LAYER_VARIANTS = [v for v in VARIANTS if v != f"fused_{HEAD}"]


def _run(variant: str, params: dict, seed: int = 7) -> tuple[np.ndarray, np.ndarray, float]:
    """(output, float64 reference, tolerance) of one launch of `variant` on Numba CPU, the output poisoned first."""
    target = targets.TARGETS[("numba", "cpu")]
    inputs = LAYER.make_inputs(params, "float32", np.random.default_rng(seed))
    ref = LAYER.reference(inputs, params)
    out = target.empty(LAYER.output_shape(params), "float32")
    target.poison(out)
    launch = registry.REGISTRY.get(KernelKey("decoder_layer", "numba", variant, "cpu"))(inputs, out, params, {})
    launch()
    return out, ref, LAYER.tolerance(inputs, params, "float32", ref)


@pytest.mark.parametrize("params", CASES, ids=["check", "S"])
@pytest.mark.parametrize("variant", LAYER_VARIANTS)
def test_every_variant_matches_the_float64_chain(variant: str, params: dict) -> None:
    out, ref, tol = _run(variant, params)
    err, problem = numerics.judge(out, ref, tol)
    assert problem == "", f"{variant} {params}: {problem}"
    assert err > 0 and tol < 1e-3  # a real comparison, not one the floor or the ceiling decided
    assert np.abs(ref[1]).max() > 0.1 * np.abs(ref[0]).max()  # the MLP's output is judged, not drowned by h2


@pytest.mark.parametrize("variant", VARIANTS)
def test_with_the_head_every_variant_matches_the_float64_loss(variant: str) -> None:
    """The layer, the final norm and linear_cross_entropy's kernel: the mean loss against the float64 chain's."""
    out, ref, tol = _run(variant, HEADED)
    assert out.shape == ref.shape == (1,) and 1.0 < ref[0] < 20.0  # a loss near log(vocab), not a zero
    err, problem = numerics.judge(out, ref, tol)
    assert problem == "", f"{variant}: {problem}"
    assert err > 0 and tol < 1e-3


def test_the_heads_variant_needs_the_head() -> None:
    """fused_linear_cross_entropy is not compared without the head, and refused where named: never a row of the
    unfused layer under its name."""
    assert f"fused_{HEAD}" not in LAYER.variants_for(SMALL) and f"fused_{HEAD}" in LAYER.variants_for(HEADED)
    entry = registry.REGISTRY.get(KernelKey("decoder_layer", "numba", f"fused_{HEAD}", "cpu"))
    inputs = LAYER.make_inputs(SMALL, "float32", np.random.default_rng(0))
    with pytest.raises(Unsupported, match=r"no head \(scenario.lm_head=false\)"):
        entry(inputs, np.empty(LAYER.output_shape(SMALL), np.float32), SMALL, {})
    assert f"fused_{HEAD}" not in LAYER.ledger(SMALL, "float32")


def test_the_head_leaves_the_layers_inputs_and_cases_as_they_were() -> None:
    """The head's inputs are drawn after the layer's, and a case without the head carries neither lm_head nor
    vocab: the layer's cases, seeds and inputs are those it had before the head existed."""
    plain = LAYER.make_inputs(SMALL, "float32", np.random.default_rng(5))
    headed = LAYER.make_inputs(HEADED, "float32", np.random.default_rng(5))
    assert all(np.array_equal(plain[k], headed[k]) for k in plain)
    assert set(headed) - set(plain) == {"norm_f", "w_lm", "targets"} and (headed["targets"] == -100).any()
    cases = LAYER.cases({**{k: [v] for k, v in SMALL.items()}, "lm_head": [False, True], "vocab": [781, 999]})
    layer = {k: v for k, v in SMALL.items() if k not in ("lm_head", "vocab")}
    assert cases == [layer, HEADED, {**HEADED, "vocab": 999}]


def test_a_wrong_op_is_caught_through_the_head() -> None:
    """The loss still sees one op's mistake inside the layer: rope's tables swapped, the head on."""
    inputs = LAYER.make_inputs(HEADED, "float32", np.random.default_rng(3))
    ref = LAYER.reference(inputs, HEADED)
    tol = LAYER.tolerance(inputs, HEADED, "float32", ref)
    out = np.full((1,), np.nan, np.float32)
    swapped = dict(inputs, sin=-inputs["sin"])
    registry.REGISTRY.get(KernelKey("decoder_layer", "numba", "fused", "cpu"))(swapped, out, HEADED, {})()
    assert numerics.rel_err(out, ref) > 10 * tol


def test_a_wrong_op_is_caught() -> None:
    """The check sees one op's mistake: the layer with rope's tables swapped (a rotation the other way) fails."""
    params = SMALL
    inputs = LAYER.make_inputs(params, "float32", np.random.default_rng(3))
    ref = LAYER.reference(inputs, params)
    tol = LAYER.tolerance(inputs, params, "float32", ref)
    swapped = dict(inputs, sin=-inputs["sin"])
    out = np.full(LAYER.output_shape(params), np.nan, np.float32)
    registry.REGISTRY.get(KernelKey("decoder_layer", "numba", "fused", "cpu"))(swapped, out, params, {})()
    assert numerics.rel_err(out, ref) > 100 * tol


def test_each_variant_runs_the_registrys_kernel_of_each_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layer looks its ops up in the registry at build time: a family's kernel replaced there is the one the
    layer runs, once per op per launch, in the variant the layer's variant picks."""
    calls: dict[tuple[str, str], int] = {}

    def counted(key: KernelKey):  # type: ignore[no-untyped-def]
        entry = registry.REGISTRY.kernels[key]

        def wrapped(inputs, out, params, opts):  # type: ignore[no-untyped-def]
            launch = registry.as_launch(entry(inputs, out, params, opts))

            def run() -> None:
                calls[(key.scenario, key.variant)] = calls.get((key.scenario, key.variant), 0) + 1
                launch()

            return run

        return wrapped

    for family in (*OPS, HEAD):
        for v in ("fused", "unfused"):
            key = KernelKey(family, "numba", v, "cpu")
            monkeypatch.setitem(registry.REGISTRY.kernels, key, counted(key))
    for variant, params in (("fused_attention", SMALL), ("unfused", SMALL), (f"fused_{HEAD}", HEADED)):
        calls.clear()
        out = np.empty(LAYER.output_shape(params), np.float32)
        inputs = LAYER.make_inputs(params, "float32", np.random.default_rng(0))
        launch = registry.REGISTRY.get(KernelKey("decoder_layer", "numba", variant, "cpu"))(inputs, out, params, {})
        launch()
        launch()
        picked, norms = op_variants(variant, params), 6 if params is HEADED else 4
        assert calls == {(f, picked[f]): norms if f == "add_rmsnorm" else 2 for f in ops_of(params)}, variant


@pytest.mark.parametrize("params", CASES, ids=["check", "S"])
def test_attention_reads_the_kv_heads_in_place(monkeypatch: pytest.MonkeyPatch, params: dict) -> None:
    """The layer hands attention K and V of kv_heads heads, told so in its params: grouped-query, never K and V
    repeated to every query head."""
    seen = []
    for v in ("fused", "unfused"):
        key = KernelKey("attention", "numba", v, "cpu")
        entry = registry.REGISTRY.kernels[key]

        def recorded(inputs, out, p, opts, entry=entry):  # type: ignore[no-untyped-def]
            seen.append(({n: a.shape for n, a in inputs.items()}, p["heads"], p["kv_heads"]))
            return entry(inputs, out, p, opts)

        monkeypatch.setitem(registry.REGISTRY.kernels, key, recorded)
    t, heads, kv, d = (params[k] for k in ("tokens", "heads", "kv_heads", "head_dim"))
    for variant in ("fused", "unfused"):
        inputs = LAYER.make_inputs(params, "float32", np.random.default_rng(0))
        out = np.empty(LAYER.output_shape(params), np.float32)
        registry.REGISTRY.get(KernelKey("decoder_layer", "numba", variant, "cpu"))(inputs, out, params, {})
    assert kv < heads
    want = ({"q": (1, heads, t, d), "k": (1, kv, t, d), "v": (1, kv, t, d)}, heads, kv)
    assert seen == [want, want]


def _expected(params: dict, variant: str) -> dict[str, int]:
    """The layer's totals recomputed from each family's own ledger, the GEMMs' A, B and C, and the four copies."""
    s, ops = 4, op_params(params)
    picked = op_variants(variant, params) if variant in VARIANTS else RIVALS[variant]
    runs = ("add_rmsnorm", *OPS, *(("add_rmsnorm", HEAD) if params.get("lm_head") else ()))
    parts = [scenarios.get(f).ledger(ops[f], "float32")[picked[f]] for f in runs]
    t, heads, kv, d = (params[k] for k in ("tokens", "heads", "kv_heads", "head_dim"))
    q, kv = t * heads * d * s, t * kv * d * s
    copies = 2 * q + 2 * kv  # q', k', v heads-major and O back, each read once and written once
    return {
        "read": sum(p.bytes_read for p in parts) + sum((m * k + k * n) * s for _, m, n, k in gemms(params)) + copies,
        "written": sum(p.bytes_written for p in parts) + sum(m * n * s for _, m, n, _ in gemms(params)) + copies,
        "flops": sum(p.flops for p in parts) + sum(2 * m * n * k for _, m, n, k in gemms(params)),
        "launches": sum(p.launches for p in parts) + 7 + 4,
    }


WIDE = {**SMALL, "tokens": 300, "hidden": 4096, "intermediate": 11008}


@pytest.mark.parametrize(
    "params",
    [*CASES, WIDE, HEADED, {**WIDE, "lm_head": True, "vocab": 32000}],
    ids=["check", "S", "wide", "S+head", "wide+head"],
)
def test_the_ledger_is_the_sum_of_its_ops_ledgers(params: dict) -> None:
    ledger = LAYER.ledger(params, "float32")
    assert set(ledger) == set(LAYER.variants_for(params)) <= set(LAYER.variants)
    assert (f"fused_{HEAD}" in ledger) == bool(params.get("lm_head"))
    assert "library" in ledger  # Liger's layer, a rival as torch's are
    for variant, found in ledger.items():
        want = _expected(params, variant)
        got = {"read": found.bytes_read, "written": found.bytes_written, "flops": found.flops}
        assert got | {"launches": found.launches} == want, variant
    # each op's fusion saves in the layer exactly what it saves in its family (add_rmsnorm twice, three times with
    # the head); the head's fusion moves more (W read again per chunk) and holds less (a chunk's logits)
    unfused, norms = ledger["unfused"].bytes_moved(), 3 if params.get("lm_head") else 2
    families = {op: scenarios.get(op).ledger(op_params(params)[op], "float32") for op in ops_of(params)}
    for op, fam in families.items():
        gain = (fam["unfused"].bytes_moved() - fam["fused"].bytes_moved()) * (norms if op == "add_rmsnorm" else 1)
        assert unfused - ledger[f"fused_{op}"].bytes_moved() == gain, op
        assert gain > 0 if op != HEAD else gain <= 0, op
    assert ledger["fused"].peak_bytes < ledger["unfused"].peak_bytes  # attention's S and P never exist
    # torch's SDPA keeps no S or P either: eager moves less than the unfused layer, the compiler no more than fused
    # (with the head: less, by what the chunks' re-reads of W cost the fused head)
    head_gap = (
        families[HEAD]["fused"].bytes_moved() - families[HEAD]["compiled"].bytes_moved() if HEAD in families else 0
    )
    assert ledger["compiled"].bytes_moved() == ledger["fused"].bytes_moved() - head_gap < ledger["eager"].bytes_moved()
    assert ledger["eager"].bytes_moved() < unfused
    if HEAD in families:  # the fused head never holds every token's logits, nor does the layer around it
        logits = params["tokens"] * params["vocab"] * 4
        assert ledger["unfused"].peak_bytes - ledger[f"fused_{HEAD}"].peak_bytes >= logits // 2


def test_the_ledger_names_every_kernel_by_its_op() -> None:
    kernels = [k.name for k in LAYER.ledger(SMALL, "float32")["fused"].kernels]
    assert kernels[0].startswith("add_rmsnorm (input): ") and kernels[-1] == "down projection"
    assert "k to heads-major" in kernels and "v to heads-major" in kernels
    assert sum(k.startswith("attention: ") for k in kernels) == 1  # the fused attention: one kernel


def test_bad_cases_variants_and_models_are_refused_in_one_line() -> None:
    refusals = []
    with pytest.raises(ConfigError) as caught:
        op_variants("fused_gelu", SMALL)
    refusals.append(str(caught.value))
    assert "valid: unfused, fused, fused_add_rmsnorm" in refusals[-1]
    with pytest.raises(ConfigError, match=r"unknown variant 'fused_gelu'; valid: unfused") as caught:
        validate.plan(make_config("scenario=decoder_layer", "preset=S", "device=cpu", "variants=[fused_gelu]"))
    refusals.append(str(caught.value))
    with pytest.raises(ConfigError, match=r"scenario.kv_heads=3 must divide scenario.heads=4") as caught:
        LAYER.check({**SMALL, "kv_heads": 3})
    refusals.append(str(caught.value))
    with pytest.raises(ConfigError, match=r"head_dim=15 must be even") as caught:
        validate.plan(make_config("scenario=decoder_layer", "preset=S", "device=cpu", "scenario.head_dim=[15]"))
    refusals.append(str(caught.value))
    with pytest.raises(ConfigError, match=r"rope_pairing; valid: half, interleaved") as caught:
        LAYER.check({**SMALL, "rope_pairing": "neox"})
    refusals.append(str(caught.value))
    with pytest.raises(ConfigError, match=r"scenario.lm_head='yes' must be true or false") as caught:
        LAYER.check({**SMALL, "lm_head": "yes"})
    refusals.append(str(caught.value))
    with pytest.raises(ConfigError, match=r"scenario.vocab=0 must be a positive integer") as caught:
        validate.plan(make_config("scenario=decoder_layer", "preset=S", "device=cpu", "scenario.lm_head=true",
                                  "scenario.vocab=0"))  # fmt: skip
    refusals.append(str(caught.value))
    with pytest.raises(ConfigError, match=r"unknown model 'llama9'; valid: .*llama3_8b") as caught:
        cli.precheck(["model=llama9", "tokens=64", "experiment=model_decoder_layer", "device=cpu"])
    refusals.append(str(caught.value))
    assert all("\n" not in line for line in refusals), refusals


@pytest.mark.parametrize(
    ("model", "widths"), [("llama3_8b", (4096, 32, 8, 128, 14336)), ("gpt2", (768, 12, 12, 64, 3072))]
)
def test_a_model_sets_the_layers_widths(model: str, widths: tuple) -> None:
    """Llama's widths as published; GPT-2's as a what-if (a Llama-style layer at its widths, no grouped heads)."""
    (cfg,) = cli.compose_jobs([f"model={model}", "tokens=64", "experiment=model_decoder_layer", "device=cpu"])
    (params,) = validate.plan(cfg).cases
    assert tuple(params[k] for k in ("hidden", "heads", "kv_heads", "head_dim", "intermediate")) == widths
    assert params["tokens"] == 64 and params["rope_pairing"] == "half" and "vocab" not in params
    (cfg,) = cli.compose_jobs(
        [f"model={model}", "tokens=64", "experiment=model_decoder_layer", "scenario.lm_head=true"]
    )
    (params,) = validate.plan(cfg).cases
    spec = cli.compose_jobs([f"model={model}", "experiment=model_decoder_layer"])[0].model
    assert params["lm_head"] is True and params["vocab"] == spec.vocab_size


def test_a_head_that_would_not_fit_is_refused_before_any_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Llama-3-8B's layer at 4,096 tokens fits an 8 GiB machine; with its head (a 128,256 vocabulary: the head's
    weight and the unfused head's logits, 2 GiB each) it does not: exit 2, one line naming what and how much."""
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 8 * 2**30 // 4096}  # an 8 GiB machine
    monkeypatch.setattr(host_memory.os, "sysconf", lambda name: pages[name])
    monkeypatch.setattr(cli, "_hydra_main", lambda: pytest.fail("a case ran"))
    args = ["model=llama3_8b", "tokens=4096", "experiment=model_decoder_layer", "device=cpu"]
    cli.precheck(args)  # the layer alone fits
    with pytest.raises(SystemExit) as exit_:
        cli.main([*args, "scenario.lm_head=true"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1, err
    assert re.match(
        r"fusebench: error: decoder_layer with its LM head at 4096 tokens × 128256 vocab needs about 9\.\d GiB; "
        r"this machine has 8\.0 GiB$",
        err.strip(),
    ), err
