"""The command line: `python -m suite [overrides]`, `-m` for a multirun sweep, `python -m suite list`, and the
commands over finished runs: `python -m suite compare BASE NEW` and `python -m suite report RUN [RUN ...]`, and
`python -m suite noise`, an A/A run that measures the threshold `compare` needs on this machine.

Bad input is refused before Hydra starts a run: the overrides are composed (every job of a sweep) and planned
here, and any problem is printed as one line with exit status 2, never as a traceback. Each job plans its own
config again; the exit status is computed from the run's Result (a multirun's, read back from the directory
fixed here for it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from suite.core import plugins
from suite.core import scenario as scenarios
from suite.core.errors import ConfigError
from suite.core.install import hint
from suite.core.plugins import load_plugins
from suite.kit.store import CSV_NAME
from suite.run import progress
from suite.run.config import register_configs
from suite.sweep import placement
from suite.sweep.merge import MULTIRUN_FLAGS, finalize, job_overrides, quoted, sweep_config, sweep_dir

if TYPE_CHECKING:
    from suite.run.result import Result

CONF = Path(__file__).resolve().parent.parent / "conf"
TOUR = ["-m", "experiment=tour_elementwise,tour_layernorm,tour_softmax,tour_attention,tour_matmul"]
"""What `python -m suite` (and `nox -s bench`) runs when given no arguments: the tour's five families at sizes
that show the effect (conf/experiment/tour_*.yaml), one job each, into one table and one report; about 13 minutes
on 2 CPU cores with the install, each case timed in two worker processes."""


def with_training_tour(args: list[str]) -> list[str]:
    """`training` (first, alone or with overrides) as the multirun of every family's train-phase experiment."""
    if args[:1] != ["training"]:
        return args
    with contextlib.suppress(ConfigError):
        load_plugins(plugins.named(args))
    return ["-m", "experiment=" + ",".join(scenarios.training_experiments()), *args[1:]]


def with_model_tour(args: list[str]) -> list[str]:
    """`args` with the model tour added where a model is named without a scenario or an experiment."""
    named = lambda key: any(a.lstrip("+~").startswith(f"{key}=") for a in args)
    if not named("model") or named("scenario") or named("experiment"):
        return args
    with contextlib.suppress(ConfigError):  # the families `plugins=` adds join too; one that fails, precheck names
        load_plugins(plugins.named(args))
    tour = "experiment=" + ",".join(scenarios.model_experiments())
    return [*([] if any(a in MULTIRUN_FLAGS for a in args) else ["-m"]), *args, tour]


LAUNCHERS = {
    "pool": ("hydra_plugins.hydra_joblib_launcher", "hydra-joblib-launcher", "pool"),
    "slurm": ("hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher", "slurm"),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher", "slurm"),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher", "slurm"),
}
"""`hydra/launcher=<name>` -> (the plugin it needs, its distribution, the fusebench extra that installs it)."""

register_configs()
OmegaConf.register_new_resolver("fusebench_gpus", lambda: max(1, len(placement.visible_gpus())), replace=True)
"""`${fusebench_gpus:}`: how many jobs the pool launcher runs at once, one per visible GPU (1 without one)."""
scenarios.register_configs()  # each family's node, scenario/base_<name>: its YAML file starts from it


def launcher_problem(args: list[str]) -> str | None:
    """A `hydra/launcher=` that cannot run the sweep, as one line: its plugin is not installed (naming the extra
    that installs it), or SLURM would refuse what the sweep asks of it (`sbatch --test-only`, suite.sweep.cluster)."""
    for arg in args:
        if arg.startswith("hydra/launcher="):
            name = arg.split("=", 1)[1]
            module, dist, extra = LAUNCHERS.get(name, (None, "", ""))
            if module is not None and not _installed(module):
                return f"hydra/launcher={name} needs {dist}: {hint(extra)}"
            if name == "slurm" and any(a in MULTIRUN_FLAGS for a in args):
                return _slurm_problem(args)
    return None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing too (no Hydra plugin at all: `hydra_plugins`)
        return False


def _slurm_problem(args: list[str]) -> str | None:
    """What SLURM says to the sweep's job array before any job is queued (suite.sweep.cluster.request); None when it
    would queue it, or when the config does not compose (precheck then names that problem). The launcher's fields
    are resolved from the sweep's config as Hydra resolves them: with the overrides that are not swept."""
    from suite.sweep.cluster import request

    try:
        cfg = sweep_config(open_options(args))
        params = request.launcher_params(cfg)
    except Exception:
        return None
    return request.problem(params, len(job_overrides(args)))


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    if exc.__cause__ is not None:  # Hydra wraps the OmegaConf error that says what was wrong with the value
        text += ": " + str(exc.__cause__).split("\n")[0]
    text = re.sub(r"\s+", " ", text).strip()
    missing = re.search(r"Could not find '(\w+)/([^']*)'.*?Available options in '\w+': (.*?) Config search path", text)
    if missing:
        group, name, options = missing.groups()
        if group == "scenario":  # every registered family, and any that failed to load with its error
            return scenarios.unknown(name)
        valid = ", ".join(o for o in options.split() if not o.startswith("base_"))
        return f"unknown {group} '{name}'; valid: {valid}"
    return re.sub(r" ?Set the environment variable HYDRA_FULL_ERROR=1.*$", "", text)


def open_options(args: list[str]) -> list[str]:
    """`backend_options.<backend>.<option>=v` sets an option whether or not the config lists it already: each
    backend's schema, not the config's defaults, says which options exist (and is checked before any work)."""
    return [f"++{a}" if a.startswith("backend_options.") else a for a in args]


def compose_jobs(args: list[str]) -> list[DictConfig]:
    """The config of every job the command would run (under `-m` a sweep expands to several), composed as Hydra
    will compose it; ConfigError (one line, naming the valid choices) on the first that cannot be."""
    from hydra import compose, initialize_config_dir

    load_plugins(plugins.named(args))  # before composing: a family a plug-in registers is selected by its name
    scenarios.register_configs()
    configs = []
    for overrides in job_overrides(open_options(args)):
        try:
            with initialize_config_dir(config_dir=str(CONF), version_base=None):
                configs.append(compose(config_name="config", overrides=overrides))
        except Exception as exc:
            raise ConfigError(_unknown_key(overrides) or _one_line(exc)) from None
    return configs


@dataclass(frozen=True)
class Checked:
    """What precheck learned of the command's jobs, in Hydra's job order."""

    cases: tuple[int, ...]
    """How many cases (case × dtype) each job runs: the sweep's progress bar counts them all."""
    strict: bool
    """Whether every job exits non-zero on a failing row (`strict`): a multirun's exit status reads it."""


def precheck(args: list[str]) -> Checked:
    """Compose and plan every job's config; raise ConfigError (one line) on the first problem. Nothing is kept:
    each job plans its own config again (deterministic), and says what it learned only in the value returned."""
    from suite.run import validate

    configs = compose_jobs(args)
    counts = []
    for cfg in configs:
        p = validate.plan(cfg)
        if p.left_out:
            print(f"fusebench: {p.left_out}", file=sys.stderr)
        if p.sizing is not None:
            print(f"fusebench: {p.sizing.line()}", file=sys.stderr)
        counts.append(len(p.cases) * len(p.dtypes))
    return Checked(tuple(counts), all(bool(cfg.get("strict", True)) for cfg in configs))


def _unknown_key(overrides: list[str]) -> str | None:
    """Hydra refuses a key the scenario's node lacks without naming the valid ones; this names them."""
    names = [o.split("=", 1)[1] for o in overrides if o.startswith("scenario=")] or ["elementwise_chain"]
    keys = [o.split("=", 1)[0].lstrip("+~") for o in overrides if "=" in o and o.lstrip("+~").startswith("scenario.")]
    try:
        scn = scenarios.get(names[-1])
    except ConfigError:
        return None
    for key in keys:
        if key.split(".")[1] not in (*scn.axes, "name"):
            return f"unknown key {key} for {scn.name}; valid: {', '.join(scn.axes)}"
    return None


@hydra.main(version_base=None, config_path=str(CONF), config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    """One Hydra job: a multirun's (suite.sweep.job), or the single run, whose exit status its Result decides."""
    from suite.run.result import Result
    from suite.run.runner import run

    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        from suite.sweep.job import run_job

        run_job(cfg, hydra_cfg)
        return
    outdir = Path(hydra_cfg.runtime.output_dir)
    interrupted = False
    try:
        result = run(cfg, outdir, run_id=outdir.name)
    except ConfigError as exc:
        print(f"fusebench: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        interrupted = True
        result = Result.read(outdir)
        print(f"\ninterrupted: {len(result.table)} rows kept in {outdir}; rerun with resume=true", file=sys.stderr)
    result = finalize(result)
    if interrupted:
        sys.exit(130)
    exit_for(result, bool(cfg.get("strict", True)))


def exit_for(result: Result, strict: bool) -> None:
    """Exit with the result's status (`outcome.FAILED`, 3, where a row is `mismatch` or `error`), saying so in
    one line; `strict=false` relaxes it. Return where the status is 0."""
    if code := result.exit_status(strict):
        said = f"fusebench: {result.failing} row(s) mismatch or error: exit {code} (strict=false: exit 0)"
        print(said, file=sys.stderr)
        sys.exit(code)


def _over_runs(command: str, argv: list[str]) -> int:
    """`compare`, `report` and `headline` read finished runs only (`noise` makes its two first): no Hydra, no
    kernels; bad input is one line, exit 2."""
    if command == "compare":
        from suite.report.compare import main as command_main
    elif command == "noise":
        from suite.noise import main as noise_main

        command_main = lambda argv: noise_main(argv, precheck)
    elif command == "headline":
        from suite.report.headline import main as command_main
    else:
        from suite.report.merged import main as command_main
    try:
        if command == "report" and len(argv) == 1 and (Path(argv[0]) / "multirun.yaml").exists():
            from suite.sweep.callbacks import merge_saved  # a sweep: its jobs merged again, as its multirun's end does

            print(f"report: {merge_saved(Path(argv[0])).paths[-1]}")
            return 0
        return command_main(argv)
    except ConfigError as exc:
        print(f"fusebench: error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> None:
    args = with_training_tour(with_model_tour(open_options(sys.argv[1:] if argv is None else argv))) or list(TOUR)
    if args[:1] == ["list"]:
        from suite.listing import list_kernels

        list_kernels()
        return
    if args[:1] in (["compare"], ["report"], ["noise"], ["headline"]):
        sys.exit(_over_runs(args[0], args[1:]))
    helped = "--help" in args or "-h" in args
    if helped:  # fusebench's commands and common overrides, then Hydra's help
        from suite.usage import text

        print(text())
    checked, sweep = None, None
    if not helped and not any(a.startswith("--") and a not in MULTIRUN_FLAGS for a in args):  # --cfg job, ...
        try:
            if problem := launcher_problem(args):
                raise ConfigError(problem)
            checked = precheck(args)
        except ConfigError as exc:
            print(f"fusebench: error: {exc}", file=sys.stderr)
            sys.exit(2)
        if any(a in MULTIRUN_FLAGS for a in args) and (sweep := sweep_dir(args)):  # its merged table is read there
            args = [*(a for a in args if not a.startswith("hydra.sweep.dir=")), f"hydra.sweep.dir={quoted(sweep)}"]
            progress.Sweep(list(checked.cases)).write(sweep)  # each job's bar counts the whole sweep's cases
    os.environ.setdefault("HYDRA_FULL_ERROR", "0")
    sys.argv = [sys.argv[0], *args]
    started = time.time()
    try:
        _hydra_main()  # a single run exits from its job, with its Result's status
    except BaseException:
        if sweep is not None:  # a job failed or was killed: Hydra skipped the multirun's end, merge what ran
            from suite.sweep.callbacks import merge_saved

            merge_saved(sweep, started)
        raise
    if checked is not None and sweep is not None and (sweep / CSV_NAME).exists():
        from suite.run.result import Result

        exit_for(Result.read(sweep), checked.strict)
