"""Theoretical occupancy from a kernel's registers, shared memory and block size, for a given SM architecture.

Fusing grows the live working set: more registers per thread or more shared memory per block means fewer
resident warps per SM, less latency hiding, and the expected gain can vanish. Occupancy here is resident warps
per SM over the maximum, limited by whichever of threads, blocks, registers or shared memory runs out first.

The limits per compute capability are NVIDIA's published ones: the CUDA C++ Programming Guide, "Technical
Specifications per Compute Capability" (docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/
compute-capabilities.html), and the architecture tuning guides (Ampere: 8.0 has 64 warps, 32 blocks and
164 KB of shared memory per SM, 163 KB per block, 8.6 48 warps, 16 blocks, 100 KB and 99 KB; Ada: 8.9 48 warps,
24 blocks, 100 KB and 99 KB; Hopper and Blackwell datacenter parts: 64 warps, 32 blocks, 228 KB and 227 KB; all:
64K 32-bit registers per SM, at most 255 per thread, 1024 threads per block). The arithmetic is the one of NVIDIA's
occupancy calculator and of `cuda_occupancy.h`, which the runtime's occupancy API is built on: registers are
allocated per warp in units of 256, and in each of an SM's four sub-partitions separately (a quarter of the
register file holds floor(16384 / registers-per-warp) warps; the header's per-block register checks never bind
tighter than that where, as on every architecture here, a block may use the whole register file); shared memory
is allocated per block in units of 128 bytes after adding the 1 KB the driver reserves for each block, out of
the largest carve-out of the SM, and one block may use at most the per-block maximum. The registers come from
an sm_90 build (`suite.gpu.resources`): for another architecture they are that build's, which ptxas may choose
differently for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SMLimits:
    name: str
    max_warps: int
    """Resident warps per SM (resident threads / 32)."""
    max_blocks: int
    """Resident blocks per SM."""
    registers: int
    """32-bit registers per SM."""
    max_regs_per_thread: int
    reg_unit: int
    """Registers are allocated per warp in units of this many."""
    smem_bytes: int
    """Shared memory per SM usable by blocks (the carve-out maximum)."""
    smem_per_block: int
    """The most shared memory one block may use (opt-in maximum, without the reserved part)."""
    smem_unit: int
    smem_reserved: int
    """Shared memory the system reserves per block."""
    sub_partitions: int = 4
    """Warp schedulers per SM: the register file is split evenly between them."""
    max_threads_per_block: int = 1024
    warp_size: int = 32


def _sm(name: str, warps: int, blocks: int, smem_kib: int) -> SMLimits:
    """The limits of one architecture: those that differ between the ones here, the others common to all."""
    return SMLimits(
        name,
        max_warps=warps,
        max_blocks=blocks,
        registers=65536,
        max_regs_per_thread=255,
        reg_unit=256,
        smem_bytes=smem_kib * 1024,
        smem_per_block=(smem_kib - 1) * 1024,
        smem_unit=128,
        smem_reserved=1024,
    )


SM80 = _sm("sm_80", warps=64, blocks=32, smem_kib=164)  # A100
SM86 = _sm("sm_86", warps=48, blocks=16, smem_kib=100)  # GA10x: RTX 30, A10, A40
SM89 = _sm("sm_89", warps=48, blocks=24, smem_kib=100)  # Ada: RTX 40, L4, L40
SM90 = _sm("sm_90", warps=64, blocks=32, smem_kib=228)  # H100, H200
SM100 = _sm("sm_100", warps=64, blocks=32, smem_kib=228)  # B200, GB200
LIMITS = {limits.name: limits for limits in (SM80, SM86, SM89, SM90, SM100)}
ARCHS = tuple(LIMITS)
"""The architectures occupancy can be computed for (`device.arch`)."""


def limits_for(arch: str) -> SMLimits:
    """The limits of `arch` (`sm_90`); ValueError naming the known ones for any other."""
    if arch not in LIMITS:
        raise ValueError(f"no SM limits for '{arch}'; known: {', '.join(ARCHS)}")
    return LIMITS[arch]


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    fraction: float
    limiter: str
    """Which resource bounds residency: threads, blocks, registers or shared memory."""


def _round_up(value: int, unit: int) -> int:
    return math.ceil(value / unit) * unit


def _register_bound(warps: int, registers: int, limits: SMLimits) -> int:
    """Blocks per SM the register file allows (`cudaOccMaxBlocksPerSMRegsLimit`)."""
    if registers > limits.max_regs_per_thread:
        return 0
    per_warp = _round_up(registers * limits.warp_size, limits.reg_unit)
    if per_warp == 0:
        return limits.max_blocks
    warps_per_partition = limits.registers // limits.sub_partitions // per_warp
    return warps_per_partition * limits.sub_partitions // warps


def _smem_bound(smem_bytes: int, limits: SMLimits) -> int:
    """Blocks per SM the shared memory allows (`cudaOccMaxBlocksPerSMSmemLimit`, the default carve-out)."""
    if smem_bytes > limits.smem_per_block:
        return 0
    return limits.smem_bytes // _round_up(smem_bytes + limits.smem_reserved, limits.smem_unit)


def occupancy(threads_per_block: int, registers: int, smem_bytes: int, limits: SMLimits = SM90) -> Occupancy:
    """Resident blocks and warps per SM for one kernel; a block that cannot launch at all gives 0. Where two
    resources bind equally, the limiter named is the first of threads, blocks, registers, shared memory."""
    if threads_per_block <= 0:
        raise ValueError("threads_per_block must be positive")
    warps = math.ceil(threads_per_block / limits.warp_size)
    fits = threads_per_block <= limits.max_threads_per_block
    bounds = {
        "threads": limits.max_warps // warps if fits else 0,
        "blocks": limits.max_blocks,
        "registers": _register_bound(warps, registers, limits),
        "shared memory": _smem_bound(smem_bytes, limits),
    }
    limiter = min(bounds, key=lambda k: bounds[k])
    blocks = max(bounds[limiter], 0)
    return Occupancy(blocks, blocks * warps, blocks * warps / limits.max_warps, limiter)
