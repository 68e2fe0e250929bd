"""Running one implementation of a family in its backward or train phase, as the runner does, for the tests.

`run_phase` draws the phase's inputs with a recorded seed, uploads them to the target, poisons every output
buffer with NaN, builds the entry and launches it once (publishing a library's results), and returns the outputs
beside their float64 references and tolerances. `judged` gives each output's (error, tolerance, problem).
`finite_differences` checks a family's closed-form backward reference against central differences of its
forward reference in float64, so that a wrong formula cannot agree with a wrong reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from suite.core import numerics, phases, registry, targets
from suite.core import scenario as scenarios
from suite.core.registry import KernelKey


def run_phase(
    family: str, backend: str, variant: str, device: str, phase: str, params: dict, dtype: str, seed: int = 0
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, float], registry.Launch]:
    """(outputs, references, tolerances, launch) of one launch of the entry on a poisoned set of outputs."""
    registry.discover()
    scn = phases.phased(scenarios.get(family), phase)
    scn.check(params)
    inputs = scn.make_inputs(params, dtype, np.random.default_rng(seed))
    ref = scn.reference(inputs, params)
    tol = scn.tolerance(inputs, params, dtype, ref)
    target = targets.TARGETS[(backend, device)]
    dev_inputs = {name: target.asarray(np.array(a)) for name, a in inputs.items()}
    out = {name: target.empty(shape, dtype) for name, shape in scn.output_shape(params).items()}
    for buf in out.values():
        target.poison(buf)
    entry = registry.REGISTRY.get(KernelKey(family, backend, variant, device, phase))
    assert entry is not None, f"no {backend}/{device} {variant} {phase} entry for {family}"
    launch = registry.as_launch(entry(dev_inputs, out, params, {}))
    launch.checked()
    target.synchronize()
    host = {name: np.asarray(target.to_host(buf)) for name, buf in out.items()}
    for name, a in inputs.items():  # a backward pass must not write its inputs (nor its upstream gradient)
        assert np.array_equal(np.asarray(target.to_host(dev_inputs[name])), a, equal_nan=True), f"{name} written"
    return host, ref, tol, launch


def judged(out: dict[str, np.ndarray], ref: dict[str, np.ndarray], tol: dict[str, float]) -> dict[str, Any]:
    """Each output's (max relative error, tolerance, problem or '')."""
    assert set(out) == set(ref) == set(tol), (sorted(out), sorted(ref), sorted(tol))
    return {name: (*numerics.judge(out[name], ref[name], tol[name]), tol[name]) for name in out}


def assert_close(out: dict[str, np.ndarray], ref: dict[str, np.ndarray], tol: dict[str, float]) -> None:
    problems = {
        name: f"{why} (err {err:.3g}, tol {t:.3g})" for name, (err, why, t) in judged(out, ref, tol).items() if why
    }
    assert not problems, problems


def finite_differences(family: str, params: dict, seed: int = 0, h: float = 1e-6) -> dict[str, float]:
    """Per gradient, the largest relative error of the family's backward reference against central differences
    of its forward reference, all in float64 on the tiny case `params`: ⟨dy, f(x + h·e_i) − f(x − h·e_i)⟩ / 2h."""
    scn = scenarios.get(family)
    view = phases.phased(scn, phases.BACKWARD)
    inputs = {k: np.asarray(v, dtype=np.float64) if np.issubdtype(np.asarray(v).dtype, np.floating) else v
              for k, v in view.make_inputs(params, "float32", np.random.default_rng(seed)).items()}  # fmt: skip
    grads = view.reference(inputs, params)
    upstream = {name: inputs[name] for name in scn.training.upstream}
    forward = {k: v for k, v in inputs.items() if k in scn.inputs}

    def loss(values: dict[str, np.ndarray]) -> float:
        y = scn.reference(values, params)
        outs = y if isinstance(y, dict) else {phases.OUTPUT: y}
        return float(
            sum(np.sum(np.asarray(o, np.float64) * upstream[u]) for o, u in zip(outs.values(), upstream, strict=True))
        )

    errors = {}
    for name, grad in grads.items():
        source = name[1:]
        numeric = np.zeros_like(forward[source], dtype=np.float64)
        for i in np.ndindex(numeric.shape):
            plus, minus = dict(forward), dict(forward)
            plus[source], minus[source] = forward[source].copy(), forward[source].copy()
            plus[source][i] += h
            minus[source][i] -= h
            numeric[i] = (loss(plus) - loss(minus)) / (2 * h)
        errors[name] = numerics.rel_err(grad, numeric)
    return errors
