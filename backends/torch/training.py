"""torch autograd as the rival in the backward and train phases: the family's forward as torch ops, differentiated.

A family registers its forward once (`autograd_variants`), written as the torch ops of its canonical
decomposition (and, where torch has the op, its library call), and gets:
- `eager` (and `library`): torch's eager autograd. The backward phase runs the forward once while it prepares
  (autograd saves what it saves), then each launch is `torch.autograd.grad(y, inputs, dy, retain_graph=True)`;
  the train phase runs forward and backward in every launch.
- `compiled`: the same forward through `torch.compile` (default settings), whose AOTAutograd traces the
  backward too and partitions what to save against what to recompute — the compiler's own answer to the
  question fusion asks.

autograd returns gradients in tensors of its own: the launch keeps them, and `Launch.publish` copies them into
the suite's buffers after each launch the suite reads, never inside a timed one. What the forward saved is
measured with `torch.autograd.graph.saved_tensors_hooks` (each saved tensor once, by its storage), and reported
in `Launch.saves`; an input autograd keeps alive counts as saved.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from backends.torch import BACKEND, DEVICES
from backends.torch.compiler import cache_folder, user_cache
from suite.core.phases import BACKWARD, OUTPUT, TRAIN
from suite.core.registry import Launch, kernel

ForwardFn = Callable[..., torch.Tensor]
"""forward(**inputs) -> y, in torch ops (inputs by name, the upstream gradients left out); a forward that takes a
keyword `params` is handed the case's (rope's pairing, a chain's ops)."""


def _leaves(inputs: Mapping[str, Any], wrt: Iterable[str], upstream: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The forward's inputs; those in `wrt` as leaves that require a gradient (the suite's buffers untouched)."""
    out = {}
    for name, t in inputs.items():
        if name in upstream:
            continue
        out[name] = t.detach().clone().requires_grad_(True) if name in wrt else t
    return out


class _Saved:
    """Counts the bytes of every tensor autograd saves during a forward, each storage once."""

    def __init__(self) -> None:
        self.bytes: dict[str, int] = {}

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        key = f"{tuple(t.shape)}@{t.untyped_storage().data_ptr():x}"
        self.bytes.setdefault(key, t.untyped_storage().nbytes())
        return t

    def hooks(self) -> Any:
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


def _entry(forward: ForwardFn, wrt: tuple[str, ...], upstream: tuple[str, ...], phase: str, compile_it: bool):
    def entry(inputs: dict[str, Any], out: Mapping[str, Any], params: dict, opts: dict) -> Launch:
        on_stream = BACKEND.launch_stream(opts.get("stream"))
        case = (
            functools.partial(forward, params=params) if "params" in inspect.signature(forward).parameters else forward
        )
        if compile_it:
            if (cache := cache_folder(opts)) and cache != user_cache():
                import os

                os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", cache)
            fn = torch.compile(case, mode=opts.get("mode") or "default", dynamic=bool(opts.get("dynamic", False)))
        else:
            fn = case
        leaves = _leaves(inputs, wrt, upstream)
        order = [name for name in wrt]
        dy = [inputs[name] for name in upstream]
        held: dict[str, Any] = {}
        saved = _Saved()

        def forward_pass() -> torch.Tensor:
            with on_stream(), torch.enable_grad():
                return fn(**leaves)

        # The backward phase differentiates one forward again and again (retain_graph), which a compiled backward
        # whose buffers AOTAutograd donated refuses: compiled for this phase, it donates none.
        donated = torch._functorch.config.patch(donated_buffer=phase != BACKWARD)
        with saved.hooks(), donated:
            held["y"] = forward_pass()  # backward: the one forward it differentiates; train: the first call's

        def backward_pass(y: torch.Tensor) -> None:
            with on_stream():
                held["grads"] = torch.autograd.grad(y, [leaves[n] for n in order], dy, retain_graph=phase == BACKWARD)

        def run() -> None:
            if phase == TRAIN:
                held["y"] = forward_pass()
            backward_pass(held["y"])

        def publish() -> None:
            with on_stream(), torch.no_grad():
                for name, g in zip(order, held["grads"], strict=True):
                    out[f"d{name}"].copy_(g)
                if phase == TRAIN:
                    out[OUTPUT].copy_(held["y"].reshape(out[OUTPUT].shape))

        notes = {"autograd": "torch.compile (AOTAutograd)" if compile_it else "eager"}
        return Launch(run, notes=notes, saves=saved.bytes, publish=publish)

    return entry


def autograd_variants(
    scenario: str, *, wrt: tuple[str, ...], upstream: tuple[str, ...] = ("dy",), **forwards: ForwardFn
) -> None:
    """Register, for each `variant=forward` (eager, library), its backward and train entries through eager
    autograd; the `eager` forward also through torch.compile as variant `compiled`."""
    for variant, forward in forwards.items():
        for phase in (BACKWARD, TRAIN):
            made = _entry(forward, wrt, upstream, phase, compile_it=False)
            kernel(scenario=scenario, backend="torch", variant=variant, device=DEVICES, phase=phase)(made)
            if variant == "eager":
                made = _entry(forward, wrt, upstream, phase, compile_it=True)
                kernel(scenario=scenario, backend="torch", variant="compiled", device=DEVICES, phase=phase)(made)
