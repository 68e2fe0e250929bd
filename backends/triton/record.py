"""Recording a Triton kernel for the resource report: the launch's arguments give the signature Triton compiles.

The report compiles each kernel again for sm_90 in another process (`Triton.compile`), so the recipe must say
exactly what Triton's launcher specialised: each argument's type (a tensor's dtype as a pointer type, an int
as i32 or i64 by magnitude), which are divisible by 16, which are constexprs (an int equal to 1 is one), and
the compile options. Kernel modules call `record_triton` at warmup, with the arguments of the launch.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from suite.core.kernelspec import KernelSpec, active, guarded, pairs
from suite.core.kernelspec import factory as recorded_factory

_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8",
                  "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
                  "uint32": "u32", "uint64": "u64", "bool": "i1", "float8_e4m3fn": "fp8e4nv",
                  "float8_e5m2": "fp8e5"}  # fmt: skip


def _arg_type(value: Any) -> tuple[str, bool]:
    """(Triton type, divisible by 16) of a launch argument, as Triton's launcher specialises it."""
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in _DTYPES:
            raise TypeError(f"no Triton pointer type for a tensor of {dtype}")
        return f"*{_DTYPES[dtype]}", value.data_ptr() % 16 == 0
    if isinstance(value, bool):
        return "u1", False
    if isinstance(value, int):
        kind = "i32" if -(2**31) <= value < 2**31 else "i64" if -(2**63) <= value < 2**63 else "u64"
        return kind, value % 16 == 0
    if isinstance(value, float):
        return "fp32", False
    raise TypeError(f"cannot derive a Triton type for {type(value).__name__}")


def _spec(
    kernel: Any,
    args: Any,
    constexprs: Mapping[str, Any],
    num_warps: int,
    factory: Sequence[Any] | None,
    name: str | None,
    options: Mapping[str, Any],
) -> KernelSpec:
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
            kind, div16 = _arg_type(value)
            signature.append((pname, kind))
            if div16 and pname not in no_spec:
                divisible.append(i)
    opts = {"num_warps": int(num_warps), **options}
    shown = ", ".join(f"{k}={v}" for k, v in consts)
    recipe = (
        ("factory", recorded_factory(factory)),
        ("signature", pairs(signature)),
        ("constexprs", pairs(consts)),
        ("divisible", tuple(divisible)),
        ("options", pairs(sorted(opts.items()))),
    )
    return KernelSpec("triton", name or f"{fn.__name__}[{shown}]", int(num_warps) * 32, recipe)


def _jit_function(kernel: Any) -> Any:
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


def record_triton(
    kernel: Any,
    args: Sequence[Any] | Mapping[str, Any],
    constexprs: Mapping[str, Any],
    num_warps: int,
    factory: Sequence[Any] | None = None,
    *,
    compiled: Any = None,
    name: str | None = None,
    **options: Any,
) -> None:
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
        spec = _spec(kernel, args, constexprs, num_warps, factory, name, options)
        live = compiled if compiled is not None and hasattr(compiled, "metadata") else None
        return KernelSpec(spec.backend, spec.name, spec.threads, spec.recipe, live=live)

    guarded("triton", fn_name, build)
