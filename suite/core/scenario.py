"""What a scenario family provides to the suite, and the table of scenarios its packages register.

A scenario says *what* is computed: its inputs, the float64 reference, size presets, the canonical unfused
decomposition and its traffic ledger, and the tolerance its outputs are held to. Backends say *how*.

It also says how its cases read in a report: the label of a line, the order of the lines, its own charts and
report sections. Every such hook is declared here with a default, so the machinery (the runner, the generic
charts, the report) asks any scenario the same questions and knows no family by name; a family overrides what
it has. Families are the packages under `scenarios/` and those of the `fusebench.scenarios` entry-point group,
imported once per process by `discover`.
"""

from __future__ import annotations

import importlib
import itertools
import pkgutil
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import ConfigError
from suite.core.ledger import VariantLedger
from suite.core.tolerances import Tolerance

if TYPE_CHECKING:
    import pandas as pd

Params = dict[str, Any]


class Scenario:
    name: ClassVar[str]
    inputs: ClassVar[tuple[str, ...]]
    variants: ClassVar[tuple[str, ...]] = ("fused", "unfused")
    baseline: ClassVar[str] = "unfused"
    pairs: ClassVar[tuple[tuple[str, str], ...]] = (
        ("fused", "unfused"),
        ("compiled", "eager"),
        ("library", "eager"),
        ("library", "unfused"),
    )
    """(candidate, baseline) variant pairs that get a paired speedup and a verdict on the same backend/device;
    a candidate is compared with the first of its baselines that was timed beside it."""
    rivals: ClassVar[tuple[tuple[str, str], ...]] = (("fused", "compiled"),)
    """(candidate, rival) variant pairs compared across backends on the same device: a hand-written kernel
    against what a user could pick instead (the compiler's fusion of the same decomposition), both timed in the
    same interleaved rounds."""
    dtypes: ClassVar[tuple[str, ...]] = DTYPES
    """Storage dtypes the family can be swept in (the run's `dtype` picks among them; float32 and float16 by
    default). A backend without one gives `skipped` rows (`Target.dtype_refusal`)."""
    axes: ClassVar[tuple[str, ...]]
    """Parameter names; each is a sweep axis in the config and a key of `params` in results.csv."""
    presets: ClassVar[dict[str, Params]]
    """Preset name -> value lists per axis: `S` (tests), `M` (the default run), `L`."""
    size_axis: ClassVar[str]
    """The axis charts put on x when they plot against problem size."""
    memory_bound: ClassVar[bool] = False
    """Its time follows the bytes its ledger counts at every size, so `preset=DRAM` sizes it along `size_axis`
    past the last-level cache (suite.run.dram_sizes). False: a GEMM or a score matrix sets its time, and a larger
    case measures more FLOPs, not the memory boundary."""
    list_axes: ClassVar[tuple[str, ...]] = ()
    """Axes whose one value is itself a list (a chain of ops, a tile): a flat list is one value, a list of
    lists a sweep. For every other axis a list is a sweep."""
    checks: ClassVar[list[Params]] = []
    """Small, awkward cases every kernel is tested on (tests/test_kernels.py), emulated kernels included."""
    config: ClassVar[type | None] = None
    """The structured config of the scenario's Hydra node (a dataclass: `name` and one field per axis), stored as
    `scenario/base_<name>` by `register_configs`; its YAML file starts from it, so Hydra refuses a mistyped axis.
    None: the node is whatever the YAML says (the plan still refuses an axis the scenario lacks)."""
    size_unit: ClassVar[str] = ""
    """What one step of the size axis counts ('elements'), for the charts' x label; empty: no unit is shown."""
    limits: ClassVar[Tolerance] = Tolerance()
    """The floor and ceiling per dtype its `tolerance` is held within (suite.core.tolerances); by default a few
    units in the last place of the stored result, with no ceiling."""
    resolvers: ClassVar[dict[str, Callable[..., Any]]] = {}
    """Functions its Hydra files interpolate, registered as OmegaConf resolvers `fusebench_<key>` by
    `register_configs`: what a family derives from a model's shapes (the normalization tile that holds a row of
    `cols`: `${fusebench_tile:${model.hidden_size}}`). Families may share one only by declaring the same function."""
    model_tour: ClassVar[str | None] = None
    """The experiment that sets its axes from a model's published shapes (conf/experiment/<it>.yaml, or a node a
    plug-in stores in Hydra's ConfigStore as `experiment/<it>`): `model=<name>` with no scenario named runs every
    family's (`model_experiments`). None: the family sits out the model tour."""
    train_tour: ClassVar[str | None] = None
    """The experiment that times the family's train phase (forward + backward as one call) at sizes past the
    last-level cache (conf/experiment/<it>.yaml): `python -m suite training` runs every family's
    (`training_experiments`). None: the family has no backward pass, or sits the training tour out."""
    gpu_check: ClassVar[str | None] = None
    """The experiment the GPU check (`python -m suite gpu-check`) sweeps the family's forward with: its sizes on an
    H100-class device, in the dtypes it is used in (conf/experiment/<it>.yaml, or a node a plug-in stores as
    `experiment/<it>`). None: the check runs its `M` preset on the GPU."""
    summary: ClassVar[Params] = {}
    """The case the family's GPU summary leads with (axis -> value; an axis not named matches any value): the GPU
    check builds torch.compile there only, runs the backward and train phases there, and keeps it when its budget
    drops the other sizes. Empty: the largest case of the sweep."""
    captions: ClassVar[dict[str, str]] = {}
    composes: ClassVar[tuple[str, ...]] = ()
    """The families a composed scenario runs (a decoder layer's ops). Its `report_sections` are handed their rows
    of the run too, beside its own: the ops timed alone at the same shapes are what its prediction reads."""
    """Captions of the family's own charts in the report, by kind (the file name without `_<name>.png`); a chart
    not named here is captioned with its kind in words."""

    def cases(self, axes: dict[str, list[Any]]) -> list[Params]:
        """The cartesian product of the axes' value lists, each case checked."""
        names = list(axes)
        out = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(axes[n] for n in names))]
        for params in out:
            self.check(params)
        return out

    def check(self, params: Params) -> None:
        """Raise ConfigError naming the bad value and the valid choices."""

    def variants_for(self, params: Params) -> tuple[str, ...]:
        """The variants a case compares (matmul without an epilogue has no fused/unfused pair)."""
        return self.variants

    def size(self, params: Params) -> int:
        """Elements of the main input, for charts and for the emulation limit."""
        return int(params[self.size_axis])

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        """Each input's shape (all inputs are of the case's dtype) without making the inputs: kernels built for
        the case itself on untouched arrays report the resources a GPU would use while emulation runs a slice."""
        raise NotImplementedError

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        """The output computed in float64 from the (already rounded) inputs."""
        raise NotImplementedError

    def output_shape(self, params: Params) -> tuple[int, ...]:
        raise NotImplementedError

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        raise NotImplementedError

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """The largest relative error an output may have (suite.core.numerics). A family whose error depends on
        the case derives it (most: four times the error of the unfused decomposition done by NumPy in `dtype`
        storage) and clips it with `self.limits.clip`; by default it is the floor of `limits`."""
        return self.limits.clip(dtype, 0.0)

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """A smaller case with the same structure, for the interpreter and the simulator."""
        return params

    def footprint_bytes(self, params: Params, dtype: str, variant: str) -> int | None:
        """Device memory `variant` holds while it runs, for the footprint guard: its ledger's modeled peak
        (`VariantLedger.peak_bytes`); None where the family has no model (the guard then lets the case run, and
        planning uses a generic estimate). A family overrides this only to count what its ledger cannot."""
        try:
            found = self.ledger(params, dtype).get(variant)
        except NotImplementedError:
            return None
        return found.peak_bytes if found is not None else None

    # How its rows read in charts and the report. The machinery calls these on tidy rows of results.csv
    # (suite.kit.tidy); rows of a scenario not installed here get these defaults.

    def series(self, params: Params, size_axis: str) -> str:
        """The case without its size: what stays fixed along one line of a chart and names it in tables
        ('cols=4096, rows=512, tile=4096'). `size_axis` is the axis left out ('' keeps every axis)."""
        parts = [f"{key}={value}" for key, value in sorted(params.items()) if key != size_axis]
        return ", ".join(parts) or "all"

    def title(self, params: Params, size_axis: str) -> str:
        """A chart facet's title for the case: its series label unless the family shortens it."""
        return self.series(params, size_axis)

    def order(self, params: Params) -> float:
        """Where the case's line sorts before its label is compared (labels read digit runs as numbers)."""
        return 0

    def charts(self, rows: pd.DataFrame, outdir: Path) -> list[Path]:
        """Write the family's own charts of its tidy rows (every status) into `outdir`; return their paths.

        Called after the generic ones (time, speedup, bandwidth), inside their seaborn style; none by default."""
        return []

    def report_sections(self, rows: pd.DataFrame) -> list[str]:
        """Markdown sections of the family's own, placed after the charts in its part of the report. `rows` are
        the family's, and those of the families it `composes` where the run has any."""
        return []


SCENARIOS: dict[str, Scenario] = {}
LOAD_ERRORS: dict[str, str] = {}
"""Families that failed to import (a package under `scenarios/` or an entry point), with the reason."""
_discovered = False


def register(cls: type[Scenario]) -> type[Scenario]:
    SCENARIOS[cls.name] = cls()
    return cls


def discover(package: str = "scenarios") -> dict[str, Scenario]:
    """Import every scenario family once per process: the packages under `package`, then the entry points of
    the `fusebench.scenarios` group. A family that fails to import is recorded in LOAD_ERRORS, not raised: one
    broken family must not take the others down. An entry point naming a Scenario subclass is registered."""
    global _discovered
    if _discovered:
        return SCENARIOS
    _discovered = True
    root = importlib.import_module(package)
    for info in pkgutil.iter_modules(root.__path__, prefix=f"{package}."):
        _load(info.name.removeprefix(f"{package}."), lambda name=info.name: importlib.import_module(name))
    for ep in entry_points(group="fusebench.scenarios"):
        _load(ep.name, ep.load)
    return SCENARIOS


def _load(name: str, load: Callable[[], Any]) -> None:
    try:
        found = load()
    except Exception as exc:  # a family's bug or missing dependency is reported where it is used
        LOAD_ERRORS[name] = f"{type(exc).__name__}: {exc}"
        return
    registered = {type(scn) for scn in SCENARIOS.values()}
    if isinstance(found, type) and issubclass(found, Scenario) and found not in registered:
        register(found)


def get(name: str) -> Scenario:
    """The family registered as `name`; ConfigError naming every loaded family, and every one that failed to
    load with its error (first, where it is the one asked for)."""
    scenarios = discover()
    if name not in scenarios:
        raise ConfigError(unknown(name))
    return scenarios[name]


def unknown(name: str) -> str:
    """The one line that refuses scenario `name`: its own import error where it failed to load, else the valid
    names (in-tree and plug-in alike) and the families that failed to load, with why."""
    if name in LOAD_ERRORS:
        return f"scenario '{name}' failed to load: {LOAD_ERRORS[name]}"
    failed = "".join(f"; {family} failed to load ({why})" for family, why in sorted(LOAD_ERRORS.items()))
    return f"unknown scenario '{name}'; valid: {', '.join(sorted(discover()))}{failed}"


def plug_ins(package: str = "scenarios") -> list[str]:
    """Families registered from outside the tree's `package` (an entry point, a `plugins=` module, a test's):
    those no list in the suite can name, so that what the suite derives from the registry takes them in."""
    return [name for name, scn in discover().items() if not type(scn).__module__.startswith(f"{package}.")]


def training_experiments() -> list[str]:
    """The training tour: every registered family's `train_tour` experiment, each once, by name."""
    return sorted({scn.train_tour for scn in discover().values() if scn.train_tour})


def model_experiments() -> list[str]:
    """The model tour: every registered family's `model_tour` experiment, each once, by name."""
    return sorted({scn.model_tour for scn in discover().values() if scn.model_tour})


UNKNOWN = Scenario()
"""Stands for a scenario not installed here (a results table from elsewhere): every hook at its default."""


def lookup(name: str) -> Scenario:
    """The scenario whose rows are named `name`, or UNKNOWN: the report reads any table."""
    return discover().get(name, UNKNOWN)


def register_configs(conf: Path | None = None) -> None:
    """Store each scenario's structured config in Hydra's ConfigStore as `scenario/base_<name>`, and, for a family
    with no YAML file of its own under `conf/scenario/` (a plug-in's), its node as `scenario/<name>` too: every
    family is selected by its registered name (`scenario=<name>`), whatever its origin. A family without a
    structured config gets a node of its name and its axes, each null (the preset's values). Then every family's
    `resolvers`."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    yaml_dir = (conf or Path(__file__).resolve().parents[2] / "conf") / "scenario"
    for name, scn in discover().items():
        if scn.config is not None:
            store.store(group="scenario", name=f"base_{name}", node=scn.config)
        if not (yaml_dir / f"{name}.yaml").exists():
            node = scn.config(name=name) if scn.config is not None else {"name": name, **dict.fromkeys(scn.axes)}
            store.store(group="scenario", name=name, node=node)
    _register_resolvers()


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    seen: dict[str, tuple[str, Callable[..., Any]]] = {}
    for name, scn in discover().items():
        for key, function in scn.resolvers.items():
            family, earlier = seen.setdefault(key, (name, function))
            if earlier is not function:
                raise ValueError(f"scenarios {family} and {name} both declare a resolver fusebench_{key}")
            OmegaConf.register_new_resolver(f"fusebench_{key}", function, replace=True)
