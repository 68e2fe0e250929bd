"""torch.compile as the rival: a decomposition written as torch ops, compiled by Inductor, into the suite's output.

The question a performance engineer asks before fusing by hand is what the compiler already fuses for free.
Variant `compiled` answers it: the scenario's canonical unfused decomposition, the same torch ops as variant
`eager`, passed through `torch.compile` (Inductor: C++/OpenMP kernels on the CPU, generated Triton on CUDA),
writing into the preallocated output so no allocation of the result is timed.

- Compile cost is kept apart from run cost: the first call compiles (Dynamo's trace, Inductor's lowering and,
  with `max-autotune`, its autotuning), and the suite times that call as `compile_ms`; every later call runs the
  cached graph. Inductor's on-disk cache lives in the run directory (`<run>/cache/inductor`) unless
  TORCHINDUCTOR_CACHE_DIR says otherwise, so a rerun into the same directory is warm and its rows say so.
- What the compiler made is recorded on the first call from the code Inductor generated (`inductor_code`):
  the kernels it launches, the library calls it kept, whether a full-size intermediate still reaches memory.
- Every case is its own graph: each shape is compiled for itself (`dynamic=false`, the default) unless
  `backend_options.torch.dynamic=true`. Dynamo's recompile limit is lifted so a sweep never falls back to eager
  silently after a few shapes, and a hit of the limit fails the row instead.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import torch

from backends.torch import inductor_code
from suite.core.registry import Launch

RECOMPILE_LIMIT = 1 << 16


def _lift_recompile_limit() -> None:
    """A sweep compiles one function per case shape: past Dynamo's default limit of 8 it would run eager."""
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), RECOMPILE_LIMIT))
    for name in ("fail_on_recompile_limit_hit", "fail_on_cache_limit_hit"):
        if hasattr(config, name):
            setattr(config, name, True)


_lift_recompile_limit()


_OURS: set[str] = set()
"""Cache folders this process put into TORCHINDUCTOR_CACHE_DIR itself (run directories)."""


def user_cache() -> str | None:
    """A TORCHINDUCTOR_CACHE_DIR the user chose. torch writes its default into the variable once it has asked
    for the folder (and a worker inherits that), and a run directory is the suite's own: neither is a choice."""
    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not chosen or os.path.abspath(chosen) in {os.path.abspath(_default_cache()), *_OURS}:
        return None
    return chosen


def _default_cache() -> str:
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # an older torch: its default, written out
        return os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")
    return default_cache_dir()


def cache_folder(opts: Mapping[str, Any]) -> str | None:
    """Where Inductor's cache goes: the user's TORCHINDUCTOR_CACHE_DIR, else `<run>/cache/inductor`, else
    torch's default (a caller that names no run directory, a test)."""
    if chosen := user_cache():
        return chosen
    run_cache = opts.get("cache_dir")
    return str(Path(run_cache) / "inductor") if run_cache else None


@contextlib.contextmanager
def _recording(codes: list[str]) -> Iterator[None]:
    """Collect the output code of every graph Inductor compiles, or loads from its cache, meanwhile."""
    from torch._inductor.graph import GraphLowering

    with mock.patch.object(GraphLowering, "save_output_code", codes.append):
        yield


def _cache_hits() -> tuple[int, int]:
    from torch._dynamo.utils import counters

    return counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]


_MADE: dict[tuple, dict[str, Any]] = {}
"""What Inductor made for each (function, closure, argument shapes and dtypes, settings) compiled in this process:
Dynamo serves a second entry of the same function and shapes (another tile of the same matmul) from its own
cache without generating code again, and the row must still say what runs."""


def _identity(fn: Callable[..., None], args: tuple[Any, ...], settings: Mapping[str, Any]) -> tuple:
    def describe(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return tuple(value.shape), str(value.dtype), str(value.device)
        return repr(value)

    cells = tuple(describe(c.cell_contents) for c in fn.__closure__ or ())
    return fn.__code__, cells, tuple(describe(a) for a in args), tuple(sorted(settings.items()))


class Compiled:
    """The launcher of a compiled decomposition: the first call compiles and records what Inductor made
    (`notes`), every later call only runs it."""

    def __init__(
        self,
        fn: Callable[..., None],
        args: tuple[Any, ...],
        out: torch.Tensor,
        opts: Mapping[str, Any],
        context: Callable[[], contextlib.AbstractContextManager],
    ) -> None:
        mode = opts.get("mode") or "default"
        self.compiled = torch.compile(fn, mode=mode, dynamic=bool(opts.get("dynamic", False)), fullgraph=True)
        self.args, self.context = args, context
        self.full_elements = max([out.numel(), *(a.numel() for a in args if isinstance(a, torch.Tensor))])
        """The case's full tensor size: its largest input or output, what a kept buffer must match to be a
        full-size intermediate (`inductor_code.Generated.full_size`)."""
        self.cache = cache_folder(opts)
        self.notes: dict[str, Any] = {}
        self._first = True
        self._settings = {"mode": mode, "dynamic": bool(opts.get("dynamic", False))}
        self._identity = _identity(fn, args, self._settings)

    def __call__(self) -> None:
        if self._first:
            self._first = False
            self._compile()
            return
        with self.context(), torch.no_grad():
            self.compiled(*self.args)

    def _compile(self) -> None:
        if self.cache and self.cache != user_cache():
            _OURS.add(os.path.abspath(self.cache))
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = self.cache
        codes: list[str] = []
        hits, misses = _cache_hits()
        start = time.perf_counter()
        with _recording(codes), self.context(), torch.no_grad():
            self.compiled(*self.args)
        seconds = time.perf_counter() - start
        new_hits, new_misses = _cache_hits()
        if codes:
            made = {**inductor_code.read(codes).notes(self.full_elements), "graphs": len(codes)}
            warm = new_hits > hits and new_misses == misses
            made["cache"] = "warm" if warm else "cold"
            _MADE[self._identity] = made
        else:  # Dynamo reused a graph compiled earlier in this process for the same function and shapes
            made = {**_MADE.get(self._identity, {}), "cache": "reused in process"}
        self.notes["compiler"] = {
            **made,
            **self._settings,
            "cache_dir": self.cache or "",
            "first_call_s": round(seconds, 3),
        }


def compiled(
    fn: Callable[..., None],
    args: tuple[Any, ...],
    out: torch.Tensor,
    opts: Mapping[str, Any],
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> Launch:
    """A launch running `fn(*args)` (which writes `out`) through torch.compile with the backend's options; its notes
    say, after the first call, what the compiler generated."""
    run = Compiled(fn, args, out, opts, context)
    return Launch(run, notes=run.notes)
