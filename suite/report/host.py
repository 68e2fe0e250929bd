"""The CPU a run's figures come from, as its environment.json says: every CPU figure is this host's, and "AMD EPYC"
alone does not tell a Zen 3 (AVX2) from a Zen 4 or Zen 5 (AVX-512), so the core's name travels with the model."""

from __future__ import annotations

from typing import Any


def first_job(environment: dict[str, Any]) -> dict[str, Any]:
    """A multirun whose jobs disagree keeps each job's environment under `jobs`: the first job's; else itself."""
    jobs = environment.get("jobs")
    return next(iter(jobs.values())) if isinstance(jobs, dict) and jobs else environment


def host_cpu(environment: dict[str, Any]) -> str:
    """The CPU a run's figures come from, with its core as LLVM names it and the one Numba built for where they
    differ ("AMD EPYC, znver4; Numba built for znver3"), then its data caches where environment.json records them
    ("; caches L1d 48 KiB, L2 2 MiB, L3 300 MiB"); "" where environment.json does not say."""
    env = first_job(environment)
    cpu = env.get("cpu") if isinstance(env, dict) else None
    if not isinstance(cpu, dict) or not cpu.get("model"):
        return ""
    text = str(cpu["model"])
    if core := cpu.get("microarchitecture"):
        text += f", {core}"
        if (target := cpu.get("numba_target")) and target != core:
            text += f"; Numba built for {target}"
    caches = cpu.get("caches")
    if isinstance(caches, dict) and caches:
        text += "; caches " + ", ".join(f"{name} {_size(n)}" for name, n in caches.items() if name != "L1i")
    return text


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 2**10:g} KiB"
