"""Theoretical occupancy from a kernel's registers, shared memory and block size, for a given SM architecture.

Fusing grows the live working set: more registers per thread or more shared memory per block means fewer
resident warps per SM, less latency hiding, and the expected gain can vanish. Occupancy here is resident warps
per SM over the maximum, limited by whichever of threads, blocks, registers or shared memory runs out first —
the same arithmetic as NVIDIA's occupancy calculator, from the published per-architecture limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SMLimits:
    name: str
    max_warps: int
    max_blocks: int
    registers: int
    """32-bit registers per SM."""
    max_regs_per_thread: int
    reg_unit: int
    """Registers are allocated per warp in units of this many."""
    smem_bytes: int
    """Shared memory per SM usable by blocks (the carve-out maximum)."""
    smem_unit: int
    smem_reserved: int
    """Shared memory the system reserves per block."""
    warp_size: int = 32


SM90 = SMLimits("sm_90", max_warps=64, max_blocks=32, registers=65536, max_regs_per_thread=255, reg_unit=256,
                smem_bytes=228 * 1024, smem_unit=128, smem_reserved=1024)  # fmt: skip
SM80 = SMLimits("sm_80", max_warps=64, max_blocks=32, registers=65536, max_regs_per_thread=255, reg_unit=256,
                smem_bytes=164 * 1024, smem_unit=128, smem_reserved=1024)  # fmt: skip
LIMITS = {"sm_90": SM90, "sm_80": SM80}


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    fraction: float
    limiter: str
    """Which resource bounds residency: threads, blocks, registers or shared memory."""


def _round_up(value: int, unit: int) -> int:
    return math.ceil(value / unit) * unit


def occupancy(threads_per_block: int, registers: int, smem_bytes: int, limits: SMLimits = SM90) -> Occupancy:
    """Resident blocks and warps per SM for one kernel; a block that cannot launch at all gives 0."""
    if threads_per_block <= 0:
        raise ValueError("threads_per_block must be positive")
    warps = math.ceil(threads_per_block / limits.warp_size)
    bounds = {"threads": limits.max_warps // warps, "blocks": limits.max_blocks}
    if registers > limits.max_regs_per_thread:
        bounds["registers"] = 0
    elif registers > 0:
        per_warp = _round_up(registers * limits.warp_size, limits.reg_unit)
        bounds["registers"] = (limits.registers // per_warp) // warps
    block_smem = _round_up(smem_bytes + limits.smem_reserved, limits.smem_unit)
    bounds["shared memory"] = limits.smem_bytes // block_smem
    limiter = min(bounds, key=lambda k: bounds[k])
    blocks = max(bounds[limiter], 0)
    return Occupancy(blocks, blocks * warps, blocks * warps / limits.max_warps, limiter)
