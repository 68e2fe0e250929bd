"""Static resources of every CUDA kernel a variant launches, compiled for sm_90 with or without a GPU.

Fusing grows a kernel's live state, and registers, spills and shared memory decide how many warps an SM keeps
resident. So every CUDA kernel an entry builds is recorded as a `KernelSpec`: enough for another process to
rebuild and compile it (Triton and Numba kernels by a *factory reference*, CuPy kernels by their CUDA source).
`analyse` compiles each for sm_90 — CuPy through NVRTC in this process, Triton (`GPUTarget("cuda", 90, 32)`)
and Numba (`compile_ptx(cc=(9, 0))`) in the persistent `suite.gpu.aot` process, where neither the Triton
interpreter nor the Numba simulator is switched on — reads registers, spills, stack and static shared memory
from ptxas's `-v` log, and computes the theoretical occupancy from the sm_90 limits. Compilations are cached in
memory and on disk (keyed by the kernel's recipe, the source files it comes from and the toolchain versions),
so a sweep pays each once. On a GPU the loaded kernels' attributes are read too (`loaded` in the report).

Backends record while an entry builds (`suite.run.execute` wraps the entry call in `recording()`):

    record_triton(kernel, args, constexprs, num_warps)   # at warmup / first launch, with the launch's args
    record_numba(factory, arg_types, threads)            # factory = (module, attribute, args)
    backends.cupy.build.build(source, name, options, threads=block)
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from suite.gpu.occupancy import SM90, occupancy

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = 2
"""Bump when what a cached compile result holds changes."""
BACKENDS = ("triton", "cupy", "numba")
Factory = tuple[str, str, "tuple[Any, ...] | None"]
"""(module, attribute, args): `getattr(import_module(module), attribute)`, called with `args` unless None."""


class ResourceError(RuntimeError):
    """A kernel's resources could not be obtained; the message says why."""


def _freeze(value: Any) -> Any:
    """JSON-able values with lists as tuples, so a recipe is hashable (and a JSON round trip gives it back)."""
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        raise TypeError("recipes hold (key, value) pairs, not mappings")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"{type(value).__name__} is not JSON-able: {value!r}")


def _pairs(mapping: Mapping[str, Any] | Sequence[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
    items = mapping.items() if isinstance(mapping, Mapping) else mapping
    return tuple((str(k), _freeze(v)) for k, v in items)


@dataclass(frozen=True)
class KernelSpec:
    """One CUDA kernel as launched: enough to rebuild and compile it in another process, and its block size.

    `recipe` is backend-specific, a tuple of (field, value) pairs of JSON-able values:
      triton: factory, signature ((arg, "*fp32" | "i32" | ... | "constexpr"), ... in parameter order),
              constexprs ((arg, value), ...), divisible (indices of args divisible by 16), options
              ((name, value), ...: num_warps, num_stages, ...).
      numba:  factory, arg_types ("float32[::1]", ...), options (compile_ptx keywords; max_registers).
      cupy:   source, kernel (the extern "C" name), options (NVRTC options besides -arch and -Xptxas=-v).
    `live` is the loaded kernel on a GPU (a Triton CompiledKernel, a CuPy RawKernel, a Numba compiled
    kernel), read for its attributes; it takes no part in equality or the cache key.
    """

    backend: str
    name: str
    threads: int
    recipe: tuple[tuple[str, Any], ...]
    dynamic_smem: int = 0
    """Dynamic shared memory per block the launch adds to the kernel's own."""
    live: Any = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {self.backend!r}")
        if int(self.threads) <= 0:
            raise ValueError(f"threads per block must be positive, not {self.threads}")

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.recipe).get(name, default)

    def compile_json(self) -> dict[str, Any]:
        """What a compile depends on (not the display name, block size or dynamic shared memory)."""
        return {"backend": self.backend, "recipe": dict(self.recipe)}

    def to_json(self) -> dict[str, Any]:
        return {**self.compile_json(), "name": self.name, "threads": self.threads, "dynamic_smem": self.dynamic_smem}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelSpec:
        recipe = tuple((k, _freeze(v)) for k, v in data["recipe"].items())
        return cls(data["backend"], data["name"], int(data["threads"]), recipe, int(data.get("dynamic_smem", 0)))

    def cache_key(self) -> str:
        """Stable across processes and runs: the compile recipe plus the source files a factory comes from."""
        payload = self.compile_json()
        factory = self.get("factory")
        if factory is not None:
            payload["sources"] = _module_fingerprint(factory[0])
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Unrecorded:
    """A kernel whose spec could not be derived; recorded so the report says why instead of failing the row."""

    backend: str
    name: str
    reason: str


# --- recording -------------------------------------------------------------------------------------------

_ACTIVE: ContextVar[list | None] = ContextVar("fusebench_resource_recording", default=None)


@contextlib.contextmanager
def recording(into: list | None = None) -> Iterator[list]:
    """Collect the specs recorded by the entries built inside (into `into` when given); nests."""
    specs = [] if into is None else into
    token = _ACTIVE.set(specs)
    try:
        yield specs
    finally:
        _ACTIVE.reset(token)


def active() -> bool:
    return _ACTIVE.get() is not None


def record(spec: KernelSpec | Unrecorded) -> None:
    """Add a spec to the innermost `recording()`; a no-op outside one."""
    specs = _ACTIVE.get()
    if specs is not None:
        specs.append(spec)


def _guarded(backend: str, name: str, build: Any) -> None:
    """Record `build()`; a spec that cannot be derived must never fail the entry that records it."""
    try:
        record(build())
    except Exception as exc:
        record(Unrecorded(backend, name, f"{type(exc).__name__}: {exc}"))


def _factory(factory: Sequence[Any]) -> Factory:
    module, attribute, *rest = factory
    args = rest[0] if rest else None
    return (str(module), str(attribute), None if args is None else _freeze(tuple(args)))


# Triton ------------------------------------------------------------------------------------------------------

_TRITON_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8",
                  "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
                  "uint32": "u32", "uint64": "u64", "bool": "i1", "float8_e4m3fn": "fp8e4nv",
                  "float8_e5m2": "fp8e5"}  # fmt: skip


def _triton_arg(value: Any) -> tuple[str, bool]:
    """(Triton type, divisible by 16) of a launch argument, as Triton's launcher specialises it."""
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in _TRITON_DTYPES:
            raise TypeError(f"no Triton pointer type for a tensor of {dtype}")
        return f"*{_TRITON_DTYPES[dtype]}", value.data_ptr() % 16 == 0
    if isinstance(value, bool):
        return "u1", False
    if isinstance(value, int):
        kind = "i32" if -(2**31) <= value < 2**31 else "i64" if -(2**63) <= value < 2**63 else "u64"
        return kind, value % 16 == 0
    if isinstance(value, float):
        return "fp32", False
    raise TypeError(f"cannot derive a Triton type for {type(value).__name__}")


def _triton_spec(kernel: Any, args: Any, constexprs: Mapping[str, Any], num_warps: int,
                 factory: Sequence[Any] | None, name: str | None, options: Mapping[str, Any]) -> KernelSpec:  # fmt: skip
    import inspect

    kernel = _jit_function(kernel)  # an autotuned or heuristics-wrapped kernel: the jitted function inside
    fn = kernel.fn
    params = inspect.signature(fn).parameters
    bound = inspect.signature(fn).bind_partial(*args, **constexprs) if not isinstance(args, Mapping) else None
    values = dict(bound.arguments) if bound is not None else {**args, **constexprs}
    if factory is None:
        factory = (fn.__module__, _module_path(kernel, fn), None)
    no_spec = {_param_name(params, p) for p in getattr(kernel, "do_not_specialize", ()) or ()}
    signature, consts, divisible = [], [], []
    for i, (pname, param) in enumerate(params.items()):
        if pname in values:
            value = values[pname]
        elif param.default is not inspect.Parameter.empty:
            value = param.default
        else:
            raise TypeError(f"{fn.__name__}: no value for {pname}")
        if "constexpr" in str(param.annotation) or pname in constexprs or value is None:
            signature.append((pname, "constexpr"))
            consts.append((pname, getattr(value, "value", value)))
        elif isinstance(value, int) and not isinstance(value, bool) and value == 1 and pname not in no_spec:
            signature.append((pname, "constexpr"))  # Triton specialises an int argument equal to 1
            consts.append((pname, 1))
        else:
            kind, div16 = _triton_arg(value)
            signature.append((pname, kind))
            if div16 and pname not in no_spec:
                divisible.append(i)
    opts = {"num_warps": int(num_warps), **options}
    shown = ", ".join(f"{k}={v}" for k, v in consts)
    recipe = (("factory", _factory(factory)), ("signature", _pairs(signature)), ("constexprs", _pairs(consts)),
              ("divisible", tuple(divisible)), ("options", _pairs(sorted(opts.items()))))  # fmt: skip
    return KernelSpec("triton", name or f"{fn.__name__}[{shown}]", int(num_warps) * 32, recipe)


def _jit_function(kernel: Any) -> Any:
    import inspect

    while hasattr(kernel, "fn") and not inspect.isfunction(kernel.fn):
        kernel = kernel.fn
    if not inspect.isfunction(getattr(kernel, "fn", None)):
        raise TypeError(f"{kernel!r} is not a Triton kernel (@triton.jit)")
    return kernel


def _module_path(kernel: Any, fn: Any) -> str:
    """The attribute path of `kernel` in its module: its name, or "name.fn[.fn]" under autotune/heuristics."""
    path, obj = fn.__name__, getattr(sys.modules.get(fn.__module__), fn.__name__, None)
    while obj is not None and obj is not kernel and hasattr(obj, "fn"):
        path, obj = f"{path}.fn", obj.fn
    if obj is not kernel:
        raise ValueError(f"{fn.__name__} is not a module-level kernel of {fn.__module__}; pass factory=")
    return path


def _param_name(params: Mapping[str, Any], p: Any) -> str:
    return list(params)[p] if isinstance(p, int) else str(p)


def record_triton(kernel: Any, args: Sequence[Any] | Mapping[str, Any], constexprs: Mapping[str, Any],
                  num_warps: int, factory: Sequence[Any] | None = None, *, compiled: Any = None,
                  name: str | None = None, **options: Any) -> None:  # fmt: skip
    """Record a Triton kernel launched with `args` (positional, or by name) and `constexprs`.

    The signature is derived as Triton's launcher does it: tensors -> pointer by dtype (divisible by 16 when
    aligned), ints -> i32 or i64 by magnitude (an int equal to 1 becomes a constexpr), floats -> fp32.
    `kernel` must be a module-level `@triton.jit` function unless `factory` = (module, attribute, args)
    rebuilds it. `compiled` is what `kernel.warmup(...)` returned (a CompiledKernel on a GPU; None in the
    interpreter); `options` are further compile options (num_stages, maxnreg, ...).
    """
    if not active():
        return
    fn_name = getattr(getattr(kernel, "fn", kernel), "__name__", "triton kernel")

    def build() -> KernelSpec:
        spec = _triton_spec(kernel, args, constexprs, num_warps, factory, name, options)
        live = compiled if compiled is not None and hasattr(compiled, "metadata") else None
        return KernelSpec(spec.backend, spec.name, spec.threads, spec.recipe, live=live)

    _guarded("triton", fn_name, build)


# Numba -------------------------------------------------------------------------------------------------------


def numba_arg_type(value: Any) -> str:
    """A Numba signature type for a launch argument: arrays by dtype, rank and layout; Python scalars."""
    if isinstance(value, str):
        return value
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        ndim = len(value.shape)
        if ndim == 0:
            return str(value.dtype)
        flags = getattr(value, "flags", None)
        contiguous = True
        if flags is not None:
            with contextlib.suppress(Exception):
                contiguous = bool(flags["C_CONTIGUOUS"])
        dims = [":"] * ndim
        if contiguous:
            dims[-1] = "::1"
        return f"{value.dtype}[{', '.join(dims)}]"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    raise TypeError(f"cannot derive a Numba type for {type(value).__name__}")


def record_numba(factory: Sequence[Any], arg_types: Sequence[Any], threads: int, *, name: str | None = None,
                 compiled: Any = None, dynamic_smem: int = 0, **options: Any) -> None:  # fmt: skip
    """Record a Numba CUDA kernel: `factory` = (module, attribute, args) gives its Python function or
    `@cuda.jit` dispatcher; `arg_types` are Numba type strings ("float32[::1]") or the launch's arrays and
    scalars. `compiled` is the dispatcher's compiled kernel for these types on a GPU (`dispatcher.compile(sig)`),
    `options` go to `compile_ptx` (fastmath, lineinfo, ...; max_registers to ptxas)."""
    if not active():
        return
    f = _factory(factory)
    shown = name or (f"{f[1]}{f[2]!r}" if f[2] is not None else f[1])

    def build() -> KernelSpec:
        types = tuple(numba_arg_type(a) for a in arg_types)
        recipe = (("factory", f), ("arg_types", types), ("options", _pairs(sorted(options.items()))))
        return KernelSpec("numba", shown, int(threads), recipe, int(dynamic_smem), live=compiled)

    _guarded("numba", shown, build)


# CuPy --------------------------------------------------------------------------------------------------------


def record_cupy(source: str, kernel: str, options: Sequence[str], threads: int, *, name: str | None = None,
                live: Any = None, dynamic_smem: int = 0) -> None:  # fmt: skip
    """Record a CuPy RawKernel (`backends.cupy.build.build(..., threads=...)` calls this)."""
    if not active():
        return

    def build() -> KernelSpec:
        recipe = (("source", source), ("kernel", kernel), ("options", tuple(str(o) for o in options)))
        live_kernel = live if live is not None and hasattr(live, "attributes") else None
        return KernelSpec("cupy", name or kernel, int(threads), recipe, int(dynamic_smem), live=live_kernel)

    _guarded("cupy", name or kernel, build)


# --- source fingerprints -------------------------------------------------------------------------------------


def _origin(module: str) -> str | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return None
    origin = getattr(spec, "origin", None) if spec else None
    return origin if origin and origin.endswith(".py") else None


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                with contextlib.suppress(ImportError, ValueError):
                    base = importlib.util.resolve_name("." * node.level + base, package)
            if base:
                yield base
                yield from (f"{base}.{alias.name}" for alias in node.names)


@functools.cache
def _module_fingerprint(module: str) -> str:
    """A hash of the source of `module` and of every module it imports, transitively, from the same tree
    (the repository, or the factory module's own top-level package): editing any of them recompiles.
    The harness (`suite`) is left out: kernels are not built from it, and editing it must not recompile."""
    origin = _origin(module)
    if origin is None:
        return "unknown"
    top = Path(origin).resolve().parents[module.count(".")]
    roots = (ROOT, top)
    seen: dict[str, str] = {}
    stack = [module]
    while stack:
        name = stack.pop()
        if name.split(".")[0] == "suite":
            continue
        top_origin = _origin(name.split(".")[0])
        if top_origin is None or not any(Path(top_origin).resolve().is_relative_to(r) for r in roots):
            continue
        path = _origin(name)
        if path is None or path in seen:
            continue
        try:
            text = Path(path).read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (OSError, SyntaxError, ValueError):
            continue
        seen[path] = hashlib.sha256(text.encode()).hexdigest()
        stack.extend(_imports(tree, name, path.endswith("__init__.py")))
    digest = hashlib.sha256()
    for path in sorted(seen):
        digest.update(f"{Path(path).resolve().relative_to(top) if Path(path).resolve().is_relative_to(top) else path}"
                      f":{seen[path]}\n".encode())  # fmt: skip
    return digest.hexdigest()[:16]


# --- caches ---------------------------------------------------------------------------------------------------

_TOOLCHAIN = ("triton", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "cupy", "nvidia-cuda-nvrtc",
              "nvidia-nvjitlink", "cuda-bindings")  # fmt: skip


@functools.cache
def toolchain() -> dict[str, str]:
    found = {"python": sys.version.split()[0], "schema": str(SCHEMA)}
    for name in _TOOLCHAIN:
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    for var in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"):
        if os.environ.get(var):
            found[var] = os.environ[var]
    return found


def cache_dir() -> Path:
    """$FUSEBENCH_CACHE_DIR, else $XDG_CACHE_HOME/fusebench, else ~/.cache/fusebench."""
    if os.environ.get("FUSEBENCH_CACHE_DIR"):
        return Path(os.environ["FUSEBENCH_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fusebench"


def cache_path() -> Path:
    tag = hashlib.sha256(json.dumps(toolchain(), sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir() / f"resources-{tag}.json"


_MEMORY: dict[str, dict[str, Any]] = {}
"""cache key -> compile result, or {"error": ...} for a compile that failed in this process."""
_DISK: dict[Path, dict[str, Any]] = {}
STATS = {"memory": 0, "disk": 0, "compiled": 0}


def _disk_entries(path: Path) -> dict[str, Any]:
    if path not in _DISK:
        try:
            _DISK[path] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            _DISK[path] = {}
    return _DISK[path]


def _disk_put(path: Path, key: str, result: dict[str, Any]) -> None:
    """Merge into the file (other workers may have added entries) and replace it atomically."""
    entries = _disk_entries(path)
    entries[key] = result
    with contextlib.suppress(OSError, ValueError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError, ValueError):
            entries.update({k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if k not in entries})
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(entries, f, sort_keys=True)
        os.replace(tmp, path)


def clear_memory_cache() -> None:
    """Forget this process's compile results (the disk cache stays)."""
    _MEMORY.clear()
    _DISK.clear()


def compiled_resources(spec: KernelSpec) -> dict[str, Any]:
    """The sm_90 compile of `spec`: kernel, registers, spill_store_bytes, spill_load_bytes, stack_bytes,
    smem_bytes (static, plus Triton's own launch-time shared memory), assembler. Cached; raises ResourceError."""
    key = spec.cache_key()
    if key in _MEMORY:
        STATS["memory"] += 1
        result = _MEMORY[key]
    else:
        path = cache_path()
        result = _disk_entries(path).get(key)
        if result is not None:
            STATS["disk"] += 1
        else:
            STATS["compiled"] += 1
            try:
                result = _compile(spec)
            except Exception as exc:
                result = {"error": f"{type(exc).__name__}: {exc}"}
            else:
                _disk_put(path, key, result)
        _MEMORY[key] = result
    if "error" in result:
        raise ResourceError(result["error"])
    return result


def _compile(spec: KernelSpec) -> dict[str, Any]:
    if spec.backend == "cupy":
        from backends.cupy.build import compile_sm90

        kernel = compile_sm90(spec.get("source"), spec.get("kernel"), tuple(spec.get("options", ())))
        r = kernel.resources
        return {"kernel": r.name, "registers": r.registers, "spill_store_bytes": r.spill_store_bytes,
                "spill_load_bytes": r.spill_load_bytes, "stack_bytes": r.stack_bytes, "smem_bytes": r.smem_bytes,
                "assembler": "NVRTC -Xptxas=-v"}  # fmt: skip
    from suite.gpu import aot

    return aot.compile_remote(spec.compile_json())


# --- analysis -------------------------------------------------------------------------------------------------


def loaded_attributes(spec: KernelSpec) -> dict[str, Any]:
    """Attributes of the kernel as loaded on this machine's GPU (only where `spec.live` is set, i.e. native).

    Each library's API: Triton CompiledKernel n_regs / n_spills (local memory in 4-byte words); CuPy
    RawKernel.attributes; Numba's compiled kernel regs_per_thread / local_mem_per_thread /
    shared_mem_per_block. Seen on an H200 for the matmul kernels of all three (results/h200_matmul: the loaded
    registers equal the sm_90 build's, bar one Numba kernel built by a different ptxas); the mapping is
    tested on stand-ins (tests/test_resources_live.py).
    """
    obj = spec.live
    if spec.backend == "triton":
        init = getattr(obj, "_init_handles", None)
        if callable(init):
            init()
        return {"regs": int(obj.n_regs), "local_bytes": int(obj.n_spills) * 4,
                "smem_bytes": int(obj.metadata.shared)}  # fmt: skip
    if spec.backend == "cupy":
        a = obj.attributes
        return {"regs": int(a["num_regs"]), "local_bytes": int(a["local_size_bytes"]),
                "smem_bytes": int(a["shared_size_bytes"]), "max_threads_per_block": int(a["max_threads_per_block"])}  # fmt: skip
    return {"regs": int(obj.regs_per_thread), "local_bytes": int(obj.local_mem_per_thread),
            "smem_bytes": int(obj.shared_mem_per_block), "max_threads_per_block": int(obj.max_threads_per_block)}  # fmt: skip


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def _report(spec: KernelSpec | Unrecorded, launches: int) -> dict[str, Any]:
    if isinstance(spec, Unrecorded):
        return {"name": spec.name, "backend": spec.backend, "launches": launches,
                "error": f"not recorded: {spec.reason}"}  # fmt: skip
    out: dict[str, Any] = {"name": spec.name, "backend": spec.backend, "threads": spec.threads, "launches": launches}
    static = live = None
    try:
        static = compiled_resources(spec)
    except Exception as exc:
        out["error"] = _first_line(exc)
    if spec.live is not None:
        try:
            live = loaded_attributes(spec)
            out["loaded"] = live
        except Exception as exc:
            out["loaded_error"] = _first_line(exc)
    if static is not None:
        out.update(regs=static["registers"], spill_store_bytes=static["spill_store_bytes"],
                   spill_load_bytes=static["spill_load_bytes"], local_bytes=static["stack_bytes"],
                   smem_bytes=static["smem_bytes"] + spec.dynamic_smem, source=f"sm_90 ({static['assembler']})")  # fmt: skip
    elif live is not None:
        out.update(regs=live["regs"], spill_store_bytes=None, spill_load_bytes=None, local_bytes=live["local_bytes"],
                   smem_bytes=live["smem_bytes"] + spec.dynamic_smem, source="loaded kernel")  # fmt: skip
    if out.get("regs") is not None:
        occ = occupancy(spec.threads, out["regs"], out["smem_bytes"], SM90)
        out.update(occupancy=round(occ.fraction, 4), limiter=occ.limiter, blocks_per_sm=occ.blocks_per_sm)
    return out


def analyse(specs: Sequence[KernelSpec | Unrecorded]) -> list[dict[str, Any]]:
    """One report per distinct kernel (in launch order, with how many times it was recorded): name, backend,
    threads, regs, spill_store_bytes, spill_load_bytes, local_bytes, smem_bytes, occupancy (fraction of the
    sm_90 maximum), limiter; `error` where its compile failed, `loaded` where a GPU ran it."""
    counts: dict[KernelSpec | Unrecorded, int] = {}
    first: dict[KernelSpec | Unrecorded, KernelSpec | Unrecorded] = {}
    for spec in specs:
        counts[spec] = counts.get(spec, 0) + 1
        first.setdefault(spec, spec)  # the first recorded carries the live handle
    return [_report(first[s], n) for s, n in counts.items()]


def for_row(specs: Sequence[KernelSpec | Unrecorded]) -> dict[str, Any]:
    """The variant's worst kernel for results.csv: most registers, most spill bytes, most shared memory and
    the lowest occupancy (each may come from a different kernel), plus every kernel's report. A value is
    None where no kernel has it; `errors` lists the kernels without numbers."""
    kernels = analyse(specs)

    def worst(key: str, pick: Any, values: list[Any] | None = None) -> Any:
        vals = values if values is not None else [k[key] for k in kernels if k.get(key) is not None]
        return pick(vals) if vals else None

    spills = [k["spill_store_bytes"] + k["spill_load_bytes"] for k in kernels
              if k.get("spill_store_bytes") is not None and k.get("spill_load_bytes") is not None]  # fmt: skip
    out = {"regs": worst("regs", max), "spill_bytes": worst("", max, spills), "smem_bytes": worst("smem_bytes", max),
           "occupancy": worst("occupancy", min), "kernels": kernels}  # fmt: skip
    errors = [f"{k['name']}: {k['error']}" for k in kernels if "error" in k]
    if errors:
        out["errors"] = errors
    return out


def annotate(row: Any, device: str, specs: Sequence[KernelSpec | Unrecorded], built_for: str | None = None) -> None:
    """Fill a results row's regs / spill_bytes / smem_bytes / occupancy and extra["kernels"]; on a CPU target,
    or where nothing could be analysed, extra["resources"] says why. Never raises.

    The kernels are those built for the row's own params; `built_for` (params as JSON) names the smaller
    emulation slice they were built for instead, where the case's own could not be built, and is kept in
    extra["resources_params"]."""
    try:
        if device != "cuda":
            row.extra["resources"] = "not applicable: CPU target"
            return
        if not specs:
            row.extra["resources"] = "no kernels recorded (the entry did not build, or does not record its kernels)"
            return
        summary = for_row(specs)
        row.regs, row.spill_bytes = summary["regs"], summary["spill_bytes"]
        row.smem_bytes, row.occupancy = summary["smem_bytes"], summary["occupancy"]
        row.extra["kernels"] = summary["kernels"]
        if built_for:
            row.extra["resources_params"] = built_for
        if summary.get("errors"):
            row.extra["resources"] = "; ".join(summary["errors"])[:1000]
    except Exception as exc:  # resource analysis must never fail a row
        row.extra["resources"] = f"resource analysis failed: {_first_line(exc)}"
