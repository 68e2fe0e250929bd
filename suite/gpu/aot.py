"""Ahead-of-time compiles of the kernels whose backend needs a process without emulation, in a persistent helper.

Some compilers cannot run where the suite's worker has switched emulation on (on a machine without a GPU): the
Triton interpreter replaces `triton.jit` and the Numba CUDA simulator replaces `numba.cuda` the moment they are
imported. A backend says so (`Backend.compile_isolated`), and the worker then starts `python -m suite.gpu.aot`
once, lazily, with the emulation switches removed from its environment (and no visible GPU, so it never
creates a context next to a timed kernel), and sends it kernel specs as line-delimited JSON on stdin; each
answer is one JSON line on stdout. The helper imports the backends (`discover`), asks the spec's backend to
compile it (`Backend.compile`) and reads the resulting `Build` as every build is read (`suite.gpu.assembler`).

Request:  {"id": 1, "spec": {"backend": "<name>", "recipe": {...}}}   (`KernelSpec.compile_json()`)
Answer:   {"id": 1, "ok": true, "result": {"kernel", "registers", "spill_store_bytes", "spill_load_bytes",
           "stack_bytes", "smem_bytes", "assembler", "compile_s"}}  or  {"id": 1, "ok": false, "error": "..."}
"""

from __future__ import annotations

import atexit
import collections
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from suite.core.backend import BACKENDS
from suite.core.kernelspec import freeze
from suite.core.registry import discover
from suite.core.targets import EMULATION_SWITCHES
from suite.gpu.assembler import read

ROOT = Path(__file__).resolve().parents[2]
"""The repository, put on the helper's path so that it imports this tree's suite and backends."""
TIMEOUT_S = 600.0
"""Per request; the first also pays the helper's imports (every backend's library)."""

# --- server side ----------------------------------------------------------------------------------------------


def compile_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The resources of one spec (`KernelSpec.compile_json()`), compiled by its backend in this process."""
    started = time.perf_counter()
    name = spec["backend"]
    if name not in BACKENDS:
        discover()
    if name not in BACKENDS:
        raise ValueError(f"no backend {name!r} is registered here (known: {', '.join(sorted(BACKENDS))})")
    recipe = {key: freeze(value) for key, value in spec["recipe"].items()}
    return read(BACKENDS[name].compile(recipe), started)


def serve() -> None:
    """Answer requests until stdin closes. Anything the compilers print goes to stderr, not the protocol."""
    answers = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        request_id = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            answer = {"id": request_id, "ok": True, "result": compile_spec(request["spec"])}
        except BaseException as exc:  # one bad kernel must not take the helper down
            if isinstance(exc, KeyboardInterrupt):
                raise
            answer = {"id": request_id, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:4000]}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


# --- client side ----------------------------------------------------------------------------------------------


class AotError(RuntimeError):
    pass


class Client:
    """The helper process of this process: started on first use, restarted if it dies or hangs."""

    def __init__(self, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: collections.deque[str] = collections.deque(maxlen=40)
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.pid = os.getpid()

    def _start(self) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k not in EMULATION_SWITCHES}
        env["CUDA_VISIBLE_DEVICES"] = ""  # compiles need no GPU; never open a context beside timed kernels
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        proc = subprocess.Popen(
            [sys.executable, "-m", "suite.gpu.aot"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self.lines = queue.Queue()
        self.stderr.clear()

        def pump(stream: Any, sink: Any) -> None:
            for line in stream:
                sink(line)
            if stream is proc.stdout:
                self.lines.put(None)

        threading.Thread(target=pump, args=(proc.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=pump, args=(proc.stderr, self.stderr.append), daemon=True).start()
        return proc

    def request(self, spec: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            proc, request_id = self.proc, next(self.ids)
            try:
                proc.stdin.write(json.dumps({"id": request_id, "spec": spec}) + "\n")
                proc.stdin.flush()
            except OSError as exc:
                self._stop()
                raise AotError(f"the AOT helper is gone ({exc}): {self._tail()}") from exc
            deadline = time.monotonic() + self.timeout_s
            while True:
                try:
                    line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.001))
                except queue.Empty:
                    self._stop()
                    raise AotError(f"the AOT helper took over {self.timeout_s:.0f} s; restarted") from None
                if line is None:
                    tail = self._tail()
                    self._stop()
                    raise AotError(f"the AOT helper exited ({proc.poll()}): {tail}")
                try:
                    answer = json.loads(line)
                except ValueError:
                    continue
                if answer.get("id") == request_id:
                    break
            if not answer.get("ok"):
                raise AotError(answer.get("error", "unknown error"))
            return answer["result"]

    def _tail(self) -> str:
        time.sleep(0.05)
        return "".join(self.stderr)[-2000:].strip()

    def _stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def close(self) -> None:
        with self.lock:
            self._stop()


_CLIENT: Client | None = None


def client() -> Client:
    """This process's helper (a forked child gets its own, never its parent's pipes)."""
    global _CLIENT
    if _CLIENT is None or _CLIENT.pid != os.getpid():
        _CLIENT = Client()
    return _CLIENT


def compile_remote(spec: dict[str, Any]) -> dict[str, Any]:
    """Compile one spec (`KernelSpec.compile_json()`) in the helper; raises AotError."""
    return client().request(spec)


def shutdown() -> None:
    if _CLIENT is not None and _CLIENT.pid == os.getpid():
        _CLIENT.close()


atexit.register(shutdown)

if __name__ == "__main__":
    serve()
