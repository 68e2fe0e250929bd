"""The phase of a training step a case measures: `forward` (the default), `backward`, or `train` (both, as one call).

A family that has a backward pass declares it as a `Backward` (its class attribute `training`): the gradients
that flow in (`dy`, the same shape as the forward's output), the gradients it writes (`dx`, `dweight`, ...), their
float64 reference, what each variant's forward keeps for the backward pass (`saved`), and the traffic ledger of
each phase. `phased(scn, phase)` is the family seen in a phase: the same scenario to the runner (the same axes,
presets, variants and labels), with that phase's inputs, outputs, reference, tolerance and ledger. A backward
case's outputs are several buffers, so its `output_shape` is a mapping of them, and every output is judged
against its own reference with its own tolerance.

Each variant's backward is handed what *its own* forward saved, made by that variant's forward outside the timed
region (`suite.kit.training`): a fused kernel that recomputes an activation instead of saving it is measured
against one that saved it, which is the comparison that decides a training run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from suite.core.errors import ConfigError
from suite.core.ledger import VariantLedger

T = TypeVar("T")

if TYPE_CHECKING:
    from suite.core.scenario import Params, Scenario

FORWARD, BACKWARD, TRAIN = "forward", "backward", "train"
PHASES = (FORWARD, BACKWARD, TRAIN)
"""`train` is forward + backward as one call: what one step of training runs for the op."""
OUTPUT = "y"
"""The forward's output's name among a train case's outputs."""


class Backward:
    """A family's backward pass. Subclasses set `grads` and write `reference`, `saved` and `backward_ledger`;
    the defaults fit an op with one output `y` whose upstream gradient `dy` has its shape and dtype."""

    upstream: tuple[str, ...] = ("dy",)
    """The gradients that flow in, one per forward output (the same shape and dtype as it)."""
    grads: tuple[str, ...] = ()
    """The gradients a backward pass writes, each named `d<input>` (dx, dweight, dbias)."""

    def upstream_shapes(self, scn: Scenario, params: Params) -> dict[str, tuple[int, ...]]:
        return {name: tuple(scn.output_shape(params)) for name in self.upstream}

    def make_upstream(self, scn: Scenario, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, Any]:
        """The upstream gradients: uniform in ±1, away from zero (a gradient of zeros hides a dropped term)."""
        out = {}
        for name, shape in self.upstream_shapes(scn, params).items():
            magnitude = rng.uniform(0.25, 1.0, shape)
            out[name] = (magnitude * rng.choice((-1.0, 1.0), shape)).astype(dtype)
        return out

    def grad_shapes(self, scn: Scenario, params: Params) -> dict[str, tuple[int, ...]]:
        """Each gradient has its input's shape: `dweight` that of `weight`."""
        shapes = scn.input_shapes(params)
        return {name: tuple(shapes[name[1:]]) for name in self.grads}

    def reference(self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        """Every gradient in float64, from the (rounded) inputs and upstream gradients."""
        raise NotImplementedError

    def tolerance(
        self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: dict[str, np.ndarray]
    ) -> dict[str, float]:
        """Each gradient's tolerance; by default the family's floor for the dtype."""
        return {name: scn.limits.clip(dtype, 0.0) for name in ref}

    def saved(self, scn: Scenario, params: Params, dtype: str) -> dict[str, dict[str, int]]:
        """Per variant, the tensors its forward keeps for the backward pass and their bytes (inputs it keeps
        alive count too: a saved x is memory held from the forward to the backward)."""
        raise NotImplementedError

    def backward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """Per variant, the backward pass's kernels: reading what its forward saved and the upstream gradient,
        writing the gradients."""
        raise NotImplementedError

    def forward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """Per variant, the forward pass of a training step: the forward's ledger, plus the write of each saved
        tensor the forward would not otherwise store (a fused kernel's row statistics, a logits' gradient).
        Saving is then priced as the seed's ΔQ: written once in the forward, read once in the backward. By
        default the forward's ledger unchanged (an unfused forward already writes what it keeps)."""
        return scn.ledger(params, dtype)

    def ledger(self, scn: Scenario, params: Params, dtype: str, phase: str) -> dict[str, VariantLedger]:
        backward = self.backward_ledger(scn, params, dtype)
        if phase == BACKWARD:
            return backward
        forward = self.forward_ledger(scn, params, dtype)
        return {v: train_ledger(found, lg) for v, lg in backward.items() if (found := modeled(forward, *_split(v)))}


def modeled(found: Mapping[str, T], backend: str, variant: str) -> T | None:
    """A family model's entry for one implementation: `backend/variant` where the model tells one backend's apart
    (Liger's `library` keeps and moves other tensors than torch's), else the variant's."""
    return found.get(f"{backend}/{variant}", found.get(variant))


def _split(key: str) -> tuple[str, str]:
    """(backend, variant) of a model's key: `liger/library`, or a bare variant (any backend)."""
    backend, _, variant = key.rpartition("/")
    return backend, variant


def train_ledger(forward: VariantLedger, backward: VariantLedger) -> VariantLedger:
    """Forward then backward as one call: both passes' kernels; the peak is the larger of the two."""
    peaks = [p for p in (forward.peak_bytes, backward.peak_bytes) if p is not None]
    return VariantLedger(
        backward.variant,
        forward.kernels + backward.kernels,
        forward.removed + backward.removed,
        max(peaks) if peaks else None,
    )


def phases_of(scn: Scenario) -> tuple[str, ...]:
    """The phases `scn` can be run in: all three where it declares a backward pass, else the forward only."""
    return PHASES if getattr(scn, "training", None) is not None else (FORWARD,)


def check_phase(phase: str) -> str:
    if phase not in PHASES:
        raise ConfigError(f"unknown phase '{phase}'; valid: {', '.join(PHASES)}")
    return phase


def phased(scn: Scenario, phase: str) -> Scenario:
    """`scn` as the runner sees it in `phase`: itself for the forward, else a `PhaseView`."""
    check_phase(phase)
    if phase == FORWARD:
        return scn
    if getattr(scn, "training", None) is None:
        raise ConfigError(f"{scn.name} has no backward pass; phases: {FORWARD}")
    return PhaseView(scn, phase)  # type: ignore[return-value]


class PhaseView:
    """A family in its backward or train phase: every question the runner asks a scenario, answered for the
    phase; whatever a phase does not change (axes, presets, labels, charts) is the family's own."""

    def __init__(self, scn: Scenario, phase: str) -> None:
        self.scn, self.phase, self.spec = scn, phase, scn.training
        self.inputs = tuple(scn.inputs) + self.spec.upstream

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scn, name)

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        return {**self.scn.input_shapes(params), **self.spec.upstream_shapes(self.scn, params)}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        inputs = self.scn.make_inputs(params, dtype, rng)
        return {**inputs, **self.spec.make_upstream(self.scn, params, dtype, rng)}

    def output_shape(self, params: Params) -> dict[str, tuple[int, ...]]:
        grads = self.spec.grad_shapes(self.scn, params)
        return grads if self.phase == BACKWARD else {OUTPUT: tuple(self.scn.output_shape(params)), **grads}

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        grads = self.spec.reference(self.scn, inputs, params)
        if self.phase == BACKWARD:
            return grads
        forward = {k: v for k, v in inputs.items() if k in self.scn.inputs}
        return {OUTPUT: self.scn.reference(forward, params), **grads}

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: dict) -> dict[str, float]:
        grads = {k: v for k, v in ref.items() if k != OUTPUT}
        tol = self.spec.tolerance(self.scn, inputs, params, dtype, grads)
        if self.phase == TRAIN:
            forward = {k: v for k, v in inputs.items() if k in self.scn.inputs}
            tol = {OUTPUT: self.scn.tolerance(forward, params, dtype, ref[OUTPUT]), **tol}
        return tol

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        return self.spec.ledger(self.scn, params, dtype, self.phase)

    def saved(self, params: Params, dtype: str) -> dict[str, dict[str, int]]:
        return self.spec.saved(self.scn, params, dtype)

    def footprint_bytes(self, params: Params, dtype: str, variant: str) -> int | None:
        try:
            found = self.ledger(params, dtype).get(variant)
        except NotImplementedError:
            return None
        return found.peak_bytes if found is not None else None
