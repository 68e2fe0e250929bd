"""What `python -m suite --help` (or `-h`) prints before Hydra's own help: the commands fusebench adds and the
overrides most runs use. Hydra's help lists config groups and every key, but not the subcommands (they are
dispatched before Hydra starts, in suite.cli and suite.__main__) nor which of its many keys matter first.
"""

from __future__ import annotations

COMMANDS = {
    "list": "every scenario × backend × variant × device, how it runs here, and every backend option",
    "compare BASE NEW": "what changed between two runs: slower, faster, broke, fixed (docs/compare.md)",
    "report RUN [RUN ...]": "the report and charts of finished runs, rebuilt; several runs merged (docs/merged-report.md)",
    "noise": "an A/A run: the threshold `compare` needs on this machine (docs/compare.md)",
    "headline [DOCUMENT] [--write]": "the headline tables of README.md and docs/training.md, and results/README.md's index, from the committed runs",
    "gpu-check": "the check of a CUDA machine: the stack, the plan, then every family timed (docs/gpu-check.md)",
    "training [OVERRIDES]": "every family's train-phase experiment, one table and report (docs/training.md)",
}
"""Subcommand (with its arguments) -> one line; each also answers `--help` itself."""

OVERRIDES = {
    "scenario=NAME": "the family: elementwise_chain, layernorm, rmsnorm, softmax, attention, matmul, ... (`list`)",
    "preset=S|M|L|DRAM": "the size preset (default M; DRAM: past 4x the last-level cache); scenario.<axis>=V sets one",
    "dtype=D or [D,...]": "float32, float16, bfloat16 (default [float32, float16])",
    "device=all|cpu|cuda": "which kernel targets run (default all)",
    "backends=[B,...]": "triton, cupy, numba, torch, numpy, liger, plug-ins (default every registered one)",
    "variants=[V,...]": "fused, unfused, library, eager, compiled, ... (default all of the family's)",
    "phase=forward|backward|train": "what is timed (docs/training.md)",
    "experiment=NAME": "a saved sweep from conf/experiment/ (tour_*, train_*, model_*, quick_look, ...)",
    "model=NAME": "a model's shapes: alone, every family of the model tour (docs/models.md)",
    "-m": "a multirun: comma-separated values are swept, merged into one table and report",
}
"""Override -> one line."""


def text() -> str:
    """The block printed before Hydra's help."""
    width = max(len(k) for k in [*COMMANDS, *OVERRIDES]) + 2
    lines = ["usage: python -m suite [COMMAND] [OVERRIDES]   (no arguments: the default sweep, every family)", ""]
    lines += ["commands:", *(f"  {k:<{width}}{v}" for k, v in COMMANDS.items()), ""]
    lines += ["common overrides:", *(f"  {k:<{width}}{v}" for k, v in OVERRIDES.items()), ""]
    lines += ["Bad input stops before any work: one line, exit status 2. Hydra's own help follows.", ""]
    return "\n".join(lines)
