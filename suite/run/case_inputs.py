"""A case's inputs, float64 reference and tolerance, drawn once and shared by every implementation of the case,
and `save_io`'s .npz of them beside an implementation's output.

They live apart from the build-and-check (`suite.run.check`) because every stage that judges an output needs
them: the numerics check, the honesty checks' fresh draw (`suite.run.honesty`), and anyone re-checking a result
by hand from the files `save_io=true` writes.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np

from suite.core.registry import KernelKey
from suite.core.row import params_json
from suite.core.scenario import Params, Scenario
from suite.run.job import Job
from suite.run.stages import Check


class Inputs:
    """Inputs, float64 reference and tolerance per parameter set (the case, and its emulation slice)."""

    def __init__(self, scn: Scenario, dtype: str, seed: int) -> None:
        self.scn, self.dtype, self.seed, self.cache = scn, dtype, seed, {}

    def get(self, params: Params, fresh: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray, float]:
        """The case's inputs, reference and tolerance; with `fresh`, another draw of the same shapes (another
        seed), made once per case for the check that an output follows its inputs."""
        key = (params_json(params), fresh)
        if key not in self.cache:
            seed = self.seed if not fresh else (self.seed ^ FRESH_SEED)
            inputs = self.scn.make_inputs(params, self.dtype, np.random.default_rng(seed))
            ref = self.scn.reference(inputs, params)
            self.cache[key] = (inputs, ref, self.scn.tolerance(inputs, params, self.dtype, ref))
        return self.cache[key]


FRESH_SEED = 0x5EED
"""Mixed into the case's seed for its second draw of inputs (the check that an output follows its inputs)."""


def save_io(key: KernelKey, check: Check, job: Job, data: Inputs) -> None:
    """Inputs, output and reference of a checked implementation as .npz (save_io=true), to inspect offline."""
    if not job.io_dir or check.out is None:
        return
    inputs, ref, _ = data.get(check.run_params)
    meta = {
        "scenario": key.scenario,
        "params": check.run_params,
        "dtype": job.dtype,
        "backend": key.backend,
        "device": key.device,
        "variant": key.variant,
    }
    name = f"{key.scenario}_{zlib.crc32(params_json(check.run_params).encode()):08x}_{job.dtype}"
    path = Path(job.io_dir) / f"{name}__{key.backend}-{key.device}-{key.variant}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    out = check.out if isinstance(check.out, dict) else {"": check.out}
    refs = ref if isinstance(ref, dict) else {"": ref}
    arrays = {
        **{f"out{'_' * bool(k)}{k}": a for k, a in out.items()},
        **{f"reference{'_' * bool(k)}{k}": a for k, a in refs.items()},
    }
    np.savez(path, **inputs, **arrays, meta=json.dumps(meta, sort_keys=True))
