"""Where kernels run: a session holding the run-wide state, in a worker process or in this one.

The worker process is the default. It sets the emulation switches before any backend is imported (the
interpreter and the simulator read them at import), measures the ceilings once, and keeps JIT caches warm across
cases. When a case runs past its time limit or the worker dies (a kernel crash), the parent kills it, records the
case's rows as errors and starts a fresh worker: the sweep goes on and no written row is lost. A sticky CUDA
error (an illegal address, a launch failure: `suite.run.faults`) leaves the worker alive but its CUDA context
unusable, so the worker tells the parent (a `fatal` message naming the culprit) and exits, and the parent starts
a fresh one. Each way, the culprit's row says what happened and the rest of the case runs again without it.

Between cases every CUDA library hands its cached memory back (`footprint.release_caches`), so that no case
inherits another's pools.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from suite.core import phases, targets
from suite.core import scenario as scenarios
from suite.core.plugins import load_plugins
from suite.core.registry import KernelKey
from suite.core.row import Row
from suite.run import ceiling, faults, footprint, peak_memory, provenance, result_rows, validate
from suite.run.execute import execute
from suite.run.job import Case, Job, case_seed


@dataclass
class Settings:
    emulate: bool
    devices: list[str]
    plugins: list[str] = field(default_factory=list)
    ceilings: dict[str, ceiling.Ceiling] | None = None


def share_cuda_stream() -> None:
    """Point every CUDA target at the one stream all backends launch on and the timer records events on."""
    from suite.gpu import driver as cuda_driver

    for target in targets.TARGETS.values():
        if target.device == "cuda":
            target.stream = cuda_driver.shared_stream()


class Session:
    """Run-wide state: device names, provenance, ceilings; `run(job)` turns one case into its rows, each made
    whole by `suite.run.result_rows` (device name, provenance and run id included)."""

    def __init__(self, settings: Settings) -> None:
        targets.configure_emulation(settings.emulate)
        self.plugins = tuple(settings.plugins)
        load_plugins(self.plugins)  # before the scan: a plug-in's kernels are found like the tree's
        validate.discover()
        peak_memory.freeze_imports()
        self.gpu = targets.cuda_device_count() > 0
        self.device_names = {"cpu": provenance.cpu_name()}
        if self.gpu:
            from suite.gpu import driver as cuda_driver

            self.device_names["cuda"] = cuda_driver.device_name()
            share_cuda_stream()
        self.ceilings = settings.ceilings or self._measure_ceilings(settings.devices)
        self.versions, self.git_rev = provenance.versions(), provenance.git_rev()
        self.environment = provenance.environment(self.gpu)
        self.cuda_clock = None

    def _measure_ceilings(self, devices: list[str]) -> dict[str, ceiling.Ceiling]:
        wanted = [d for d in devices if d == "cpu" or self.gpu]
        return {d: ceiling.measure(d) for d in wanted}

    def run(self, job: Job, notify: Any = None) -> list[Row]:
        """The case's rows; `faults.ContextLost` (naming the implementation that ran into it) where a sticky CUDA
        error lost the context. A GPU fault past the build-and-check (out of memory while timing) makes every
        row of the case an `error` that says so."""
        if self.gpu and self.cuda_clock is None and "cuda" in job.devices:
            from suite.run.timing import CudaClock

            self.cuda_clock = CudaClock()
        scn = phases.phased(scenarios.get(job.scenario), job.phase)
        seed = case_seed(job.seed, job.scenario, job.params, job.dtype)
        case = Case(
            job.scenario,
            job.params,
            job.dtype,
            scn.size(job.params),
            seed,
            self.versions,
            self.git_rev,
            job.run_id,
            self.device_names,
            job.model,
            job.layer,
            job.backend_options,
            self.plugins,
            _saved(scn, job),
        )
        at: list[Any] = [None]

        def seen(impl: Any) -> None:
            at[0] = impl
            if notify is not None:
                notify(impl)

        try:
            rows = execute(job, scn, case, self.ceilings, self.cuda_clock, seen)
        except Exception as exc:
            fault = faults.classify(exc)
            if fault is None:
                raise
            if fault.sticky:
                culprit = exc.culprit if isinstance(exc, faults.ContextLost) and exc.culprit else at[0]
                raise faults.ContextLost(fault.what, fault.detail, culprit) from exc
            rows = _out_of_memory(job, scn, fault, at[0])
        _release()
        return rows

    def info(self) -> dict[str, Any]:
        return {
            "ceilings": self.ceilings,
            "device_names": self.device_names,
            "gpu": self.gpu,
            "environment": self.environment,
        }


def _release() -> None:
    """After a case: collect what its launchers left in reference cycles (their device buffers with them), then
    have every CUDA library hand its cached memory back, so the next case's footprint guard sees it free."""
    gc.collect()
    footprint.release_caches()


def _out_of_memory(job: Job, scn: Any, fault: faults.Fault, at: Any) -> list[Row]:
    """`error` rows for a case the device ran out of memory on after its build-and-check (while timing, where
    `at` is None): each names its own footprint and the free memory."""
    doing = "timing the case" if at is None else "running " + "/".join(at)
    rows = []
    for key in job.keys():
        target = targets.TARGETS.get((key.backend, key.device))
        if target is None or key.device != "cuda":
            reason = f"device out of memory while {doing}; lost with the case ({fault.detail})"
        else:
            shortfall = footprint.out_of_memory(scn, job.params, job.dtype, key.variant, target)
            reason = f"{shortfall}, while {doing} ({fault.detail})"
        rows += result_rows.lost(job, reason, [key])
    return rows


class WorkerLost(RuntimeError):
    """The worker timed out or died; the message says which."""


RESTARTED = "the CUDA context is lost, the worker was restarted"
"""What the row of an implementation that hit a sticky CUDA error says after what happened."""


def _serve(conn: Any, settings: Settings) -> None:
    session = Session(settings)
    conn.send(("ready", session.info()))
    while True:
        message = conn.recv()
        if message[0] == "stop":
            return
        try:
            rows = session.run(message[1], notify=lambda impl: conn.send(("at", impl)))
        except faults.ContextLost as exc:
            conn.send(("fatal", (exc.culprit, exc.what, exc.detail)))
            _exit_lost()
        conn.send(("rows", rows))


def _exit_lost() -> None:
    """Leave at once, without the interpreter's shutdown: the CUDA libraries' exit handlers would only call into
    the lost context (and may hang there). The parent starts a fresh worker."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(70)


Attempt = Callable[[Job, float], tuple[Any, str | None]]


def run_attributed(attempt: Attempt, job: Job, timeout: float) -> list[Row]:
    """Rows of the case; an implementation that hangs, kills the worker or loses its CUDA context becomes an
    `error` row and the case is run again without it, so one bad kernel costs one row. `attempt(job, timeout)`
    returns (rows, None), or (the implementation running when it failed, or None, reason)."""
    lost: list[Row] = []
    while True:
        culprit, reason = attempt(job, timeout)
        if reason is None:
            return lost + culprit
        if culprit is None or tuple(culprit) in job.skip:  # lost while timing: the case cannot be attributed
            raise WorkerLost(reason)
        backend, device, variant = culprit
        lost += result_rows.lost(job, reason, [KernelKey(job.scenario, backend, variant, device, job.phase)])
        job = replace(job, skip=job.skip | {(backend, device, variant)})


class Worker:
    """A Session in a child process, restarted after a timeout or a crash."""

    def __init__(self, settings: Settings, start_timeout_s: float = 600.0) -> None:
        self.settings, self.start_timeout_s = settings, start_timeout_s
        self.process: Any = None
        self.info: dict[str, Any] = {}
        self._start()

    def _start(self) -> None:
        if mp.get_start_method(allow_none=True) not in (None, "fork", "spawn", "forkserver"):
            # a joblib (loky) worker names its own start method, which a spawned child cannot find: the pool
            # launcher runs jobs there
            mp.set_start_method("spawn", force=True)
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, self.settings), daemon=True)
        self.process.start()
        child.close()
        _kind, self.info = self._receive(self.start_timeout_s, "starting the worker")
        self.settings.ceilings = self.info["ceilings"]  # a restarted worker does not measure them again

    def _receive(self, timeout: float, doing: str) -> Any:
        if not self.conn.poll(timeout):
            raise WorkerLost(f"timeout: no answer within {timeout:g} s while {doing}")
        try:
            return self.conn.recv()
        except (EOFError, ConnectionError) as exc:
            self.process.join(2)
            code = self.process.exitcode
            raise WorkerLost(f"worker died (exit code {code})") from exc

    def run(self, job: Job, timeout: float) -> list[Row]:
        """Rows of the case (see `run_attributed`): a hang, a crash or a lost CUDA context costs one row."""
        return run_attributed(self._attempt, job, timeout)

    def _attempt(self, job: Job, timeout: float) -> tuple[Any, str | None]:
        """(rows, None) on success, else (the implementation running when the worker was lost, reason); the
        worker is restarted."""
        at: Any = None
        deadline = time.monotonic() + timeout
        try:
            self.conn.send(("job", job))
            while True:
                kind, payload = self._receive(max(deadline - time.monotonic(), 0.0), "running the case")
                if kind == "rows":
                    return payload, None
                if kind == "fatal":  # a sticky CUDA error: the worker exits on its own, and a fresh one starts
                    culprit, what, detail = payload
                    self.process.join(10)
                    self.kill()
                    self._start()
                    return culprit, f"{what}; {RESTARTED} ({detail})"
                at = payload
        except (WorkerLost, BrokenPipeError, EOFError) as exc:
            self.kill()
            self._start()
            doing = "timing the case" if at is None else "running " + "/".join(at)
            if "timeout" in str(exc):
                limit = f"over the case limit of {timeout:g} s (timing.case_timeout_s)"
                return at, f"timeout: {limit} while {doing}; the worker was killed and restarted"
            return at, f"{exc} while {doing}; the worker was restarted"

    def kill(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.process.kill()
            self.process.join(5)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.send(("stop",))
            self.process.join(5)
        self.kill()


class InProcess:
    """The same interface without a child process (isolate=false): no timeouts, but fakes registered in tests work."""

    def __init__(self, settings: Settings) -> None:
        self.session = Session(settings)
        self.info = self.session.info()

    def run(self, job: Job, timeout: float) -> list[Row]:
        """The case's rows; a sticky CUDA error costs the culprit's row as in a worker, but with no process to
        restart, the context stays lost for the rest of the run (isolate=true restarts the worker)."""
        return run_attributed(self._attempt, job, timeout)

    def _attempt(self, job: Job, timeout: float) -> tuple[Any, str | None]:
        try:
            return self.session.run(job), None
        except faults.ContextLost as exc:
            lost = "the CUDA context is lost and stays lost (isolate=false: no worker to restart)"
            return exc.culprit, f"{exc.what}; {lost} ({exc.detail})"

    def close(self) -> None:
        return None


def _saved(scn: Any, job: Job) -> dict[str, int]:
    """Per variant, the bytes the family's model says its forward keeps for the backward (backward and train)."""
    if job.phase == phases.FORWARD:
        return {}
    try:
        return {variant: sum(kept.values()) for variant, kept in scn.saved(job.params, job.dtype).items()}
    except NotImplementedError:
        return {}
