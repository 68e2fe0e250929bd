"""Matmul on CUDA with Numba: unblocked (one thread per output, operands from device memory) against tiled
(register tiles fed from shared memory), and the bias+gelu epilogue fused or as its own kernel.

`unblocked` gives each thread one output and walks K reading A's row and B's column from global memory:
nothing is staged on chip on purpose (the hardware caches still catch what they can). `tiled` gives each block
a BM×BN output tile and each of its 16×16 threads a TM×TN register tile, TM = BM/16 and TN = BN/16 (at least
1: 8×8 for 128×128, 4×4 for 64×64). K is walked in BK slices: each thread fetches its share of the next A and
B slices into registers (converting float16 to float32 once per element) while the block multiplies the
current slice from shared memory, then stores them into shared memory for the next step. Two shared-memory
stages (one barrier a slice) where both fit Numba's 48 KiB of static shared memory, one stage otherwise (a
second barrier keeps the stores behind the last reads). Every staged element is used BN (resp. BM) times.
Thread (ty, tx) owns rows ty + x·BM/TM and columns tx + y·BN/TN, so a warp reads consecutive shared-memory
words of B (A's are a broadcast); A is stored transposed with a padded row (BM+1 words) so the block's stores
into it do not collide in one bank. Numba has no unroll pragma and keeps a `cuda.local.array` in local memory
once its loops stay rolled, so the kernel is generated as Python source (`tiled_text`) with the register
tile, the fetched elements and their loops written out as scalars; only the loops over slices and over k
within a slice remain. Shared arrays need sizes known when the kernel compiles, so one kernel is generated
and cached per (tile, epilogue).
"""

from __future__ import annotations

import functools
import linecache
import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cuda.launch import device
from backends.numba.ops import gelu
from backends.numba.record import record_numba
from suite.core.registry import Launch, Launcher, kernel
from suite.core.targets import NotRunnable
from suite.kit.launch import cdiv
from suite.kit.launch_shape import block_chosen_by, flat_threads, launch_notes

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

DTYPES = ("float32", "float16")
SMEM_LIMIT = 48 * 1024
"""Static shared memory per block; more needs the dynamic opt-in, which Numba does not expose."""
MAX_REGISTER_TILE = 64
"""Accumulators per thread beyond which the register tile would spill."""


def thread_tile(bm: int, bn: int) -> tuple[int, int]:
    """(TM, TN): each thread's register tile, so that a block has at most 16×16 threads."""
    return max(1, bm // 16), max(1, bn // 16)


def smem_bytes(bm: int, bn: int, bk: int, stages: int = 1) -> int:
    return stages * 4 * (bk * (bm + 1) + bk * bn)


def stages(bm: int, bn: int, bk: int) -> int:
    """Shared-memory stages of the tiled kernel: two where they fit in static shared memory, else one."""
    return 2 if smem_bytes(bm, bn, bk, 2) <= SMEM_LIMIT else 1


def refusal(tile: list[int]) -> str:
    """Why a tile cannot run on this kernel ("" when it can)."""
    bm, bn, bk = tile
    tm, tn = thread_tile(bm, bn)
    if smem_bytes(bm, bn, bk) > SMEM_LIMIT:
        return f"tile {tile} needs {smem_bytes(bm, bn, bk)} bytes of shared memory; static shared memory is 48 KiB"
    if tm * tn > MAX_REGISTER_TILE:
        return f"tile {tile} gives each thread {tm}×{tn} accumulators (more than {MAX_REGISTER_TILE})"
    return ""


def launch_config(m: int, n: int, tile: list[int]) -> dict[str, Any]:
    """What the tiled kernel is launched with for an M×N output (the row's `extra` records it)."""
    bm, bn, bk = tile
    tm, tn = thread_tile(bm, bn)
    nstages = stages(bm, bn, bk)
    return {
        "block_tile": [bm, bn, bk],
        "thread_tile": [tm, tn],
        "threads": [bn // tn, bm // tm],
        "threads_per_block": (bn // tn) * (bm // tm),
        "grid": [cdiv(n, bn), cdiv(m, bm)],
        "smem_stages": nstages,
        "static_smem_bytes": smem_bytes(bm, bn, bk, nstages),
    }


def unblocked_source() -> Callable[..., None]:
    def unblocked(a, b, c):  # type: ignore[no-untyped-def]
        m, k = a.shape
        n = b.shape[1]
        idx = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x  # consecutive threads: consecutive j
        if idx < m * n:
            i, j = idx // n, idx % n
            acc = np.float32(0.0)
            for kk in range(k):
                acc += np.float32(a[i, kk]) * np.float32(b[kk, j])
            c[i, j] = acc

    return unblocked


def tiled_text(bm: int, bn: int, bk: int, epilogue: bool) -> str:
    """Python source of the tiled kernel for one tile, its per-thread loops written out (see the module doc).

    Fetch l of A is row tid // BK + l·(THREADS/BK) and k tid % BK of the slice (consecutive threads read
    consecutive k of a row); fetch l of B is k-row tid // BN + l·(THREADS/BN), column tid % BN. A block has
    16×16 threads and every tile side is a power of two of at least 16, so each thread fetches the same whole
    number of elements, BM·BK/THREADS of A and BK·BN/THREADS of B."""
    tm, tn = thread_tile(bm, bn)
    ry, rx = bm // tm, bn // tn
    threads = ry * rx
    nstages = stages(bm, bn, bk)
    a_loads, b_loads = bm * bk // threads, bk * bn // threads
    a_step, b_step = threads // bk, threads // bn
    zero = "np.float32(0.0)"
    lines = [
        "def tiled(a, b, bias, c):",
        "    m, k = a.shape",
        "    n = b.shape[1]",
        f"    sa = cuda.shared.array(({nstages}, {bk}, {bm + 1}), np.float32)  # A's slice transposed, rows padded",
        f"    sb = cuda.shared.array(({nstages}, {bk}, {bn}), np.float32)",
        "    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y",
        f"    tid = ty * {rx} + tx",
        f"    row0, col0 = cuda.blockIdx.y * {bm}, cuda.blockIdx.x * {bn}",
        f"    a_row, a_k = tid // {bk}, tid % {bk}",
        f"    b_k, b_col = tid // {bn}, tid % {bn}",
        "    bj = col0 + b_col",
        *(f"    acc_{x}_{y} = {zero}" for x in range(tm) for y in range(tn)),
    ]

    def fetch(k0: str, indent: str) -> list[str]:
        out = [f"{indent}ak = {k0} + a_k"]
        for q in range(a_loads):
            row = f"row0 + a_row + {q * a_step}"
            out.append(f"{indent}pa_{q} = np.float32(a[{row}, ak]) if {row} < m and ak < k else {zero}")
        for q in range(b_loads):
            kr = f"{k0} + b_k + {q * b_step}"
            out.append(f"{indent}pb_{q} = np.float32(b[{kr}, bj]) if {kr} < k and bj < n else {zero}")
        return out

    def stash(stage: str, indent: str) -> list[str]:
        out = [f"{indent}sa[{stage}, a_k, a_row + {q * a_step}] = pa_{q}" for q in range(a_loads)]
        return out + [f"{indent}sb[{stage}, b_k + {q * b_step}, b_col] = pb_{q}" for q in range(b_loads)]

    cur = "s % 2" if nstages == 2 else "0"
    lines += [*fetch("0", "    "), *stash("0", "    "), "    cuda.syncthreads()"]
    lines += [
        f"    slices = (k + {bk - 1}) // {bk}",
        "    for s in range(slices):",
        f"        cur = {cur}",
        "        if s + 1 < slices:  # in flight while this slice's FMAs run",
        *fetch(f"(s + 1) * {bk}", "            "),
        f"        for kk in range({bk}):",
        *(f"            a_{x} = sa[cur, kk, ty + {x * ry}]" for x in range(tm)),
        *(f"            b_{y} = sb[cur, kk, tx + {y * rx}]" for y in range(tn)),
        *(f"            acc_{x}_{y} += a_{x} * b_{y}" for x in range(tm) for y in range(tn)),
    ]
    if nstages == 1:
        lines.append("        cuda.syncthreads()  # every read of the one stage before it is overwritten")
    lines += ["        if s + 1 < slices:", *stash("(s + 1) % 2" if nstages == 2 else "0", "            ")]
    lines.append("        cuda.syncthreads()")
    for x in range(tm):
        lines.append(f"    i = row0 + ty + {x * ry}")
        lines.append("    if i < m:")
        for y in range(tn):
            lines += [f"        j = col0 + tx + {y * rx}", "        if j < n:", f"            v = acc_{x}_{y}"]
            if epilogue:
                lines.append("            v = gelu(v + np.float32(bias[j]))")
            lines.append("            c[i, j] = v")
    return "\n".join(lines) + "\n"


@functools.cache
def tiled_source(bm: int, bn: int, bk: int, epilogue: bool) -> Callable[..., None]:
    """The tiled kernel for one tile as a Python function (what `cuda.jit` and `cuda.compile_ptx` take)."""
    text = tiled_text(bm, bn, bk, epilogue)
    filename = f"<numba matmul tiled {bm}x{bn}x{bk}{' bias_gelu' if epilogue else ''}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)  # for tracebacks, inspect
    namespace: dict[str, Any] = {"cuda": cuda, "np": np, "gelu": gelu}
    exec(compile(text, filename, "exec"), namespace)
    return namespace["tiled"]


def epilogue_source() -> Callable[..., None]:
    def bias_gelu(x, bias, out):  # type: ignore[no-untyped-def]
        m, n = x.shape
        idx = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        if idx < m * n:
            i, j = idx // n, idx % n
            out[i, j] = gelu(np.float32(x[i, j]) + np.float32(bias[j]))

    return bias_gelu


@functools.cache
def _jit(source: Callable[..., None]) -> Any:
    return cuda.jit(source)


UNBLOCKED, EPILOGUE = unblocked_source(), epilogue_source()


def kernel_sources(variant: str, params: dict, dtype: str) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    m2, v1 = f"{dtype}[:, ::1]", f"{dtype}[::1]"
    epilogue = params["epilogue"] == "bias_gelu"
    tiled_sig = f"void({m2}, {m2}, {v1}, {m2})"
    out: dict[str, tuple[Callable[..., None], str]] = {}
    if variant == "unblocked":
        out["unblocked"] = (UNBLOCKED, f"void({m2}, {m2}, {m2})")
    elif variant == "fused":
        out["tiled+bias_gelu" if epilogue else "tiled"] = (tiled_source(*params["tile"], epilogue), tiled_sig)
    elif variant in ("tiled", "unfused"):
        out["tiled"] = (tiled_source(*params["tile"], False), tiled_sig)
    if epilogue and variant != "fused":
        out["bias_gelu"] = (EPILOGUE, f"void({m2}, {v1}, {m2})")
    return out


def _prepare(factory: tuple, grid: tuple, block: tuple, stream: Any, *args: Any) -> Launcher:
    """Compile (on a GPU) the kernel `factory` = (module, attribute, args) names for these arrays now, and
    record it for the resource report; the returned closure only launches."""
    source = globals()[factory[1]]  # every factory names a function of this module
    dispatcher = _jit(source(*factory[2]) if factory[2] is not None else source)
    compiled = None if simulating() else dispatcher.compile(tuple(numba.typeof(x) for x in args))
    threads = math.prod(block)
    name = factory[1] if factory[2] is None else f"{factory[1]}{factory[2]}"
    record_numba(factory, [x for x in args if hasattr(x, "shape")], threads, name=name, compiled=compiled)

    def launch() -> None:  # configured per launch: the simulator's kernel object keeps its last configuration
        dispatcher[grid, block, stream](*args)

    return launch


@kernel(scenario="matmul", backend="numba", variant=("unblocked", "tiled", "unfused", "fused"))
def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """`unblocked` (one thread per output, A's row and B's column from device memory) or `tiled` (shared-memory
    tiles) into out, then the epilogue as its own kernel (`unfused` is `tiled`); `fused` applies the epilogue to
    the tiled kernel's register tile before its only store."""
    matmul, fuse = {"unfused": "tiled", "fused": "tiled"}.get(variant, variant), variant == "fused"
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    if str(out.dtype) not in DTYPES or any(x.dtype != out.dtype for x in (a, b, bias)):
        raise ValueError(f"numba/cuda matmul: a {a.dtype}, b {b.dtype}, bias {bias.dtype} -> out {out.dtype}")
    m, n = out.shape
    epilogue = params["epilogue"] == "bias_gelu"
    separate = epilogue and not fuse
    mid = cuda.device_array(out.shape, dtype=out.dtype) if separate else out
    option, stream = BACKEND.option(opts, "block"), stream_arg(opts.get("stream"))
    block = flat_threads(m * n, option, device())
    flat = (max(1, cdiv(m * n, block)),)  # the flat kernels (unblocked, the separate epilogue): a thread per output
    notes: dict[str, Any] = {}
    if matmul == "unblocked":
        steps = [_prepare((__name__, "UNBLOCKED", None), flat, (block,), stream, a, b, mid)]
        notes = launch_notes({"block": block}, flat, block_chosen_by(option))
    else:
        bm, bn, bk = params["tile"]
        if why := refusal(params["tile"]):
            raise NotRunnable(f"numba/cuda tiled matmul: {why}")
        notes = launch_config(m, n, params["tile"])
        grid, threads = tuple(notes["grid"]), tuple(notes["threads"])
        factory = (__name__, "tiled_source", (bm, bn, bk, epilogue and fuse))
        steps = [_prepare(factory, grid, threads, stream, a, b, bias, mid)]
    if separate:
        steps.append(_prepare((__name__, "EPILOGUE", None), flat, (block,), stream, mid, bias, out))

    def launch() -> None:
        for step in steps:
            step()

    return Launch(launch, notes=notes, allocates={"mid": mid.nbytes} if separate else {})
