"""One pytest-benchmark benchmark per (case, implementation) of the registry that runs natively here.

Timing: `benchmark.pedantic(target, setup=flush, rounds, warmup_rounds)` with one call per round, not
pytest-benchmark's calibrated loop, because the suite's discipline needs a setup before every repetition: the
config's cold caches (`timing.cold_cache`: a last-level-cache flush on the CPU; L2, always, on CUDA) cannot be
flushed inside a loop of many calls, and on CUDA each call must end with the shared stream synchronised so the
host's clock includes the kernel. Rounds and warm-up follow the config's `timing` (budget_s, min_reps,
max_reps, warmup). The fusion verdict is measured apart from the benchmark, by the suite's own paired,
interleaved rounds (CUDA events on the GPU), so it has the same meaning as in `results.csv`.
"""

from __future__ import annotations

import pytest

from suite.benchmark.cases import extra_info


def test_case(benchmark, fusebench, bench_case) -> None:
    prep = fusebench.prepare(bench_case)
    if prep.skip:
        pytest.skip(prep.skip)
    if prep.failure:
        pytest.fail(prep.failure, pytrace=False)
    assert prep.check is not None and prep.check.status == "ok"
    benchmark.group = bench_case.group
    target, setup = fusebench.timed_call(prep)
    rounds, warmup = fusebench.rounds(prep)
    benchmark.pedantic(target, setup=setup, rounds=rounds, warmup_rounds=warmup, iterations=1)
    median_s = benchmark.stats["median"] if benchmark.stats else None
    benchmark.extra_info.update(extra_info(prep, median_s))
    benchmark.extra_info.update(fusebench.fusion(prep))
