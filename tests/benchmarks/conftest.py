"""Options and parametrisation of the pytest-benchmark front door (`nox -s benchmark -- [pytest options]`).

`--fusebench-preset` picks the size preset and `--fusebench-overrides` takes Hydra overrides as `python -m suite`
does (space-separated, in one option). Cases are composed only when a run names the front door: the test suite
(`pytest tests`) loads this file while it collects but never collects `bench_registry.py`, so it composes nothing.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fusebench", "fusebench registry cases as benchmarks")
    group.addoption("--fusebench-preset", default=None, help="size preset: S (default, about a minute), M, L")
    group.addoption(
        "--fusebench-overrides",
        default="",
        help="Hydra overrides as for `python -m suite`, space-separated in one option, "
        "e.g. 'scenario=softmax dtype=float32 backends=[numba]' (default: preset S, device cpu without a GPU)",
    )


def _cases(config: pytest.Config) -> list:
    from suite import cli  # registers the config schema and every family's node
    from suite.benchmark.cases import cases, front_door_overrides
    from suite.core.errors import ConfigError

    if not hasattr(config, "_fusebench_cases"):
        try:
            user = shlex.split(config.getoption("fusebench_overrides") or "")
        except ValueError as exc:
            raise pytest.UsageError(f"fusebench: error: --fusebench-overrides: {exc}") from None
        overrides = front_door_overrides(config.getoption("fusebench_preset"), user)
        cache = getattr(config, "cache", None)
        outdir = cache.mkdir("fusebench") if cache is not None else Path(tempfile.mkdtemp(prefix="fusebench-"))
        try:
            config._fusebench_cases = cases(cli.compose_jobs(["-m", *overrides]), outdir)
        except ConfigError as exc:
            raise pytest.UsageError(f"fusebench: error: {exc}") from None
    return config._fusebench_cases


def pytest_collection(session: pytest.Session) -> None:
    """Compose the cases before collection, so a bad override is a usage error (one line, pytest's exit status
    4), not a collection error. Only called where this file is an initial conftest: a run that names the
    front door, never `pytest tests`, which loads it during collection."""
    here = Path(__file__).resolve().parent
    named = [Path(arg.split("::")[0]).resolve() for arg in session.config.args]
    if any(path == here or here in path.parents for path in named):
        _cases(session.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "bench_case" in metafunc.fixturenames:
        found = _cases(metafunc.config)
        metafunc.parametrize("bench_case", found, ids=[c.id for c in found])


@pytest.fixture(scope="session")
def fusebench():
    """The run-wide state every benchmark shares: CUDA stream and clock, the current case's built kernels."""
    from suite.benchmark.cases import Bench

    return Bench()
