"""Walking an unfused decomposition: every backend allocates the tensors its steps write the same way.

A scenario's unfused variant is a sequence of steps, each reading tensors by name and writing one (`writes`).
A backend prepares one launch per step against buffers looked up by name, and must give each tensor a step
writes a buffer first; only the allocator differs between libraries. `walk` is that loop once, generic over
the step type: the caller names the tensors that are small statistics and says how to allocate them and the
rest, and gets each step back when its output has a buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator
from typing import Any, Protocol, TypeVar


class Writes(Protocol):
    """A step of a decomposition: all `walk` needs is the name of the tensor it writes."""

    @property
    def writes(self) -> str: ...


S = TypeVar("S", bound=Writes)


def walk(
    steps: Iterable[S],
    env: dict[str, Any],
    *,
    stats: Container[str],
    stat: Callable[[], Any],
    matrix: Callable[[], Any],
) -> Iterator[S]:
    """Yield each step once `env` holds a buffer for the tensor it writes: a name already there (an input, the
    output) is used as it is, a name in `stats` gets `stat()`, any other `matrix()`. The buffers stay in `env`,
    allocated once, for the launcher to reuse at every launch."""
    for step in steps:
        if step.writes not in env:
            env[step.writes] = stat() if step.writes in stats else matrix()
        yield step
