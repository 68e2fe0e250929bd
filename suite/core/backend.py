"""The Backend protocol: everything the machinery needs to know about a kernel library, declared by its package.

A backend package (in-tree under `backends/`, or a third party's in the `fusebench.backends` entry-point group)
subclasses `Backend`, registers one instance with `register_backend` on import, and registers its kernels with
`@kernel`. The machinery then asks the backend, never the library, for:

- its targets: one `Target` per device it writes kernels for (how arrays reach it, how it runs here);
- its options: a schema of `Option`s (name, type, range, default, one-line help), validated before any work;
- its copies (`Copy`: a launcher, and whether its stores may stream), which each device's bandwidth ceiling is
  measured with;
- how it compiles a recorded kernel (`suite.core.kernelspec`) for `ARCH` (`compile`, giving a `Build`: PTX for
  the suite to assemble, or the assembler's log of a build the backend ran itself), and whether that must
  happen in a process where no interpreter or simulator is switched on (`compile_isolated`);
- how it reads a loaded kernel's attributes on a GPU (`loaded_attributes`);
- its launch stream: how a launch is made to run on the suite's shared CUDA stream (`launch_stream`);
- what decides its compiles (`toolchain`: package versions, environment), so cached results go stale with it.

The backend hands over PTX or a log, never numbers: reading ptxas's report and the occupancy it implies is the
suite's job, the same for every backend.

Every method has a default that means "this backend has none", so a CPU-only backend implements nothing but
its name and targets.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar

from suite.core.errors import ConfigError
from suite.core.registry import Launcher
from suite.core.targets import Target, register_target


@dataclass(frozen=True)
class Option:
    """One `backend_options.<backend>.<name>` setting: its type, valid values, default and a line of help.

    Integers may be bounded (`low`..`high`), required to be a multiple of `step` or a power of two; strings and
    other values may be limited to `choices`. `default=None` means "each kernel chooses" (the help says how)."""

    name: str
    help: str
    default: Any = None
    kind: type = int
    low: int | None = None
    high: int | None = None
    step: int | None = None
    power_of_two: bool = False
    choices: tuple[Any, ...] = ()

    def describe(self) -> str:
        """The valid values in words: 'a power of two in 16..65536', 'one of default, max-autotune'."""
        if self.choices:
            return f"one of {', '.join(str(c) for c in self.choices)}"
        if self.kind is bool:
            return "true or false"
        what = "a power of two" if self.power_of_two else f"a multiple of {self.step}" if self.step else "an integer"
        if self.kind is not int:
            what = f"a {self.kind.__name__}"
        if self.low is not None and self.high is not None:
            return f"{what} in {self.low}..{self.high}"
        if self.low is not None:
            return f"{what} >= {self.low}"
        return what

    def valid(self, value: Any) -> bool:
        if self.choices:
            return value in self.choices
        if self.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            return False
        if not isinstance(value, self.kind):
            return False
        if self.kind is not int:
            return True
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return False
        if self.step and value % self.step:
            return False
        return not (self.power_of_two and value & (value - 1))


ARCH = (9, 0)
"""The GPU architecture every kernel's resources are reported for (H100/H200), with or without a GPU here."""


@dataclass(frozen=True)
class Build:
    """One recorded kernel compiled for `ARCH`, as a backend hands it over for its resources to be read.

    Either `ptx`, which the suite assembles with ptxas's `-v` (trying `prefer`, "ptxas" or "nvjitlink", first,
    then the other), or `log`, the `-v` log of an assembly the backend ran itself, which `assembler` names.
    `kernel` is the entry to read (None: the only one with registers). `extra_smem` is shared memory the
    launch adds to what ptxas reports, fixed at compile time (Triton's own).
    """

    kernel: str | None
    ptx: str | None = None
    log: str | None = None
    assembler: str = ""
    extra_smem: int = 0
    prefer: str = "ptxas"
    ptxas: str | None = None
    """The ptxas the backend's own toolchain ships (what its runtime would assemble with); None: any found."""
    ptxas_options: tuple[str, ...] = ()
    max_registers: int | None = None
    module_shared: bool = False
    """Count the shared arrays the PTX declares at module scope where ptxas reports none for the entry
    (Numba puts `cuda.shared.array`s there, and nvJitLink's log leaves them out)."""

    def __post_init__(self) -> None:
        if (self.ptx is None) == (self.log is None):
            raise ValueError("a Build carries either PTX or an assembler's log")


@dataclass(frozen=True)
class Copy:
    """One copy a device's bandwidth ceiling is measured with (see `suite.run.ceiling`).

    `method` names it in ceilings.json and the report. `streams` is True where its stores may be non-temporal
    (memcpy switches to them on large buffers and skips the read of each line it writes): faster than any
    kernel storing the ordinary way can be, so the ceiling holds kernels to the copies that do not."""

    method: str
    launch: Launcher
    streams: bool = False


SLOWDOWN = (
    Option(
        "slowdown_pct",
        "to test a regression gate: each launch of `slowdown_variant` on this backend also "
        "spins for this percent of its own time, measured when it is built (suite.run.slowdown); 0: off",
        0,
        low=0,
        high=100,
    ),
    Option("slowdown_variant", "the variant slowdown_pct slows", "fused", kind=str),
)
"""Options every backend takes, beside its own: a kernel made slower on purpose, to check what notices."""


class Backend:
    """Base class of a backend; subclasses set `name` and `options` and override what they have."""

    name: ClassVar[str]
    options: ClassVar[tuple[Option, ...]] = ()
    packages: ClassVar[tuple[str, ...]] = ()
    """Distributions the backend is made of: their versions go into every row's provenance."""
    compile_isolated: ClassVar[bool] = False
    """True where `compile` must run in a process with neither the Triton interpreter nor the Numba CUDA
    simulator switched on (both replace the compiler the moment they are imported)."""

    def __init__(self, *targets: Target) -> None:
        self.targets: dict[str, Target] = {t.device: t for t in targets}

    def defaults(self) -> dict[str, Any]:
        """The options' defaults, `None` ones left out (the kernels choose)."""
        return {o.name: o.default for o in self.options if o.default is not None}

    def schema(self) -> tuple[Option, ...]:
        """The backend's own options, then those every backend takes (`SLOWDOWN`)."""
        return (*self.options, *SLOWDOWN)

    def option(self, opts: Mapping[str, Any], name: str) -> Any:
        """`opts[name]`, or the schema's default where the caller left it out (a test, a compile without a run):
        the schema is the one place a default is written, and `check_options` has already judged the value."""
        given = opts.get(name)
        return given if given is not None else next(o.default for o in self.schema() if o.name == name)

    def in_force(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """The options a kernel of this backend runs with: the defaults, replaced by what the run set (`given`);
        options left to each kernel (None) are absent."""
        return {**self.defaults(), **{k: v for k, v in (given or {}).items() if v is not None}}

    def check_options(self, given: Mapping[str, Any] | None) -> None:
        """Raise ConfigError naming the valid choices for an unknown option or a value out of range."""
        schema = {o.name: o for o in self.schema()}
        for key, value in (given or {}).items():
            if key not in schema:
                valid = ", ".join(schema) or "none"
                raise ConfigError(f"unknown option backend_options.{self.name}.{key}; valid: {valid}")
            if value is not None and not schema[key].valid(value):
                raise ConfigError(f"backend_options.{self.name}.{key}={value} must be {schema[key].describe()}")

    def copies(self, device: str, n: int, stream: int | None) -> list[Copy]:
        """Copies of `n` float32 values on `device` (already warmed up), for the bandwidth ceiling; none where
        the backend has no copy there or cannot run on it.

        `stream` is the suite's shared CUDA stream on a GPU; every copy must run on it."""
        return []

    def compile(self, recipe: Mapping[str, Any]) -> Build:
        """Compile a recorded kernel for `ARCH` from its recipe (`KernelSpec.recipe` as a mapping, values frozen
        as `suite.core.kernelspec.freeze` leaves them). Raise where the backend has no compiler for it."""
        raise NotImplementedError(f"backend {self.name} does not compile kernels for a GPU architecture")

    def loaded_attributes(self, live: Any) -> dict[str, int]:
        """Registers (`regs`), local memory (`local_bytes`), shared memory (`smem_bytes`) and, where known,
        `max_threads_per_block` of a kernel as loaded on this machine's GPU (`KernelSpec.live`)."""
        raise NotImplementedError(f"backend {self.name} cannot read a loaded kernel's attributes")

    def launch_stream(self, handle: int | None) -> Callable[[], contextlib.AbstractContextManager]:
        """A factory of the context every launch runs in so that it lands on the CUDA stream `handle`;
        `contextlib.nullcontext` where `handle` is None or the target is not native (no stream to honour).

        The context's `as` value is the library's stream object where a launch takes it as an argument (Numba),
        else None."""
        return contextlib.nullcontext

    def toolchain(self) -> dict[str, str]:
        """What decides this backend's compiles besides a kernel's recipe and source: package versions and
        environment settings, by name (by default the installed versions of `packages`)."""
        return versions(*self.packages)


def versions(*distributions: str) -> dict[str, str]:
    """The installed versions of `distributions`, by name; those not installed are left out."""
    found = {}
    for name in distributions:
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    return found


BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Make `backend` and its targets known to the suite (called once, when its package is imported)."""
    if backend.name in BACKENDS and BACKENDS[backend.name] is not backend:
        raise ValueError(f"backend {backend.name!r} registered twice")
    BACKENDS[backend.name] = backend
    for target in backend.targets.values():
        register_target(target)
    return backend
