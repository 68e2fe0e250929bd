"""A variant's backward and train entries, built from its forward-with-save and its backward.

A backend writes two things per variant of a family that has a backward pass (`suite.core.phases`):

- `forward(inputs, y, params, opts) -> Pass`: the forward of a training step. Its `run` writes `y` and the
  tensors the variant keeps for the backward pass, which it allocates while it prepares and returns as
  `Pass.saved` (an input it keeps, such as x, is named there too: keeping it alive is part of the cost).
  `inputs` holds the upstream gradients as well, for a forward that folds the backward into its own pass
  (fused cross-entropy writes the logits' gradient while it has the row); such a forward takes a keyword
  `grads`, handed the gradient buffers in the train phase (None in the backward phase, where the gradient it
  writes is what it saved). A forward that, handed them, writes every gradient itself (linear cross-entropy's
  fused chunks) returns its `saved` as `Written`, and its backward launches nothing.
- `backward(inputs, saved, grads, params, opts) -> Pass`: reads `saved` and the upstream gradient (`inputs`
  holds both the forward's inputs and `dy`) and writes every buffer of `grads` (dx, dweight, ...).

`training(...)` registers from them the `backward` entry — which runs the variant's own forward once while it
prepares, outside the timed region, and launches only the backward (the kernels it records for the resource
report are the backward's; on a target that only compiles, every backward kernel is built before the forward's
launch refuses) — and the `train` entry, which launches
both as one call. Each reports in `Launch.saves` the bytes of what its forward kept.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from suite.core import kernelspec
from suite.core.phases import BACKWARD, OUTPUT, TRAIN
from suite.core.registry import Launch, kernel


@dataclass(frozen=True)
class Pass:
    """One prepared pass of a training step: `run` launches it; a forward names what it saved."""

    run: Callable[[], None]
    saved: Mapping[str, Any] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)


class Written(dict):
    """A forward's `saved` where that forward wrote the gradients itself (a training step whose forward folds the
    backward in, chunk by chunk): the backward handed it has nothing left to compute and launches nothing."""


Forward = Callable[[dict[str, Any], Any, dict, dict], Pass]
"""forward(inputs, y, params, opts) -> Pass whose `saved` is what the backward pass reads."""
Backward = Callable[[dict[str, Any], Mapping[str, Any], Mapping[str, Any], dict, dict], Pass]
"""backward(inputs, saved, grads, params, opts) -> Pass writing each buffer of `grads`."""


def nbytes(arrays: Mapping[str, Any]) -> dict[str, int]:
    """Bytes of each array (NumPy, CuPy, torch and Numba device arrays all say `nbytes`)."""
    return {name: int(a.nbytes) for name, a in arrays.items()}


def empty_like(a: Any) -> Any:
    """An uninitialised array like `a`, in `a`'s own library (torch, or a module with NumPy's `empty_like`: NumPy,
    CuPy); a backend whose arrays are neither hands `training` its own."""
    if hasattr(a, "new_empty"):  # torch
        return a.new_empty(a.shape)
    return __import__(type(a).__module__.split(".")[0]).empty_like(a)


def _forward(forward: Forward, inputs: dict, y: Any, params: dict, opts: dict, grads: Mapping | None) -> Pass:
    """The forward, handed the gradient buffers where it takes them (a forward that writes a gradient itself)."""
    if "grads" in inspect.signature(forward).parameters:
        return forward(inputs, y, params, opts, grads=grads)  # type: ignore[call-arg]
    return forward(inputs, y, params, opts)


def backward_entry(
    forward: Forward, backward: Backward, upstream: tuple[str, ...], like: Callable[[Any], Any] = empty_like
) -> Callable[..., Launch]:
    def entry(inputs: dict[str, Any], out: Mapping[str, Any], params: dict, opts: dict) -> Launch:
        with kernelspec.recording([]):  # the row's resources are its backward kernels', not the forward's
            fwd = _forward(forward, inputs, like(inputs[upstream[0]]), params, opts, None)
        bwd = backward(inputs, fwd.saved, out, params, opts)  # every backward kernel built and on record ...
        fwd.run()  # ... before the forward runs (refused where the target only compiles), outside the timed region
        return Launch(bwd.run, notes={**fwd.notes, **bwd.notes}, saves=nbytes(fwd.saved))

    return entry


def train_entry(forward: Forward, backward: Backward) -> Callable[..., Launch]:
    def entry(inputs: dict[str, Any], out: Mapping[str, Any], params: dict, opts: dict) -> Launch:
        grads = {name: buf for name, buf in out.items() if name != OUTPUT}
        fwd = _forward(forward, inputs, out[OUTPUT], params, opts, grads)
        bwd = backward(inputs, fwd.saved, grads, params, opts)
        notes = {**fwd.notes, **bwd.notes}
        if "launch" in fwd.notes and "launch" in bwd.notes:  # a step launches both: neither hides the other
            notes["forward_launch"] = fwd.notes["launch"]

        def step() -> None:
            fwd.run()
            bwd.run()

        return Launch(step, notes=notes, saves=nbytes(fwd.saved))

    return entry


def training(
    scenario: str | Iterable[str],
    *,
    backend: str,
    device: str | Iterable[str],
    upstream: tuple[str, ...] = ("dy",),
    like: Callable[[Any], Any] = empty_like,
    **variants: tuple[Forward, Backward],
) -> None:
    """Register each `variant=(forward, backward)` as that variant's backward and train entries; `like(dy)` makes
    the buffer a backward entry's forward writes its output into (`empty_like` by default)."""
    for variant, (forward, backward) in variants.items():
        for phase, entry in (
            (BACKWARD, backward_entry(forward, backward, upstream, like)),
            (TRAIN, train_entry(forward, backward)),
        ):
            kernel(scenario=scenario, backend=backend, variant=variant, device=device, phase=phase)(entry)
