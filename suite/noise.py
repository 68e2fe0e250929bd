"""`python -m suite noise`: the noise floor of this machine, measured: a short A/A and what `compare` makes of it.

Users gate CI on `suite compare` and must pick its `--threshold`; the right one depends on the machine (a quiet
workstation, a shared 2-core VM, a GPU with neighbours). This runs the same sweep twice, back to back, into
DIR/a and DIR/b, and writes DIR/noise.md (`suite.report.noise_floor`): rows flagged at the threshold, the threshold that
would keep this machine quiet, and how the verdicts held. `--runs A B` reads two finished runs instead.

    python -m suite noise                                   # the default A/A: chain, layernorm, softmax on the CPU
    python -m suite noise --threshold 3 -- -m scenario=softmax,layernorm preset=M backends=[numba,torch] device=cpu
    python -m suite noise --runs results/a results/b        # two runs already made
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from suite.core.errors import ConfigError
from suite.kit import store
from suite.report import compare
from suite.report import noise_floor as noise

DEFAULT = ["-m", "experiment=tour_elementwise,tour_layernorm,tour_softmax", "backends=[numba,torch]", "device=cpu"]
"""The A/A run without overrides: the tour's chains, layernorm and softmax, Numba and torch on the CPU."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(
            f"noise: {message}; usage: python -m suite noise [--threshold PCT] [--out DIR] [--runs A B] [-- OVERRIDES]"
        )


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m suite noise", description="Measure this machine's noise floor with an A/A run.")
    p.add_argument(
        "--threshold",
        default=str(compare.DEFAULT_THRESHOLD),
        metavar="PCT",
        help="the compare threshold to count flagged rows at (default 5)",
    )
    p.add_argument("--out", metavar="DIR", help="where the two runs and noise.md go (default results/noise_<time>)")
    p.add_argument("--runs", nargs=2, metavar=("A", "B"), help="two finished runs to read instead of running")
    return p


def main(argv: list[str], precheck: Callable[[list[str]], object] | None = None) -> int:
    """The command; `precheck(overrides)` (the command line's, passed in by `suite.cli`) refuses bad input in
    one line before either run starts."""
    ours, overrides = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    args = parser().parse_args(ours)
    t = compare.threshold(args.threshold)
    if args.runs:
        a, b = (Path(r) for r in args.runs)
        out = Path(args.out) if args.out else b
    else:
        overrides = overrides or list(DEFAULT)
        if precheck is not None:
            precheck(overrides)
        out = Path(args.out or f"results/noise_{time.strftime('%Y-%m-%d_%H-%M-%S')}")
        a, b = out / "a", out / "b"
        for side in (a, b):
            _run(overrides, side)
    found = noise.measure(store.load(a), store.load(b), t)
    out.mkdir(parents=True, exist_ok=True)
    text = noise.markdown(found, str(a), str(b))
    (out / "noise.md").write_text(text)
    print(text + f"\nwrote {out / 'noise.md'}")
    return 0


def _run(overrides: list[str], directory: Path) -> None:
    """One side of the A/A, as `python -m suite` runs it; a run whose rows are not all ok still counts."""
    multirun = any(o in ("-m", "--multirun") for o in overrides)
    where = f"hydra.sweep.dir={directory}" if multirun else f"hydra.run.dir={directory}"
    done = subprocess.run([sys.executable, "-m", "suite", *overrides, where], check=False)
    if not (directory / store.CSV_NAME).exists():
        raise ConfigError(f"noise: the run into {directory} wrote no table (exit status {done.returncode})")
