"""Ahead-of-time compiles of Triton and Numba kernels for sm_90, in a persistent helper process.

`triton.compile` cannot run where TRITON_INTERPRET=1 has made `triton.jit` the interpreter, nor Numba's
`compile_ptx` where NUMBA_ENABLE_CUDASIM=1 has made `numba.cuda` the simulator, and the suite's worker has both
set on a machine without a GPU. So the worker starts `python -m suite.gpu.aot` once, lazily, with both removed from
its environment (and no visible GPU, so it never creates a context next to a timed kernel), and sends it
kernel specs as line-delimited JSON on stdin; each answer is one JSON line on stdout.

Request:  {"id": 1, "spec": {"backend": "triton" | "numba", "recipe": {...}}}   (see suite.gpu.resources.KernelSpec)
Answer:   {"id": 1, "ok": true, "result": {"kernel", "registers", "spill_store_bytes", "spill_load_bytes",
           "stack_bytes", "smem_bytes", "assembler", "compile_s"}}  or  {"id": 1, "ok": false, "error": "..."}

Triton compiles with `GPUTarget("cuda", 90, 32)`; its PTX goes through Triton's own ptxas for sm_90 with `-v`
and the options Triton's `make_cubin` uses, and `metadata.shared` (the shared memory Triton launches it with)
adds to ptxas's static shared memory. Numba compiles with `compile_ptx(cc=(9, 0))`; its PTX (a newer ISA
than Triton's ptxas may read) goes through nvJitLink with `-Xptxas=-v`, or a ptxas where nvJitLink is missing.
"""

from __future__ import annotations

import atexit
import collections
import importlib
import inspect
import itertools
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from suite.gpu.ptxas import KernelResources, parse_ptxas

ROOT = Path(__file__).resolve().parent.parent
ARCH = (9, 0)
TIMEOUT_S = 600.0
"""Per request; the first also pays the helper's imports (torch and Triton, or Numba)."""
_REMOVED = ("TRITON_INTERPRET", "NUMBA_ENABLE_CUDASIM")

# --- server side ----------------------------------------------------------------------------------------------


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list | tuple) else value


_FACTORIES: dict[str, Any] = {}


def resolve(factory: Any) -> Any:
    """The kernel object a (module, attribute, args) factory reference names."""
    module, attribute, args = factory
    key = json.dumps(factory)
    if key not in _FACTORIES:
        obj: Any = importlib.import_module(module)
        for part in attribute.split("."):
            obj = getattr(obj, part)
        _FACTORIES[key] = obj(*_tuples(args)) if args is not None else obj
    return _FACTORIES[key]


def _ptx_target(ptx: str) -> str:
    found = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.MULTILINE)
    return found.group(1) if found else f"sm_{ARCH[0]}{ARCH[1]}"


def _triton_ptxas(capability: int) -> str:
    from triton.backends.nvidia import compiler

    get = getattr(compiler, "get_ptxas", None)
    if get is None:
        import triton.knobs as knobs

        return knobs.nvidia.ptxas.path
    try:
        tool = get(capability)
    except TypeError:  # Triton versions whose get_ptxas takes no arch
        tool = get()
    return tool[0] if isinstance(tool, tuple) else tool.path  # (path, version) in older Triton


def _run_ptxas(path: str, ptx: str, arch: str, options: list[str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        command = [path, "-v", *options, f"--gpu-name={arch}", str(src), "-o", str(Path(tmp) / "kernel.cubin")]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(path).name} failed ({proc.returncode}): {log.strip()[-2000:]}")
    return log


def _run_nvjitlink(ptx: str, arch: str, options: list[str]) -> str:
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(len(options) + 2, [f"-arch={arch}", "-Xptxas=-v", *options])
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            nvjitlink.get_error_log(handle, log)
            raise RuntimeError(f"nvJitLink failed: {exc}: {log.decode(errors='replace').strip()[-2000:]}") from exc
        size = nvjitlink.get_info_log_size(handle)
        log = bytearray(size)
        nvjitlink.get_info_log(handle, log)
    finally:
        nvjitlink.destroy(handle)
    # nvJitLink's own summary lines follow ptxas's; only ptxas's are in the format suite.gpu.ptxas reads.
    text = log.decode(errors="replace").rstrip("\x00")
    return "\n".join(line for line in text.splitlines() if line.startswith("ptxas"))


def assemble(ptx: str, *, prefer: str, ptxas: str | None = None, ptxas_options: list[str] | None = None,
             maxrregcount: int | None = None) -> tuple[str, str]:  # fmt: skip
    """(ptxas -v log, which assembler) for `ptx` on its own .target; tries `prefer` ("ptxas" or "nvjitlink")
    first and the other where it fails (e.g. a PTX ISA newer than that ptxas)."""
    arch = _ptx_target(ptx)
    regs = [f"--maxrregcount={maxrregcount}"] if maxrregcount else []
    errors = []
    order = ["ptxas", "nvjitlink"] if prefer == "ptxas" else ["nvjitlink", "ptxas"]
    for tool in order:
        try:
            if tool == "ptxas":
                path = ptxas or _triton_ptxas(int(re.match(r"sm_(\d+)", arch).group(1)))
                log = _run_ptxas(path, ptx, arch, [*(ptxas_options or []), *regs])
                return log, f"{Path(path).name} -v"
            log = _run_nvjitlink(ptx, arch, [f"-maxrregcount={maxrregcount}"] if maxrregcount else [])
            return log, "nvJitLink -Xptxas=-v"
        except Exception as exc:
            errors.append(f"{tool}: {type(exc).__name__}: {exc}")
    raise RuntimeError("no assembler could read the PTX: " + " | ".join(errors))


def _entry(log: str, name: str | None) -> KernelResources:
    found = parse_ptxas(log)
    if name in found:
        return found[name]
    entries = [r for r in found.values() if r.registers > 0]
    if len(entries) == 1:
        return entries[0]
    raise RuntimeError(f"ptxas reported no entry {name!r}; found {sorted(found)}")


def _result(r: KernelResources, extra_smem: int, assembler: str, started: float) -> dict[str, Any]:
    return {"kernel": r.name, "registers": r.registers, "spill_store_bytes": r.spill_store_bytes,
            "spill_load_bytes": r.spill_load_bytes, "stack_bytes": r.stack_bytes,
            "smem_bytes": r.smem_bytes + extra_smem, "assembler": assembler,
            "compile_s": round(time.perf_counter() - started, 3)}  # fmt: skip


def compile_triton(recipe: dict[str, Any]) -> dict[str, Any]:
    import triton
    from triton.backends.compiler import GPUTarget

    started = time.perf_counter()
    fn = resolve(recipe["factory"])
    signature = {name: kind for name, kind in recipe["signature"]}
    constexprs = {name: _tuples(value) for name, value in recipe["constexprs"]}
    attrs = {(i,): [["tt.divisibility", 16]] for i in recipe["divisible"]}
    options = {name: _tuples(value) for name, value in recipe["options"]}
    source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    kernel = triton.compile(source, target=GPUTarget("cuda", ARCH[0] * 10 + ARCH[1], 32), options=options)
    meta = kernel.metadata
    # What Triton's make_cubin passes to ptxas, so the registers are those of the cubin Triton built.
    ptxas_options = [] if getattr(meta, "enable_fp_fusion", True) else ["--fmad=false"]
    ptxas_options += str(getattr(meta, "ptx_options", "") or "").split()
    try:
        from triton.backends.nvidia.compiler import CUDABackend

        if "--regAllocOptLevel=2" in inspect.getsource(CUDABackend.make_cubin):
            ptxas_options.append("--regAllocOptLevel=2")
    except (ImportError, OSError, TypeError):
        pass
    log, assembler = assemble(kernel.asm["ptx"], prefer="ptxas", ptxas_options=ptxas_options)
    resources = _entry(log, getattr(meta, "name", None))
    return _result(resources, int(getattr(meta, "shared", 0) or 0), assembler, started)


_NUMBA_OPTIONS = ("debug", "lineinfo", "fastmath", "opt", "forceinline", "launch_bounds")


def compile_numba(recipe: dict[str, Any]) -> dict[str, Any]:
    from backends.numba.gpu.compile import compile_ptx

    started = time.perf_counter()
    obj = resolve(recipe["factory"])
    pyfunc = getattr(obj, "py_func", obj)
    target_options = dict(getattr(obj, "targetoptions", None) or {})
    options = {k: target_options[k] for k in _NUMBA_OPTIONS if k in target_options}
    options.update({name: _tuples(value) for name, value in recipe["options"]})
    maxrregcount = options.pop("max_registers", None) or target_options.get("max_registers")
    ptx = compile_ptx(pyfunc, f"void({', '.join(recipe['arg_types'])})", ARCH, **options)
    entry = re.search(r"\.entry\s+([\w$.]+)", ptx)
    log, assembler = assemble(ptx, prefer="nvjitlink", maxrregcount=maxrregcount)
    resources = _entry(log, entry.group(1) if entry else None)
    declared = 0 if resources.smem_bytes else ptx_shared_bytes(ptx)
    return _result(resources, declared, assembler, started)


_SHARED = re.compile(r"\.shared\s+(?:\.align\s+\d+\s+)?\.[bsuf](\d+)\s+[\w$.]+\[(\d+)\]")


def ptx_shared_bytes(ptx: str) -> int:
    """Static shared memory a PTX module declares: Numba puts its `cuda.shared.array`s at module scope,
    where nvJitLink's verbose log does not count them against the kernel."""
    return sum(int(bits) // 8 * int(count) for bits, count in _SHARED.findall(ptx))


def compile_spec(spec: dict[str, Any]) -> dict[str, Any]:
    backend = spec["backend"]
    if backend == "triton":
        return compile_triton(spec["recipe"])
    if backend == "numba":
        return compile_numba(spec["recipe"])
    raise ValueError(f"the AOT helper compiles triton and numba kernels, not {backend}")


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
        env = {k: v for k, v in os.environ.items() if k not in _REMOVED}
        env["CUDA_VISIBLE_DEVICES"] = ""  # compiles need no GPU; never open a context beside timed kernels
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        proc = subprocess.Popen(
            [sys.executable, "-m", "suite.gpu.aot"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, text=True, bufsize=1, start_new_session=True,
        )  # fmt: skip
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
    """Compile one Triton or Numba spec (`KernelSpec.compile_json()`) in the helper; raises AotError."""
    return client().request(spec)


def shutdown() -> None:
    if _CLIENT is not None and _CLIENT.pid == os.getpid():
        _CLIENT.close()


atexit.register(shutdown)

if __name__ == "__main__":
    serve()
