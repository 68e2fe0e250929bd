"""The configuration schema: Hydra structured configs registered in the ConfigStore as `base_<group>`.

YAML files under conf/ start from these dataclasses, so a mistyped key or a value of the wrong type is refused
by Hydra; `suite.run.validate` then checks what types cannot (known backends, sizes, ops) before any work starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


@dataclass
class TimingConfig:
    budget_s: float = 0.25
    """Wall time spent timing each implementation of a case at the least, spread over `min_blocks` blocks."""
    min_reps: int = 5
    """Rounds of each block at the least."""
    max_reps: int = 2000
    """Rounds at most, shared among the first `min_blocks` blocks."""
    min_blocks: int = 3
    """Blocks of rounds at the least, each on a fresh set of buffers (suite.run.timing.measure_blocks): what one
    set of buffers fixes for a kernel's time is sampled, and the intervals widen by it (suite.core.resample)."""
    max_blocks: int = 12
    input_sets: int = 4
    """Sets of input buffers each block's repetitions rotate through, one per round, where the sets together fit
    `suite.run.honesty.ROTATION_BUDGET` (extra.input_sets says how many a row got): a kernel never times on the
    buffers it ran on the round before, so a result it kept for them (or their data hot in cache) cannot win."""
    precision: float = 0.02
    """Blocks are added past `min_blocks` until every implementation's 95% interval of its time has a relative
    half-width at most this (the row's `precision` says what it got), or `max_budget_s` is spent."""
    max_budget_s: float = 1.0
    """Wall time per implementation of a case at the most, past which no block is added."""
    processes: int = 2
    """Worker processes each case is timed in, one after the other, each with 1/processes of the budget and
    blocks (isolate=true; one without a worker): what a process fixes for a kernel's time (its thread pool, its
    memory's layout) is sampled too, and the intervals widen by it (suite.run.pooled)."""
    energy_s: float = 0.1
    """CUDA: after the timed rounds, each implementation runs back to back for at least this long between two
    moves of NVML's energy counter, for its joules per call (`energy_j`); 0: not measured."""
    warmup: int = 2
    cold_cache: bool = False
    """CPU: flush a buffer larger than the last-level cache before every repetition. CUDA always flushes L2."""
    case_timeout_s: float = 600.0
    """A case (all its implementations) that runs longer becomes rows with status `error` and the sweep goes on."""
    graphs: bool = False
    """CUDA: also time each variant's launcher captured in a CUDA graph and replayed (`time_graph_ms`)."""
    ceiling: str = "interleaved"
    """`interleaved`: a case whose traffic exceeds the device's last cache level also times the ceiling's copy
    in its own rounds, and its rows' ceiling_gbps is that reading (a shared machine's bandwidth drifts between
    cases); `once`: every row is held to the copy measured as the worker started (suite.run.ceiling)."""


@dataclass
class DeviceConfig:
    name: str = "all"
    targets: list[str] = field(default_factory=lambda: ["cpu", "cuda"])
    """Kernel targets to run: `cpu` kernels run on the host; `cuda` kernels on a GPU, or emulated without one."""
    emulate: bool = True
    """Without a GPU, check the CUDA kernels' numerics in the Triton interpreter and the Numba CUDA simulator."""
    emulate_max_elements: int = 4096
    """Cases larger than this are checked in emulation on a slice of this many elements (see the scenario)."""
    arch: str | None = None
    """The SM architecture occupancy is computed for (sm_80, sm_86, sm_89, sm_90, sm_100); None: the GPU's own,
    else sm_90."""


@dataclass
class ScenarioConfig:
    name: str = MISSING


@dataclass
class ModelConfig:
    """A model's published configuration (conf/model/<name>.yaml, its source named): what `model=<name>` sets every
    family's axes from, through the `model_*` experiments. Adding a model is adding one such file."""

    name: str = MISSING
    source: str = MISSING
    """Where the numbers come from (the model's config.json)."""
    hidden_size: int = MISSING
    intermediate_size: int = MISSING
    num_attention_heads: int = MISSING
    num_key_value_heads: int = MISSING
    head_dim: int = MISSING
    vocab_size: int = MISSING
    context: int = MISSING
    """Longest sequence the model was trained for (max_position_embeddings / n_positions)."""
    hidden_act: str = "silu"
    """The MLP's activation as the elementwise chain names it (silu, gelu)."""
    norm: str = "rmsnorm"
    """The normalization the model uses (rmsnorm, layernorm)."""
    rope_pairing: str = "half"
    """How the checkpoint pairs rotary dimensions: `half` (Hugging Face's rotate_half, as Llama, Mistral and Qwen
    run) or `interleaved` (GPT-J's, Meta's reference code). A model without rotary positions (GPT-2) keeps the
    default: its rope case is then a what-if at its widths."""


@dataclass
class BenchConfig:
    scenario: Any = MISSING
    backends: list[str] = field(default_factory=list)
    """Empty: every registered backend (in-tree and from the `fusebench.backends` entry-point group)."""
    variants: list[str] = field(default_factory=list)
    """Empty: every variant of the scenario."""
    dtype: Any = field(default_factory=lambda: ["float32", "float16"])
    """One dtype or a list: each is a sweep axis value."""
    phase: str = "forward"
    """The part of a training step measured: forward, backward or train (forward + backward as one call). A
    sweep over phases is a multirun (`-m phase=forward,train`); a family without a backward sits a backward
    plan out."""
    preset: str = "M"
    """Size preset of the scenario (S: tests, M: default, L: large); scenario.<axis> overrides one axis."""
    seed: int = 0
    save_io: bool = False
    resume: bool = False
    isolate: bool = True
    """Run kernels in a worker process so a crash or a timeout costs one case, not the run."""
    plugins: list[str] = field(default_factory=list)
    """Extra modules the worker imports, to register out-of-tree scenarios or kernels."""
    backend_options: dict[str, Any] = field(default_factory=dict)
    """backend_options.<backend>.<option>: each backend's schema names its options, their ranges and defaults."""
    timing: TimingConfig = field(default_factory=TimingConfig)
    device: DeviceConfig = field(default_factory=DeviceConfig)
    profile: str = "none"
    """`ncu`: rerun each timed CUDA row once under Nsight Compute and record the DRAM bytes it moved."""
    model: Any = None
    """`model=<name>`: a model's published shapes (conf/model/) set every family's axes; None: the presets."""
    tokens: int = 2048
    """With a model: tokens in flight, batch × sequence (the rows of every per-token layer)."""
    seq_len: int = 0
    """With a model: the attention's sequence length; 0: `tokens`, capped at the model's context."""
    layer: str = ""
    """Which layer of the model a case stands for (set by the `model_*` experiments), recorded in every row."""
    strict: bool = True
    """Exit with status 3 when any row is `mismatch` or `error` (see docs/exit-status.md); false: exit 0 whatever
    the rows say, for exploratory sweeps."""


def sequence(tokens: int, seq_len: int, context: int) -> int:
    """The attention's sequence length: `seq_len`, or where 0 the tokens capped at the model's context."""
    return int(seq_len) or min(int(tokens), int(context))


def batch(tokens: int, seq_len: int, context: int) -> int:
    """Sequences in flight: tokens / sequence length, which must divide them."""
    seq = sequence(tokens, seq_len, context)
    if int(tokens) % seq:
        raise ValueError(f"tokens={tokens} is not a whole number of sequences of seq_len={seq}")
    return int(tokens) // seq


def register_configs() -> None:
    OmegaConf.register_new_resolver("fusebench_seq", sequence, replace=True)
    OmegaConf.register_new_resolver("fusebench_batch", batch, replace=True)
    OmegaConf.register_new_resolver("fusebench_mul", lambda a, b: int(a) * int(b), replace=True)
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=BenchConfig)
    cs.store(group="model", name="base_model", node=ModelConfig)
    cs.store(group="timing", name="base_timing", node=TimingConfig)
    cs.store(group="device", name="base_device", node=DeviceConfig)
