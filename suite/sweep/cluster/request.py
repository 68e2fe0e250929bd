"""What a sweep asks SLURM for, and whether SLURM can give it, checked before any job is queued.

The launcher's fields (conf/hydra/launcher/slurm.yaml) follow the sweep: `gpus_per_node` asks for one GPU per
job where the sweep's device includes cuda and for none with `device=cpu` (the `fusebench_slurm_gpus` resolver),
so a CPU sweep runs on a CPU partition. The job array is then shown to `sbatch --test-only` as submitit will
submit it: a request the partition cannot satisfy (more CPUs, memory or GPUs than its nodes have, an unknown
partition) is one line naming what was asked, what the nodes have and the fields to change, instead of an sbatch
error after Hydra has started the sweep.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

FIELDS_HINT = "hydra.launcher.cpus_per_task=, mem_gb=, gpus_per_node=, partition="
_NOT_SBATCH = {"submitit_folder", "max_num_timeout", "_target_"}
"""Launcher fields that configure Hydra or submitit's executor, not the sbatch request."""


def gpus(targets: Iterable[str]) -> int | None:
    """GPUs per job for a sweep on these devices: one where it runs on cuda, none (not asked at all) without."""
    return 1 if "cuda" in {str(t) for t in targets} else None


OmegaConf.register_new_resolver("fusebench_slurm_gpus", gpus, replace=True)
"""`${fusebench_slurm_gpus:${device.targets}}`: the SLURM launcher's default `gpus_per_node`."""


def launcher_params(cfg: Any) -> dict[str, Any]:
    """The launcher's fields from a config composed with its `hydra` node, resolved as Hydra resolves them."""
    return dict(OmegaConf.to_container(cfg.hydra.launcher, resolve=True))


def executor(params: dict[str, Any], folder: str | Path) -> Any:
    """submitit's SLURM executor set up from the launcher's fields as hydra-submitit-launcher sets it up."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    init = {f"slurm_{k}": v for k, v in params.items() if k == "max_num_timeout"}
    ex = submitit.AutoExecutor(folder=str(folder), cluster="slurm", **init)
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    ex.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items() if k not in _NOT_SBATCH})
    return ex


def asked(params: dict[str, Any]) -> str:
    """The request in words: '8 CPUs, 64 GB and 1 GPU per job in partition gpu'."""
    cpus = params.get("cpus_per_task") or 1
    parts = [f"{cpus} CPU{'s' if cpus != 1 else ''}"] + ([f"{params['mem_gb']} GB"] if params.get("mem_gb") else [])
    gpu = params.get("gpus_per_node") or params.get("gpus_per_task") or params.get("gres")
    parts.append(f"{gpu} GPU{'s' if gpu != 1 else ''}" if gpu else "no GPU")
    where = f"partition {params['partition']}" if params.get("partition") else "the default partition"
    return f"{', '.join(parts[:-1])} and {parts[-1]} per job in {where}"


def nodes(partition: str | None, run: Callable[..., Any] = subprocess.run) -> str:
    """What the partition's nodes offer, from sinfo: '; its nodes have at most 2 CPUs, 23 GB and no GPU'."""
    command = ["sinfo", "--noheader", "--format=%c|%m|%G"] + ([f"--partition={partition}"] if partition else [])
    done = run(command, capture_output=True, text=True, timeout=60)
    rows = (
        [line.split("|") for line in done.stdout.splitlines() if line.count("|") == 2] if done.returncode == 0 else []
    )
    cpus = [int(c.rstrip("+")) for c, _, _ in rows if c.rstrip("+").isdigit()]
    mem = [int(m.rstrip("+")) for _, m, _ in rows if m.rstrip("+").isdigit()]
    if not cpus or not mem:
        return ""
    gres = sorted({g for _, _, g in rows if g not in ("(null)", "")})
    return f"; its nodes have at most {max(cpus)} CPUs, {max(mem) / 1024:.0f} GB and {', '.join(gres) or 'no GPU'}"


def problem(params: dict[str, Any], jobs: int, run: Callable[..., Any] = subprocess.run) -> str | None:
    """One line when SLURM would refuse the sweep's job array of `jobs` jobs (sbatch --test-only), None when it
    would queue it. `params`: the launcher's fields (`launcher_params`)."""
    if shutil.which("sbatch") is None:
        return "hydra/launcher=slurm needs SLURM's commands (sbatch, squeue) on this machine's PATH"
    with tempfile.TemporaryDirectory(prefix="fusebench-sbatch-") as tmp:
        inner = executor(params, tmp)._executor  # submitit's SlurmExecutor: its script is what will be submitted
        inner.parameters["map_count"] = max(1, jobs)
        script = Path(tmp) / "check.sh"
        script.write_text(inner._make_submission_file_text("true", "check"))
        done = run(["sbatch", "--test-only", str(script)], capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        return None
    said = "; ".join(line.removeprefix("sbatch: error: ").strip() for line in done.stderr.splitlines() if line.strip())
    gpu_hint = " (device=cpu asks for none)" if params.get("gpus_per_node") else ""
    return (
        f"hydra/launcher=slurm: SLURM would refuse {asked(params)} ({said or f'status {done.returncode}'})"
        f"{nodes(params.get('partition'), run)}; set {FIELDS_HINT}{gpu_hint}"
    )
