"""decoder_layer's torch rivals: the layer as model code writes it (`eager`) and through torch.compile
(`compiled`) against the float64 chain the composed variants are judged by, on the S preset's shapes."""

from __future__ import annotations

import numpy as np
import pytest

from suite.core import numerics, registry, targets
from suite.core import scenario as scenarios
from suite.core.registry import KernelKey

registry.discover()
LAYER = scenarios.get("decoder_layer")
SMALL = {k: v[0] for k, v in LAYER.presets["S"].items()}


def _judged(variant: str, params: dict, opts: dict, seed: int = 11) -> tuple[float, float]:
    """(error, tolerance) of `variant` on torch's CPU, the output poisoned first, launched twice (the first call
    of `compiled` compiles)."""
    target = targets.TARGETS[("torch", "cpu")]
    inputs = LAYER.make_inputs(params, "float32", np.random.default_rng(seed))
    ref = LAYER.reference(inputs, params)
    tol = LAYER.tolerance(inputs, params, "float32", ref)
    out = target.empty(LAYER.output_shape(params), "float32")
    target.poison(out)
    entry = registry.REGISTRY.get(KernelKey("decoder_layer", "torch", variant, "cpu"))
    launch = registry.as_launch(entry({k: target.asarray(v) for k, v in inputs.items()}, out, params, opts))
    launch()
    launch()
    err, problem = numerics.judge(target.to_host(out), ref, tol)
    assert problem == "", f"{variant} {params}: {problem}"
    if not params.get("lm_head"):
        assert np.abs(ref[1]).max() > 0.1 * np.abs(ref[0]).max()  # the MLP's output is judged, not drowned by h2
    return err, tol


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_eager_is_the_layer(pairing: str) -> None:
    err, tol = _judged("eager", {**SMALL, "rope_pairing": pairing}, {})
    assert err > 0 and tol < 1e-3


def test_eager_with_the_head_is_the_models_loss() -> None:
    """The final norm, logits = y @ w_lm and F.cross_entropy (its ignore_index the targets' -100): the loss."""
    err, tol = _judged("eager", {**SMALL, "rope_pairing": "half", "lm_head": True}, {})
    assert err > 0 and tol < 1e-3


def test_eager_catches_the_other_pairing() -> None:
    """The pairing reaches the rotation: eager told `half` on the interleaved reference's inputs is far off."""
    params = {**SMALL, "rope_pairing": "interleaved"}
    target = targets.TARGETS[("torch", "cpu")]
    inputs = LAYER.make_inputs(params, "float32", np.random.default_rng(5))
    ref = LAYER.reference(inputs, params)
    out = target.empty(LAYER.output_shape(params), "float32")
    entry = registry.REGISTRY.get(KernelKey("decoder_layer", "torch", "eager", "cpu"))
    entry({k: target.asarray(v) for k, v in inputs.items()}, out, {**params, "rope_pairing": "half"}, {})()
    assert numerics.rel_err(target.to_host(out), ref) > 100 * LAYER.tolerance(inputs, params, "float32", ref)


def test_compiled_is_the_layer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One shape (torch.compile is slow on a small host): the S preset in Llama's pairing."""
    err, tol = _judged("compiled", {**SMALL, "rope_pairing": "half"}, {"cache_dir": str(tmp_path)})
    assert err > 0 and tol < 1e-3
