"""Traffic-ledger arithmetic shared by every scenario: per-kernel bytes and FLOPs, per-variant totals.

A scenario writes its canonical decomposition as a list of `KernelTraffic` per variant; this module adds them up,
applies the device's store model and states what fusion removed. Removing one materialised intermediate of
N elements of s bytes saves up to ΔQ = 2·N·s bytes (one write, one read) at the device-memory boundary.

Store models: on a GPU, stores to HBM are counted once (`write-once`). On a CPU an ordinary store to a line not
in cache first reads that line (write-allocate), so every written byte is also read: `write-allocate` counts
written bytes twice. The model in force is recorded with every row and named in the report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

WRITE_ONCE, WRITE_ALLOCATE = "write-once", "write-allocate"
STORE_MODEL = {"cuda": WRITE_ONCE, "cpu": WRITE_ALLOCATE}
"""Which store model the ledger counts for each device's outer-memory boundary (HBM on cuda, DRAM on cpu)."""


@dataclass(frozen=True)
class KernelTraffic:
    """One kernel of a decomposition: what it must read and write at the outer-memory boundary."""

    name: str
    bytes_read: int
    bytes_written: int
    flops: int


@dataclass(frozen=True)
class Intermediate:
    """A tensor the unfused variant materialises in device memory and the fused one keeps on chip."""

    name: str
    elements: int
    itemsize: int

    @property
    def saved_bytes(self) -> int:
        return 2 * self.elements * self.itemsize


@dataclass(frozen=True)
class VariantLedger:
    variant: str
    kernels: tuple[KernelTraffic, ...]
    removed: tuple[Intermediate, ...] = field(default=())
    """Intermediates this variant no longer materialises, relative to the unfused decomposition."""
    peak_bytes: int | None = None
    """The most memory the variant holds at once while it runs (`live_peak`): its inputs and outputs the whole
    time, each intermediate from the kernel that writes it to the last kernel that reads it; None where the
    family has no model. Fusion's second payoff: an intermediate kept on chip never takes memory at all."""

    @property
    def bytes_read(self) -> int:
        return sum(k.bytes_read for k in self.kernels)

    @property
    def bytes_written(self) -> int:
        return sum(k.bytes_written for k in self.kernels)

    @property
    def flops(self) -> int:
        return sum(k.flops for k in self.kernels)

    @property
    def launches(self) -> int:
        return len(self.kernels)

    @property
    def saved_bytes(self) -> int:
        return sum(i.saved_bytes for i in self.removed)

    def bytes_moved(self, store_model: str = WRITE_ONCE) -> int:
        """Bytes crossing the outer-memory boundary under `store_model`."""
        allocate = self.bytes_written if store_model == WRITE_ALLOCATE else 0
        return self.bytes_read + self.bytes_written + allocate


def stream_bytes(elements: int, itemsize: int, store_model: str) -> int:
    """Bytes a copy of `elements` values moves under `store_model`: the ceiling counts as the kernels do."""
    return VariantLedger("copy", (KernelTraffic("copy", elements * itemsize, elements * itemsize, 0),)).bytes_moved(
        store_model
    )


Access = tuple[Sequence[str], Sequence[str]]
"""One kernel's (reads, writes), by tensor name."""


def live_peak(held: int, kernels: Iterable[Access], sizes: Mapping[str, int]) -> int:
    """Bytes alive at once at the worst kernel: `held` (the inputs and outputs, alive throughout) plus every
    intermediate (a name in `sizes`) alive while that kernel runs. An intermediate lives from the first kernel
    that writes it to the last that reads it, both included; names not in `sizes` are part of `held`."""
    steps = [(tuple(reads), tuple(writes)) for reads, writes in kernels]
    first = {}
    last = {}
    for i, (reads, writes) in enumerate(steps):
        for name in writes:
            if name in sizes:
                first.setdefault(name, i)
                last[name] = max(last.get(name, i), i)
        for name in reads:
            if name in sizes:
                first.setdefault(name, i)
                last[name] = i
    alive = [sum(sizes[t] for t in first if first[t] <= i <= last[t]) for i in range(len(steps))]
    return held + max(alive, default=0)
