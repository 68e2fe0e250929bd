"""The headline tables of the README and docs/training.md, declared: which committed run, which cases, which
ratios. suite.report.headline prints them from the runs' rows (`python -m suite headline`); to change what a
document headlines, change a declaration here and run `python -m suite headline --write`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One line of a headline table: the fused row of `scenario` whose series is `series` (tidy's label of the
    case less its size and model; "" where the run has one series of the family), at `size` (None: the largest
    timed)."""

    label: str
    """How the table names the case; the size is appended as the row has it."""
    scenario: str
    series: str = ""
    size: float | None = None
    run: str = ""
    """The committed run this line is read from, where it is not its table's (a family rerun on its own)."""


@dataclass(frozen=True)
class Table:
    """One headline table: the cases of one committed run, for one implementation, dtype and phase."""

    run: str
    """The run's directory, relative to the repository root."""
    says: str
    """The line above the table: where its rows come from."""
    columns: tuple[str, ...]
    """Keys of suite.report.headline.COLUMNS (how each figure is computed), in order."""
    cases: tuple[Case, ...]
    impl: str = "numba/cpu"
    dtype: str = "float32"
    phase: str = "forward"


FORWARD = ("fused over unfused", "ledger predicts", "fused over torch.compile", "fused over the library (medians)")
SAMPLE = Table(
    run="results/sample",
    says="The default sweep (`nox -s bench`, `results/sample/`), float32, Numba's CPU kernels, at its largest sizes:",
    columns=FORWARD,
    cases=(
        Case("chain `scale→shift→relu→square`", "elementwise_chain", "scale→shift→relu→square"),
        Case(
            "8-op chain with tanh, sigmoid, silu, gelu",
            "elementwise_chain",
            "scale→shift→relu→square→tanh→sigmoid→silu→gelu",
        ),
        Case("layernorm, 4,096 rows", "layernorm"),
        Case("softmax, 4,096 rows", "softmax"),
        Case("attention B1 H4 D64", "attention"),
        Case("matmul 512×512 + bias+gelu epilogue", "matmul"),
    ),
)
LLAMA = Table(
    run="results/model_llama3_8b",
    says="The same families at Llama-3-8B's shapes, 2,048 tokens (`model=llama3_8b`, `results/model_llama3_8b/`):",
    columns=FORWARD,
    cases=(
        Case("MLP activation `shift→silu`", "elementwise_chain"),
        Case("layernorm, 2,048 rows", "layernorm"),
        Case("softmax of the scores, 65,536 rows", "softmax"),
        Case("causal attention H32 D128", "attention"),
        Case("MLP up projection 4,096 → 14,336 + bias+gelu", "matmul"),
    ),
)
TRAIN = Table(
    run="results/training",
    says=(
        "The train phase (forward + backward as one call; `python -m suite training device=cpu`, "
        "`results/training/`; softmax from `results/training_softmax/`, rerun once its torch rows' tolerance was "
        "corrected; linear cross-entropy from `results/training_lce/`, rerun once its fused training step wrote "
        "each chunk's gradient in its forward), float32, Numba's CPU kernels:"
    ),
    columns=(
        "fused over unfused",
        "fused over torch.compile",
        "kept for backward, fused vs unfused",
        "peak, unfused → fused",
    ),
    cases=(
        Case("chain `scale→shift→relu→square`", "elementwise_chain", "scale→shift→relu→square"),
        Case(
            "8-op chain with tanh, sigmoid, silu, gelu",
            "elementwise_chain",
            "scale→shift→relu→square→tanh→sigmoid→silu→gelu",
        ),
        Case("layernorm, 8,192 rows", "layernorm"),
        Case("rmsnorm, 8,192 rows", "rmsnorm"),
        Case("softmax, 8,192 rows", "softmax", run="results/training_softmax"),
        Case("add_rmsnorm, 8,192 rows", "add_rmsnorm"),
        Case("swiglu, 2,048 rows", "swiglu"),
        Case("rope, Llama-3-8B heads, half pairs", "rope", "batch=1, head_dim=128, heads=32, kv_heads=8, pairing=half"),
        Case("cross_entropy, 2,048 tokens", "cross_entropy"),
        Case("linear_cross_entropy, hidden 256, vocab 32,000", "linear_cross_entropy", run="results/training_lce"),
    ),
    phase="train",
)
BACKWARD = Table(
    run="results/backward",
    says=(
        "The backward pass alone (`phase=backward`, `results/backward/`; add_rmsnorm from "
        "`results/backward_compiled/`, rerun once torch.compile's backward could be launched again; rmsnorm and "
        "layernorm from `results/backward_norms/`, rerun once their fused backward became one pipelined loop):"
    ),
    columns=("fused, % of copy ceiling", "fused over unfused", "fused over torch.compile"),
    cases=(
        Case("rmsnorm, 8,192 rows", "rmsnorm", run="results/backward_norms"),
        Case("layernorm, 8,192 rows", "layernorm", run="results/backward_norms"),
        Case("add_rmsnorm, 8,192 rows", "add_rmsnorm", run="results/backward_compiled"),
        Case("swiglu, 2,048 rows", "swiglu"),
        Case("rope, half pairs", "rope", "batch=1, head_dim=128, heads=32, kv_heads=8, pairing=half"),
        Case("rope, interleaved", "rope", "batch=1, head_dim=128, heads=32, kv_heads=8, pairing=interleaved"),
        Case("softmax, 8,192 rows", "softmax"),
    ),
    phase="backward",
)
HEADLINES: dict[str, tuple[Table, ...]] = {"README.md": (SAMPLE, LLAMA), "docs/training.md": (TRAIN, BACKWARD)}
"""Document (relative to the repository root) -> the tables of its marked block."""
