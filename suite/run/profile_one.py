"""`python -m suite.run.profile_one SPEC OUT`: one implementation of one case, launched once for Nsight Compute.

`suite.run.profile` runs this under `ncu --profile-from-start off`, so ncu counts only what happens between
cuProfilerStart and cuProfilerStop: the implementation is built and checked by the suite's own machinery
(`suite.run.check`, the same inputs from the same case seed as the timed row), launched once to warm up, then
launched exactly once more inside the bracket and synchronised before profiling stops. SPEC is a JSON file
(`spec`), OUT the JSON file where the result is written: {"ok": true, "build_s": seconds} or {"error": reason},
for the parent to tell a failed launch from a failed profiler. `build_s` is how long building and checking took:
short where the worker's compile caches (the spec's cache_dir, Triton's and CuPy's on-disk caches) were warm.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from suite.core import phases, targets
from suite.core import scenario as scenarios
from suite.core.plugins import load_plugins
from suite.core.registry import KernelKey
from suite.core.row import Row
from suite.run import build, case_inputs, check, validate
from suite.run.config import TimingConfig
from suite.run.job import Job, case_seed

Bracket = Callable[[], AbstractContextManager[None]]


def spec(job: Job, row: Row, plugins: list[str]) -> dict[str, Any]:
    """What the child needs to rebuild `row`'s implementation of `job`'s case exactly as the worker built it."""
    return {
        "scenario": job.scenario,
        "params": job.params,
        "dtype": job.dtype,
        "backend": row.backend,
        "device": row.device,
        "variant": row.variant,
        "seed": job.seed,
        "emulate_max_elements": job.emulate_max_elements,
        "backend_options": job.backend_options,
        "cache_dir": job.cache_dir,
        "plugins": list(plugins),
        "phase": job.phase,
    }


def job_of(s: dict[str, Any]) -> Job:
    """The one-implementation job of a spec: natively run, never emulated."""
    return Job(
        s["scenario"],
        s["params"],
        s["dtype"],
        [s["backend"]],
        [s["device"]],
        [s["variant"]],
        int(s["seed"]),
        TimingConfig(),
        False,
        int(s["emulate_max_elements"]),
        s["backend_options"],
        cache_dir=s["cache_dir"],
        strict=True,
        phase=s.get("phase", "forward"),
    )


def launch_once(s: dict[str, Any], bracket: Bracket, timings: dict[str, float] | None = None) -> str:
    """Build and check the spec's implementation, warm it up, and launch it once inside `bracket`; return the
    kernel key's name and put the build's seconds in `timings["build_s"]`. Raises on anything that stops that
    (not native here, a failed check)."""
    load_plugins(s["plugins"])
    validate.discover()
    if targets.cuda_device_count() > 0:
        from suite.run.worker import share_cuda_stream

        share_cuda_stream()
    job = job_of(s)
    key = KernelKey(job.scenario, s["backend"], s["variant"], s["device"], job.phase)
    avail = build.availability(key, job)
    if avail.mode != targets.NATIVE or avail.target is None:
        raise RuntimeError(f"{key.backend}/{key.device} does not run natively here: {avail.reason or avail.mode}")
    scn = phases.phased(scenarios.get(job.scenario), job.phase)
    data = case_inputs.Inputs(scn, job.dtype, case_seed(job.seed, job.scenario, job.params, job.dtype))
    started = time.perf_counter()
    built, _ = check.build_and_check(key, avail, job, data, scn)
    if timings is not None:
        timings["build_s"] = round(time.perf_counter() - started, 3)
    if built.status != "ok" or built.launcher is None:
        raise RuntimeError(f"build and check: {built.status}: {built.reason}")
    built.launcher()  # warm-up: the first call after the check, caches and autotuning settled
    avail.target.synchronize()
    with bracket():
        built.launcher()
        avail.target.synchronize()
    return f"{key.backend}/{key.device}/{key.variant}"


@contextlib.contextmanager
def cuda_profiler() -> Iterator[None]:
    """cuProfilerStart ... cuProfilerStop on the primary context every backend launches in (driver API)."""
    from suite.gpu import driver

    driver.ensure_current()
    driver.profiler_start()
    try:
        yield
    finally:
        driver.profiler_stop()


def main(argv: list[str] | None = None) -> int:
    spec_path, out_path = argv if argv is not None else sys.argv[1:]
    try:
        timings: dict[str, float] = {}
        done = launch_once(json.loads(Path(spec_path).read_text(encoding="utf-8")), cuda_profiler, timings)
        result: dict[str, Any] = {"ok": True, "launched": done, **timings}
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    Path(out_path).write_text(json.dumps(result) + "\n", encoding="utf-8")
    return 0 if "ok" in result else 1


if __name__ == "__main__":
    sys.exit(main())
