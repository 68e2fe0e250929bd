"""The headline tables of the README and docs/training.md, declared: which committed run, which cases, which
ratios. suite.report.headline prints them from the runs' rows (`python -m suite headline`); to change what a
document headlines, change a declaration here and run `python -m suite headline --write`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One line of a headline table: the hand kernel's row (fused unless `variant` says) of `scenario` whose series is `series` (tidy's label of the
    case less its size and model; "" where the run has one series of the family), at `size` (None: the largest
    timed)."""

    label: str
    """How the table names the case; the size is appended as the row has it."""
    scenario: str
    series: str = ""
    size: float | None = None
    run: str = ""
    """The committed run this line is read from, where it is not its table's."""
    variant: str = "fused"
    """The hand kernel's variant the line reads (`tiled`: the matmul without an epilogue)."""


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
LLAMA_ALL = Table(
    run="results/model_llama3_8b",
    says="Every family the run holds, at Llama-3-8B's shapes and 2,048 tokens, float32, Numba's CPU kernels:",
    columns=(*FORWARD[:3], "peak, unfused → fused", FORWARD[3]),
    cases=(
        Case("MLP activation `shift→silu`", "elementwise_chain"),
        Case("layernorm, 2,048 rows", "layernorm"),
        Case("rmsnorm, 2,048 rows", "rmsnorm"),
        Case("softmax of the scores, 65,536 rows", "softmax"),
        Case("causal attention H32 (8 K/V heads) D128", "attention"),
        Case("MLP up projection 4,096 → 14,336 + bias+gelu", "matmul"),
        Case("add_rmsnorm, 2,048 rows", "add_rmsnorm"),
        Case("swiglu, 2,048 rows", "swiglu"),
        Case("rope, 32 q / 8 kv heads, half pairs", "rope"),
        Case("cross-entropy, 2,048 tokens", "cross_entropy"),
    ),
)
LLAMA = Table(
    run=LLAMA_ALL.run,
    says="The same families at Llama-3-8B's shapes, 2,048 tokens (`model=llama3_8b`, `results/model_llama3_8b/`):",
    columns=FORWARD,
    cases=tuple(c for c in LLAMA_ALL.cases if c.scenario in {case.scenario for case in SAMPLE.cases}),
)
LM_HEAD = Table(
    run="results/linear_cross_entropy_llama3_8b",
    says="The LM head and its loss at Llama-3-8B's widths, float32, Numba's CPU kernels after NumPy's BLAS:",
    columns=("fused over unfused", "peak, unfused → fused", "fused over torch.compile"),
    cases=(Case("hidden 4,096, vocab 128,256, chunks of 256 tokens", "linear_cross_entropy"),),
)
CHAINS = (
    Case("chain `[scale,shift,scale,shift]`", "elementwise_chain", "scale→shift→scale→shift"),
    Case(
        "8-op chain with tanh, sigmoid, silu, gelu",
        "elementwise_chain",
        "scale→shift→relu→square→tanh→sigmoid→silu→gelu",
    ),
)
COMPILER = Table(
    run="results/sample_compiler",
    says=(
        "Hand fusion against the compiler (`python -m suite -m experiment=compiler_chains,compiler_layernorm`, "
        "`results/sample_compiler/`), float32, Numba's CPU kernels:"
    ),
    columns=("fused over unfused", "fused over torch.compile", "fused over the library (medians)"),
    cases=(
        *CHAINS,
        Case("layernorm, 65,536 rows", "layernorm", size=1024),
        Case("layernorm, 65,536 rows", "layernorm", size=4096),
    ),
)
RIVALS = ("fused, % of copy ceiling", "fused over torch.compile", "fused over the library (medians)")
BEST = Table(
    run="results/sample_best",
    says=(
        "Each CPU kernel beside its rivals (`results/sample_best/`), float32; the library is SDPA for attention and "
        "torch's and NumPy's GEMMs for the matmul (the table above has torch's `layer_norm`):"
    ),
    columns=RIVALS,
    cases=(
        *CHAINS,
        *(
            Case(f"{family}, 65,536 rows", family, size=cols)
            for family in ("layernorm", "rmsnorm", "softmax")
            for cols in (1024, 4096)
        ),
        Case(
            "attention B1 H4 D64",
            "attention",
            "batch=1, block_m=64, block_n=64, causal=False, head_dim=64, heads=4, kv_heads=4",
        ),
        Case(
            "causal attention B1 H4 D64",
            "attention",
            "batch=1, block_m=64, block_n=64, causal=True, head_dim=64, heads=4, kv_heads=4",
        ),
        Case("matmul, no epilogue (the tiled kernel)", "matmul", variant="tiled"),
    ),
)
BEST_HALF = Table(run=BEST.run, says="The same chains in float16:", columns=RIVALS, cases=CHAINS, dtype="float16")
TRAIN = Table(
    run="results/training",
    says=(
        "The train phase (forward + backward as one call; `python -m suite training device=cpu`, "
        "`results/training/`), float32, Numba's CPU kernels:"
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
        Case("softmax, 8,192 rows", "softmax"),
        Case("add_rmsnorm, 8,192 rows", "add_rmsnorm"),
        Case("swiglu, 2,048 rows", "swiglu"),
        Case("rope, Llama-3-8B heads, half pairs", "rope", "batch=1, head_dim=128, heads=32, kv_heads=8, pairing=half"),
        Case("cross_entropy, 2,048 tokens", "cross_entropy"),
        Case("linear_cross_entropy, hidden 256, vocab 32,000", "linear_cross_entropy"),
    ),
    phase="train",
)
BACKWARD = Table(
    run="results/backward",
    says=("The backward pass alone (`phase=backward`, `results/backward/`), float32, Numba's CPU kernels:"),
    columns=("fused, % of copy ceiling", "fused over unfused", "fused over torch.compile"),
    cases=(
        Case("rmsnorm, 8,192 rows", "rmsnorm"),
        Case("layernorm, 8,192 rows", "layernorm"),
        Case("add_rmsnorm, 8,192 rows", "add_rmsnorm"),
        Case("swiglu, 2,048 rows", "swiglu"),
        Case("rope, half pairs", "rope", "batch=1, head_dim=128, heads=32, kv_heads=8, pairing=half"),
        Case("rope, interleaved", "rope", "batch=1, head_dim=128, heads=32, kv_heads=8, pairing=interleaved"),
        Case("softmax, 8,192 rows", "softmax"),
    ),
    phase="backward",
)
HEADLINES: dict[str, tuple[Table, ...]] = {
    "README.md": (SAMPLE, LLAMA),
    "docs/training.md": (TRAIN, BACKWARD),
    "docs/rivals.md": (COMPILER, BEST, BEST_HALF),
    "results/model_llama3_8b/README.md": (LLAMA_ALL,),
    "results/linear_cross_entropy_llama3_8b/README.md": (LM_HEAD,),
}
"""Document (relative to the repository root) -> the tables of its marked block."""
