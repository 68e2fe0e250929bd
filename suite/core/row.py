"""The result row: one per (case, implementation); its field order is the column order of results.csv.

Failures are rows too: `status` is one of ok, mismatch, error, skipped, unsupported, and `reason` says why
whenever a row is not a clean timed `ok`. Every layer reads rows; only `suite.run.result_rows` builds them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

STATUSES = ("ok", "mismatch", "error", "skipped", "unsupported")


@dataclass
class Row:
    scenario: str
    params: str
    """The case's shape parameters as JSON (sorted keys), e.g. {"n": 1048576, "ops": ["scale", "gelu"]}."""
    dtype: str
    backend: str
    device: str
    """cpu or cuda: the device the kernel is written for (in emulation it ran on the host)."""
    variant: str
    status: str
    phase: str = "forward"
    """The part of a training step measured: forward, backward, or train (both as one call); suite.core.phases."""
    reason: str = ""
    time_ms: float | None = None
    """Median of the timed repetitions; empty when nothing was timed (reason says why)."""
    time_graph_ms: float | None = None
    """CUDA, with `timing.graphs=true`: median of the variant's launcher (all its kernels) captured in a CUDA graph
    and replayed, which leaves out the host's launch overhead; empty where not captured (extra says why)."""
    bytes_modeled: int | None = None
    """Ledger traffic at the device's outer-memory boundary under `store_model`."""
    flops_modeled: int | None = None
    gbps: float | None = None
    max_rel_err: float | None = None
    size: int | None = None
    mode: str = ""
    """native (timed), emulated (interpreter/simulator: numerics only) or compile (built for sm_90, not run)."""
    time_min_ms: float | None = None
    time_q1_ms: float | None = None
    time_q3_ms: float | None = None
    reps: int | None = None
    buffer_sets: int | None = None
    """Sets of buffers (fresh allocations at different offsets) the repetitions were drawn from: one per block."""
    processes: int | None = None
    """Worker processes the repetitions were drawn from."""
    precision: float | None = None
    """Half-width of the 95% interval of log time, blocks and rounds resampled: the relative precision achieved."""
    compile_ms: float | None = None
    cold_cache: bool | None = None
    bytes_read: int | None = None
    bytes_written: int | None = None
    store_model: str = ""
    launches: int | None = None
    intermediates_removed: int | None = None
    bytes_saved: int | None = None
    peak_bytes_modeled: int | None = None
    """The most memory the variant holds at once, from the ledger's live buffers (inputs and outputs throughout,
    each intermediate between the kernels that write and last read it); for `compiled`, the buffers the
    generated code allocates where it could be read (extra.compiler.buffer_elements)."""
    peak_bytes: int | None = None
    """Measured around one untimed call on a fresh set of buffers (suite.run.peak_memory): the growth of the process's
    resident set on the CPU, of the device's memory in use on CUDA; inputs, output and every buffer the
    implementation holds count. Empty where not measured (extra.peak says why)."""
    memory_ratio: float | None = None
    """The baseline's peak bytes over this row's (above 1: this variant needs less memory); measured where both
    were, else modeled (extra.memory_basis)."""
    memory_saved_mib: float | None = None
    """The baseline's peak minus this row's, in MiB."""
    memory_verdict: str = ""
    """pays, neutral or loses: the saving must exceed both MEMORY_BAND of the baseline and MEMORY_FLOOR_MIB."""
    rival_memory_ratio: float | None = None
    """The rival's peak bytes over this row's, on the same basis."""
    saved_bytes: int | None = None
    """Backward and train phases: bytes of the tensors this variant's forward kept for its backward pass, as the
    implementation allocated them (`Launch.saves`; extra.saved names each): the activations fusion stops keeping."""
    saved_bytes_modeled: int | None = None
    """The same from the family's model (`Backward.saved`)."""
    bytes_measured: int | None = None
    """CUDA, with `profile=ncu`: DRAM bytes read and written by all the variant's kernels, from Nsight Compute."""
    ledger_residual: float | None = None
    """bytes_measured / bytes_modeled - 1: how far the ledger's model is from the traffic measured."""
    ceiling_gbps: float | None = None
    """The run's best copy that stores as the kernels do (see suite.run.ceiling): what pct_of_ceiling divides by."""
    ceiling_streaming_gbps: float | None = None
    """The run's best copy of all, non-temporal stores allowed (above ceiling_gbps on a CPU only)."""
    cache_bytes: int | None = None
    """The device's last cache level: unfused intermediates smaller than this may never reach memory."""
    pct_of_ceiling: float | None = None
    canary: str = ""
    """The reference kernel timed in the same rounds as this row (a copy): `compare` judges the row's time
    relative to it, so that a change of the machine between two runs is not read as a change of the kernel."""
    canary_ms: float | None = None
    """Median of the canary's repetitions in this row's rounds."""
    tolerance: float | None = None
    peer_err: float | None = None
    """Largest relative difference from the other implementations of the same case."""
    baseline: str = ""
    """The variant this row is compared with (fused against unfused), on the same backend and device."""
    speedup: float | None = None
    """Median over interleaved rounds of baseline time / this row's time."""
    speedup_lo: float | None = None
    speedup_hi: float | None = None
    """Bootstrap 95% interval of `speedup`."""
    verdict: str = ""
    """pays, neutral or loses: from the interval, see suite.core.fusion."""
    fusion_efficiency: float | None = None
    """Time saved over the time the ledger's removed bytes take at the measured ceiling."""
    rival: str = ""
    """The implementation a user could pick instead on the same device (`torch/compiled`: what the compiler
    fuses for free), timed in the same interleaved rounds; see `Scenario.rivals`."""
    rival_speedup: float | None = None
    """Median over rounds of the rival's time / this row's time: above 1 the hand-written kernel is faster."""
    rival_lo: float | None = None
    rival_hi: float | None = None
    """Bootstrap 95% interval of `rival_speedup`."""
    rival_verdict: str = ""
    """pays, neutral or loses against the rival, by the same interval rule as `verdict`."""
    regs: int | None = None
    spill_bytes: int | None = None
    smem_bytes: int | None = None
    occupancy: float | None = None
    """Resources of the variant's worst kernel, compiled for sm_90 (CUDA targets only; see `extra.kernels`)."""
    checked_params: str = ""
    """Params of the numerics check when it ran on a smaller slice than the case (emulation), else empty."""
    seed: int | None = None
    model: str = ""
    """The model whose published shapes set the case's axes (`model=llama3_8b`), empty for synthetic sizes."""
    layer: str = ""
    """Which of the model's layers the case stands for ('MLP up projection, bias+gelu epilogue')."""
    backend_options: str = ""
    """The backend's options in force, as JSON (sorted keys): its schema's defaults, replaced by what the run set
    (`backend_options.<backend>.<option>`); options left to each kernel are absent (extra.launch says what it
    chose). The row's `command` repeats those the run set."""
    device_name: str = ""
    throttled: str = ""
    """CUDA: the clock-throttle reasons NVML reported while the row was timed (empty: none, or no NVML)."""
    throttled_reps: int | None = None
    """CUDA: repetitions taken while NVML reported the clocks held back, left out of time_ms and the verdicts."""
    energy_j: float | None = None
    """CUDA: joules per call from NVML's energy counter, the variant run back to back after the timed rounds."""
    energy_ratio: float | None = None
    """The baseline's joules per call over this row's (above 1: this variant spends less energy per call)."""
    versions: str = ""
    git_rev: str = ""
    command: str = ""
    run_id: str = ""
    row_id: str = ""
    """`<run_id>#<n>`, the row's place in its run's table: what reps.parquet's repetitions refer to."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    """Scenario- or backend-specific values; written as JSON in the last column."""
    times_ms: tuple[float, ...] = field(default=(), repr=False, metadata={"column": False})
    """Every timed repetition, in round order: kept in reps.csv / reps.parquet, not in the row's columns."""
    blocks: tuple[int, ...] = field(default=(), repr=False, metadata={"column": False})
    """Each repetition's block (buffer set), in reps.csv."""
    canary_times_ms: tuple[float, ...] = field(default=(), repr=False, metadata={"column": False})
    """The canary's time in each repetition's round, in reps.csv."""
    excluded: tuple[bool, ...] = field(default=(), repr=False, metadata={"column": False})
    """Each repetition left out (taken while throttled), in reps.csv."""

    def as_record(self) -> dict[str, Any]:
        record = {name: getattr(self, name) for name in COLUMNS}
        record["extra"] = json.dumps(self.extra, sort_keys=True) if self.extra else ""
        return record


COLUMNS = [f.name for f in fields(Row) if f.metadata.get("column", True)]
KEY = ("scenario", "params", "dtype", "backend", "device", "variant", "phase")
"""Columns that identify one (case, implementation); `resume` skips keys already in the table."""


def params_json(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, separators=(", ", ": "))
