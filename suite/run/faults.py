"""What a GPU exception means: the device ran out of memory, or a sticky error has lost the CUDA context.

The two call for different answers. Out of memory is the case's own failure: its row says how much the case
needed and how much was free, and the sweep goes on in the same process. A sticky error (an illegal address, a
launch failure, a trap) leaves the process's CUDA context unusable, so every later CUDA call in it fails: only a
fresh process can run CUDA again (`suite.run.worker` restarts its worker on `ContextLost`).

Every kernel library reports these its own way: torch and CuPy raise `OutOfMemoryError`, Numba a
`CudaAPIError` carrying the driver's CUresult, CuPy `CUDARuntimeError`/`CUDADriverError` carrying the status,
torch and Triton a `RuntimeError` whose message is the runtime's error string, `suite.gpu.driver` a `CudaError`
naming the CUresult. The classification reads type names, the codes of those CUDA error types only, and the
messages; it imports none of the libraries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

OOM, STICKY = "out of memory", "sticky"

OUT_OF_MEMORY = 2
"""CUDA_ERROR_OUT_OF_MEMORY (driver) and cudaErrorMemoryAllocation (runtime) alike."""

STICKY_ERRORS: dict[int, tuple[str, tuple[str, ...]]] = {
    700: ("illegal memory access", ("CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress",
                                    "an illegal memory access was encountered")),
    702: ("launch timed out", ("CUDA_ERROR_LAUNCH_TIMEOUT", "cudaErrorLaunchTimeout",
                               "the launch timed out and was terminated")),
    710: ("device-side assert", ("CUDA_ERROR_ASSERT", "cudaErrorAssert", "device-side assert triggered")),
    714: ("hardware stack error", ("CUDA_ERROR_HARDWARE_STACK_ERROR", "cudaErrorHardwareStackError",
                                   "hardware stack error")),
    715: ("illegal instruction", ("CUDA_ERROR_ILLEGAL_INSTRUCTION", "cudaErrorIllegalInstruction",
                                  "an illegal instruction was encountered")),
    716: ("misaligned address", ("CUDA_ERROR_MISALIGNED_ADDRESS", "cudaErrorMisalignedAddress", "misaligned address")),
    717: ("invalid address space", ("CUDA_ERROR_INVALID_ADDRESS_SPACE", "cudaErrorInvalidAddressSpace",
                                    "operation not supported on global/shared address space")),
    718: ("invalid program counter", ("CUDA_ERROR_INVALID_PC", "cudaErrorInvalidPc", "invalid program counter")),
    719: ("launch failure", ("CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure", "unspecified launch failure")),
}  # fmt: skip
"""The errors after which CUDA documents that the process "is left in an inconsistent state and any further CUDA
work will return the same error": code -> (what the row says, the names and message that identify it)."""

OOM_MARKS = ("CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation", "out of memory")
OOM_TYPES = ("OutOfMemoryError",)
"""torch.OutOfMemoryError (torch.cuda.OutOfMemoryError) and cupy.cuda.memory.OutOfMemoryError."""

CODED_TYPES = ("CudaAPIError", "CUDARuntimeError", "CUDADriverError", "CudaError")
"""Exception types whose `code` or `status` is a CUDA error code (Numba; CuPy's runtime and driver; the suite's
driver): an integer attribute on any other exception means something else."""

_CURESULT = re.compile(r"CUresult (\d+)")
DETAIL_CHARS = 160


@dataclass(frozen=True)
class Fault:
    """A classified GPU exception: `kind` (OOM or STICKY), `what` happened in a few words, and `detail`, the
    exception's type and first line (clipped) as evidence for the row."""

    kind: str
    what: str
    detail: str

    @property
    def sticky(self) -> bool:
        return self.kind == STICKY


class ContextLost(Exception):
    """A sticky CUDA error: this process's CUDA context is unusable. `what` and `detail` are the fault's;
    `culprit` is the (backend, device, variant) that ran into it, where known."""

    def __init__(self, what: str, detail: str, culprit: tuple[str, str, str] | None = None) -> None:
        super().__init__(f"{what} ({detail})")
        self.what, self.detail, self.culprit = what, detail, culprit

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole: it may cross the worker's pipe
        return ContextLost, (self.what, self.detail, self.culprit)


def detail(exc: BaseException) -> str:
    """`Type: first line of the message`, clipped: one line for a row's reason."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    line = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return line if len(line) <= DETAIL_CHARS else line[: DETAIL_CHARS - 1] + "…"


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and those it was raised from or during (a library may wrap the driver's error)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(seen) < 8 and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _code(exc: BaseException) -> int | None:
    """The CUDA error code an exception of a CUDA error type carries (an int, or an IntEnum such as
    cuda.bindings' CUresult), or names as `CUresult N`; None for every other exception."""
    if type(exc).__name__ not in CODED_TYPES:
        return None
    for attr in ("code", "status"):
        value: Any = getattr(exc, attr, None)
        if isinstance(value, bool):
            continue
        try:
            return int(value)
        except (TypeError, ValueError):
            continue
    found = _CURESULT.search(str(exc))
    return int(found.group(1)) if found else None


def classify(exc: BaseException) -> Fault | None:
    """What `exc` means for the process: a sticky error (the context is lost), the device out of memory, or
    None when it is no GPU fault the suite must treat apart (the kernel's own failure)."""
    if isinstance(exc, ContextLost):
        return Fault(STICKY, exc.what, exc.detail)
    chain = _chain(exc)
    codes = {c for c in map(_code, chain) if c is not None}
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain)
    lowered = text.lower()
    for code, (what, marks) in STICKY_ERRORS.items():
        if code in codes or any(mark.lower() in lowered for mark in marks):
            return Fault(STICKY, what, detail(exc))
    if (
        OUT_OF_MEMORY in codes
        or any(type(e).__name__ in OOM_TYPES for e in chain)
        or any(mark.lower() in lowered for mark in OOM_MARKS)
    ):
        return Fault(OOM, "device out of memory", detail(exc))
    return None
