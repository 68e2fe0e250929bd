"""A chain of registered kernels run as one: what a composed scenario (a decoder layer) launches.

A composed family does not write kernels of its own. It lists its steps in order: an `Op` is one run of another
family's registered kernel on buffers the composition owns (views into preallocated activations, weights made
once), and a `Step` is a plain launcher the backend supplies for what no family times (its library GEMM, a
layout copy). `compose` looks every op's kernel up in the registry for one backend and device, with the variant
the composition picks for that family, builds each op's launcher on its buffers, and returns one `Launch` that
runs them all in order. So a family's better kernel makes the composition better without an edit here or there,
and a backend serves the composition as soon as it registers every family the chain names.

Each op's launcher is built here, once, while the composition prepares: its compilation and its scratch stay
outside the timed region, as the registry's protocol asks of any entry. An op's `Launch.notes` and `allocates`
are gathered under the op's label, so the row says which kernel ran where.

On the CPU, `compose` also times each op and step inside the layer (`StepClock`, a median per launch): the
row's `extra.steps_ms` says, per label, how long that op or GEMM took between its neighbours, which is what
the report splits the layer's time by. On a GPU the host's clock around an asynchronous launch reads the
enqueue, not the kernel, so no step times are recorded there.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from suite.core.registry import REGISTRY, KernelKey, Launch, Unsupported, as_launch


@dataclass(frozen=True)
class Op:
    """One run of `family`'s registered kernel: its inputs by the family's names, its output buffer, its params."""

    label: str
    """Names the op in notes and errors ('attention', 'add_rmsnorm (post-attention)')."""
    family: str
    inputs: Mapping[str, Any]
    out: Any
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Step:
    """A launcher the backend built itself (a library GEMM, a copy): nothing to look up."""

    label: str
    run: Callable[[], None]


@dataclass
class Built:
    """What composing found: the launchers in order, and what each op reported."""

    launchers: list[Callable[[], None]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    allocates: dict[str, int] = field(default_factory=dict)


STEPS_MS = "steps_ms"
"""The note holding each op's and step's median time inside the layer, in ms per launch, by label."""
STEP_ORDER = "step_order"
"""The note listing the labels in the chain's order (a row's `extra` is written with its keys sorted)."""


class StepClock:
    """Each labelled launcher's time inside the composition, as a median in ms per launch, kept in `into`.

    `perf_counter` around each launcher costs well under a microsecond next to ops of tens of microseconds and
    more. The first launch is left out (it compiles the JIT kernels and warms the caches: the row's
    `compile_ms`). A label given twice adds up under one key. The median, as the row's time is: on a shared
    host a preempted launch is thousands of times an op's time, and one in a hundred moved a mean by more than
    the op itself. The launches' times are kept (a tuple appended per launch) and the medians written into
    `into` whenever the count of launches reaches a power of two, so the work a launch adds stays a few
    appends, the sort amortised to a constant; the medians are those of at least half the launches.
    `into` is filled in place: the suite copies a launcher's notes after its first launch, and this dict, held
    by that copy, goes on filling while the launcher is timed."""

    def __init__(self, labels: Sequence[str], into: dict[str, float]) -> None:
        self.labels = tuple(labels)
        self.keys = list(dict.fromkeys(self.labels))
        self.samples: list[tuple[float, ...]] = []
        self.into = into
        self.first = True  # the first launch is not counted

    def run(self, launchers: Sequence[Callable[[], None]]) -> None:
        spent = []
        for launcher in launchers:
            start = time.perf_counter()
            launcher()
            spent.append(time.perf_counter() - start)
        if self.first:
            self.first = False
            return
        self.samples.append(tuple(spent))
        n = len(self.samples)
        if n & (n - 1) == 0:
            self.publish()

    def publish(self) -> None:
        """Write each label's median (ms) over the launches kept so far into `into`."""
        medians = 1e3 * np.median(np.asarray(self.samples), axis=0)
        found = dict.fromkeys(self.keys, 0.0)
        for label, ms in zip(self.labels, medians, strict=True):
            found[label] += float(ms)
        self.into.update(found)


def compose(
    steps: Sequence[Op | Step],
    variants: Mapping[str, str],
    *,
    backend: str,
    device: str,
    opts: Mapping[str, Any],
    step_times: bool = True,
    within: Callable[[], AbstractContextManager] | None = None,
) -> Launch:
    """One `Launch` running `steps` in order, each `Op` as `backend`'s kernel of its family on `device` in the
    variant `variants[family]`. A family the backend does not register in that variant makes the composition
    `Unsupported` (a skipped row naming it); an op's own refusal is passed on with the op named.

    With `step_times` and on `device` 'cpu' only, each op's and step's median time inside the launch is kept in
    the notes as `steps_ms` (`StepClock`), their labels in order as `step_order`; a CUDA launch returns before
    its kernel ran, so the host's clock around it would time the enqueue and nothing is recorded there.
    `within`: a context every launch runs in (a GPU backend's stream, where its launchers take it from the
    context rather than as an argument)."""
    built = Built()
    for step in steps:
        if isinstance(step, Step):
            built.launchers.append(step.run)
            continue
        variant = variants[step.family]
        entry = REGISTRY.get(KernelKey(step.family, backend, variant, device))
        if entry is None:
            raise Unsupported(f"{backend} registers no {variant} {step.family} kernel on {device}")
        try:
            launch = as_launch(entry(dict(step.inputs), step.out, dict(step.params), dict(opts)))
        except Unsupported as exc:
            raise Unsupported(f"{step.label}: {exc}") from None
        built.launchers.append(launch.run)
        if launch.notes:
            built.notes[step.label] = launch.notes
        built.allocates |= {f"{step.label}: {name}": size for name, size in launch.allocates.items()}
    launchers = tuple(built.launchers)
    if step_times and device == "cpu":
        labels = [step.label for step in steps]
        built.notes[STEP_ORDER] = list(dict.fromkeys(labels))
        clock = StepClock(labels, built.notes.setdefault(STEPS_MS, {}))
        chain: Callable[[], None] = functools.partial(clock.run, launchers)
    else:

        def chain() -> None:
            for launcher in launchers:
                launcher()

    if within is None:
        return Launch(chain, notes=built.notes, allocates=built.allocates)

    def run() -> None:
        with within():
            chain()

    return Launch(run, notes=built.notes, allocates=built.allocates)
