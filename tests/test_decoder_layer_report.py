"""decoder_layer's report section and chart, from rows built by hand: shares, prediction, the stacked bars."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from scenarios.decoder_layer import op_params
from scenarios.decoder_layer.charts import LAUNCH, WHOLE, steps_chart
from scenarios.decoder_layer.report import layer_section
from suite.kit.layer import STEP_ORDER, STEPS_MS
from suite.kit.tidy import tidy
from tests.test_chart_text import _box, _texts

PARAMS = {
    "tokens": 33,
    "hidden": 64,
    "heads": 4,
    "kv_heads": 2,
    "head_dim": 16,
    "intermediate": 96,
    "rope_pairing": "half",
}
GEMMS = {"Q projection": 1.0, "K projection": 0.5, "V projection": 0.5, "O projection": 1.0}
GEMMS |= {"gate projection": 2.0, "up projection": 2.0, "down projection": 1.0}  # 8 ms of 20
COPIES = {"q to heads-major": 0.5, "k to heads-major, ×2 heads": 0.5, "v to heads-major, ×2 heads": 0.5}
COPIES |= {"attention output to token-major": 0.5}  # 2 ms of 20
UNFUSED_OPS = {"add_rmsnorm (input)": 2.0, "rope": 1.0, "attention": 3.0, "add_rmsnorm (post-attention)": 2.0}
UNFUSED_OPS |= {"swiglu": 2.0}  # 10 ms of 20
FUSED_OPS = {"add_rmsnorm (input)": 1.0, "rope": 0.5, "attention": 2.0, "add_rmsnorm (post-attention)": 1.0}
FUSED_OPS |= {"swiglu": 1.5}  # 4 ms saved inside the layer
ORDER = ["add_rmsnorm (input)", "Q projection", "K projection", "V projection", "rope", "q to heads-major"]
ORDER += ["k to heads-major, ×2 heads", "v to heads-major, ×2 heads", "attention", "attention output to token-major"]
ORDER += ["O projection", "add_rmsnorm (post-attention)", "gate projection", "up projection", "swiglu"]
ORDER += ["down projection"]


def _row(scenario: str, variant: str, params: dict, time_ms: float, **more: object) -> dict:
    steps = more.pop("steps", None)
    extra = {STEPS_MS: dict(sorted(steps.items())), STEP_ORDER: ORDER} if steps else {}
    return {
        "scenario": scenario,
        "variant": variant,
        "params": json.dumps(params),
        "dtype": "float32",
        "backend": "numba",
        "device": "cpu",
        "status": "ok",
        "mode": "native",
        "time_ms": time_ms,
        "size": params.get("tokens", 1),
        "extra": json.dumps(extra),
        **more,
    }


def _layer(interval: tuple[float, float], compiled: bool = False, speedup: float = 20 / 15.5) -> list[dict]:
    """The unfused layer (20 ms: ops 50%, GEMMs 40%, copies 10%) and the fused one (15.5 ms: its ops 4 ms
    faster, its O projection 0.5 ms faster besides), measured 20/15.5 = 1.29× (or `speedup`) within `interval`."""
    unfused = {**UNFUSED_OPS, **GEMMS, **COPIES}
    fused = {**FUSED_OPS, **GEMMS, "O projection": 0.5, **COPIES}
    lo, hi = interval
    rows = [
        _row("decoder_layer", "unfused", PARAMS, 20.0, steps=unfused),
        _row("decoder_layer", "fused", PARAMS, 15.5, steps=fused, speedup=speedup, speedup_lo=lo, speedup_hi=hi),
        _row(
            "decoder_layer", "fused_rope", PARAMS, 19.5, steps=unfused, speedup=1.02, speedup_lo=1.01, speedup_hi=1.03
        ),
    ]
    if compiled:  # torch's: no step times
        rows.append(_row("decoder_layer", "compiled", PARAMS, 12.0, backend="torch", speedup=1.6))
    for row in rows[1:]:
        row["verdict"] = "pays"
    return rows


def _alone(attention_gain: float) -> list[dict]:
    """Each op family's fused and unfused rows at the layer's shapes: every op saves what it saves inside the
    layer (add_rmsnorm 1 ms, twice; rope 0.5; swiglu 0.5) except attention, which saves `attention_gain`."""
    gains = {"add_rmsnorm": 1.0, "rope": 0.5, "attention": attention_gain, "swiglu": 0.5}
    rows = []
    for name, params in op_params(PARAMS).items():
        rows += [_row(name, "unfused", params, 5.0), _row(name, "fused", params, 5.0 - gains[name])]
    return rows


def test_the_line_gives_the_speedup_and_the_shares_of_the_unfused_layer() -> None:
    text = layer_section(tidy(pd.DataFrame(_layer((1.28, 1.30)))))
    assert "numba/cpu: fused 1.29× [1.28–1.30] over unfused; the fusable ops were 50% of the unfused layer's" in text
    assert "the GEMMs 40%, the copies 10%." in text
    assert "| fused_rope | 1.02× [1.01–1.03] | pays |" in text
    assert "peak" not in next(line for line in text.split("\n") if line.startswith("- **"))  # no row had one


def test_the_line_gives_the_layers_peak_measured_where_both_were_else_modeled() -> None:
    rows = _layer((1.28, 1.30))
    for row, measured, modeled in zip(rows[:2], (100, 80), (96, 64), strict=True):
        row["peak_bytes"], row["peak_bytes_modeled"] = measured * 2**20, modeled * 2**20
    assert "the copies 10%; peak 100 → 80 MiB (measured)." in layer_section(tidy(pd.DataFrame(rows)))
    rows[1]["peak_bytes"] = float("nan")  # the fused layer's not measured: both modeled
    assert "; peak 96 → 64 MiB (modeled)." in layer_section(tidy(pd.DataFrame(rows)))


def test_the_prediction_from_the_ops_inside_the_layer_names_the_gemm_that_moved() -> None:
    """Σ (unfused − fused) over the ops is 4 ms of 20: 1.25×, below the measured interval, the O projection's
    0.5 ms the gap."""
    text = layer_section(tidy(pd.DataFrame(_layer((1.28, 1.30)))))
    assert "Predicted from the ops' times inside the layers: 1.25× (4 ms a launch)" in text
    assert "the prediction is 0.03× below the interval (0.5 ms a launch less gain than measured)" in text
    assert "moved most against it: O projection (+0.5 ms a launch)" in text
    steps = [line.split(" | ")[0].strip("| ") for line in text.splitlines() if " | GEMM | " in line]
    assert steps[:2] == ["Q projection", "K projection"]  # the chain's order, not extra's sorted keys


def test_a_prediction_within_the_interval_says_so() -> None:
    text = layer_section(tidy(pd.DataFrame(_layer((1.20, 1.30)))))
    assert "1.25× (4 ms a launch); measured 1.29× [1.20–1.30]" in text
    assert "falls within the interval" in text and "moved most" not in text


def test_a_gap_no_step_explains_is_said_to_be_none_of_theirs() -> None:
    """Measured 1.15× [1.10–1.20] (2.61 ms), predicted 1.25× (4 ms): only the O projection moved besides the
    ops, and it gained."""
    text = layer_section(tidy(pd.DataFrame(_layer((1.10, 1.20), speedup=1.15))))
    assert "the prediction is 0.05× above the interval (1.39 ms a launch more gain than measured); no step's" in text


def test_the_ops_timed_alone_predict_where_the_results_hold_them() -> None:
    """Alone, attention saves 3 ms, not the 1 ms it saves inside the layer: 6 ms of 20 predicts 1.43×, and
    attention is what moved against it."""
    text = layer_section(tidy(pd.DataFrame(_layer((1.28, 1.30)) + _alone(3.0))))
    assert "Predicted from the ops' times timed alone: 1.43× (6 ms a launch)" in text
    assert "0.13× above the interval" in text and "against it: attention (-2 ms a launch)" in text
    some = _alone(3.0)[2:]  # add_rmsnorm's rows missing: the layer's own times again
    assert "inside the layers: 1.25×" in layer_section(tidy(pd.DataFrame(_layer((1.28, 1.30)) + some)))


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    kept: dict[str, Figure] = {}
    original = Figure.savefig

    def savefig(figure: Figure, path: object, *args: object, **kwargs: object) -> None:
        original(figure, path, *args, **kwargs)
        kept[Path(str(path)).name] = figure

    monkeypatch.setattr(Figure, "savefig", savefig)
    return kept


def test_the_chart_stacks_each_variant_and_its_text_does_not_overlap(tmp_path: Path, saved: dict) -> None:
    written = steps_chart(tidy(pd.DataFrame(_layer((1.28, 1.30), compiled=True))), tmp_path)
    assert [p.name for p in written] == ["steps_decoder_layer.png"] and written[0].stat().st_size > 0
    figure = saved["steps_decoder_layer.png"]
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["unfused", "fused", "compiled", "fused_rope"]
    ends = {}
    for bar in ax.patches:  # each bar's right end: the sum of its segments
        y = round(bar.get_y() + bar.get_height() / 2)
        ends[y] = max(ends.get(y, 0.0), bar.get_x() + bar.get_width())
    assert [ends[i] for i in range(4)] == pytest.approx([20.0, 15.5, 12.0, 20.0])
    labels = [t.get_text() for t in figure.legends[0].get_texts()]
    assert labels == ["add_rmsnorm", "rope", "attention", "swiglu", "GEMM", "copy", WHOLE, LAUNCH]
    ticks = ax.collections[0].get_offsets()  # each variant's median launch, beside its stacked steps
    assert [x for x, _ in ticks] == pytest.approx([20.0, 15.5, 12.0, 19.5])
    FigureCanvasAgg(figure)  # saving closed it: a canvas of its own again, as tests/charts_drawn.py does
    figure.canvas.draw()
    texts = _texts(figure)
    clashes = [(a, b) for (a, one), (b, other) in combinations(texts, 2) if _box(one).overlaps(_box(other))]
    assert len(texts) > 10 and not clashes
    plt.close(figure)


HEADED = {**PARAMS, "lm_head": True, "vocab": 781}
HEAD_UNFUSED = {"add_rmsnorm (final)": 2.0, "linear_cross_entropy (LM head)": 6.0}  # 28 ms in all
HEAD_FUSED = {"add_rmsnorm (final)": 1.0, "linear_cross_entropy (LM head)": 7.0}  # the chunks cost 1 ms
ALONE_GAINS = {"add_rmsnorm": 1.0, "rope": 0.5, "attention": 1.0, "swiglu": 0.5, "linear_cross_entropy": -3.0}


def test_the_head_is_its_familys_op_in_the_split_the_prediction_and_the_chart(tmp_path: Path, saved: dict) -> None:
    """With the head, linear_cross_entropy is a fusable op: in the shares (18 ms of 28), in the prediction from
    its own rows (alone its fused kernel loses 3 ms, inside the layer 1 ms: Σ 2 ms, 1.08×, it the step that moved
    against it), and a segment of its own in the chart. Without its rows, the layer's own times predict."""
    unfused = {**UNFUSED_OPS, **GEMMS, **COPIES, **HEAD_UNFUSED}
    fused = {**FUSED_OPS, **GEMMS, **COPIES, **HEAD_FUSED}
    layer = [
        _row("decoder_layer", "unfused", HEADED, 28.0, steps=unfused),
        _row("decoder_layer", "fused", HEADED, 24.0, steps=fused, speedup=28 / 24, speedup_lo=1.16, speedup_hi=1.18),
    ]
    alone = []
    for name, params in op_params(HEADED).items():
        alone += [_row(name, "unfused", params, 9.0), _row(name, "fused", params, 9.0 - ALONE_GAINS[name])]
    text = layer_section(tidy(pd.DataFrame(layer + alone)))
    assert "lm_head=True, vocab=781), 33 tokens, float32, numba/cpu: fused 1.17× [1.16–1.18]" in text
    assert "the fusable ops were 64% of the unfused layer's time, the GEMMs 29%, the copies 7%." in text
    assert "Predicted from the ops' times timed alone: 1.08× (2 ms a launch)" in text
    assert "against it: linear_cross_entropy (LM head) (+2 ms a launch)" in text
    assert "| linear_cross_entropy (LM head) | fusable op | 6 | 7 | -1 |" in text
    without = [r for r in alone if r["scenario"] != "linear_cross_entropy"]
    assert "inside the layers: 1.17× (4 ms a launch)" in layer_section(tidy(pd.DataFrame(layer + without)))
    steps_chart(tidy(pd.DataFrame(layer)), tmp_path)
    figure = saved["steps_decoder_layer.png"]
    labels = [t.get_text() for t in figure.legends[0].get_texts()]
    assert labels == ["add_rmsnorm", "rope", "attention", "swiglu", "linear_cross_entropy", "GEMM", "copy", LAUNCH]
    plt.close(figure)


def test_no_timed_layer_row_draws_nothing(tmp_path: Path) -> None:
    rows = tidy(pd.DataFrame([_row("decoder_layer", "fused", PARAMS, float("nan"))]))
    assert steps_chart(rows, tmp_path) == [] and layer_section(rows) == ""


def test_the_report_hands_the_layer_its_ops_rows_from_the_same_run(tmp_path: Path) -> None:
    """A run holding the layer and its ops timed alone (the model tour's): the layer's section of report.md
    predicts from the ops' own rows, which only reach it through the report's hand-off."""
    from suite.report.report import sections

    text = "\n\n".join(sections(pd.DataFrame(_layer((1.28, 1.30)) + _alone(3.0)), [], tmp_path))
    assert "Predicted from the ops' times timed alone: 1.43×" in text


def test_both_gains_are_taken_off_the_unfused_layers_own_time() -> None:
    """The unfused layer's launches take 30 ms while its steps' medians sum to 20: the ops timed alone save 6 ms,
    predicting 30/24 = 1.25×, and the measured 1.25× is 6 ms, all of the predicted gain (on the steps' 20 ms the
    same 6 ms would read 1.43×, and the measured speedup a 4 ms gain)."""
    rows = _layer((1.20, 1.30), speedup=1.25) + _alone(3.0)
    rows[0]["time_ms"], rows[1]["time_ms"] = 30.0, 24.0
    text = layer_section(tidy(pd.DataFrame(rows)))
    assert "timed alone: 1.25× (6 ms a launch); measured 1.25× [1.20–1.30] (6 ms, 100% of the predicted gain)" in text
    assert "the prediction falls within the interval" in text
