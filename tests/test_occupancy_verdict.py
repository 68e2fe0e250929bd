"""The occupancy calculator against hand-worked sm_90 cases, and the verdict on synthetic paired timings."""

from __future__ import annotations

import numpy as np
import pytest

from suite.core.fusion import compare, efficiency, verdict
from suite.gpu.occupancy import SM90, occupancy

# (threads/block, registers/thread, static smem bytes) -> (blocks/SM, warps/SM, limiter), worked by hand:
# warps/block = ceil(threads/32); registers per warp rounded up to 256; smem per block + 1 KiB reserved,
# rounded up to 128 B, out of 228 KiB; at most 64 warps and 32 blocks per SM.
HAND = [
    ((256, 32, 0), (8, 64, "threads")),  # 1024 regs/warp -> 64 warps by registers too: full occupancy
    ((256, 64, 0), (4, 32, "registers")),  # 2048 regs/warp -> 32 warps -> 4 blocks of 8 warps
    ((128, 255, 0), (2, 8, "registers")),  # 8160 -> 8192 regs/warp -> 8 warps -> 2 blocks of 4
    ((1024, 16, 48 * 1024), (2, 64, "threads")),  # smem allows 4 blocks, threads only 2
    ((128, 32, 100 * 1024), (2, 8, "shared memory")),  # 103,424 B/block -> 2 blocks of 4 warps
    ((32, 8, 0), (32, 32, "blocks")),  # tiny blocks: the 32-block limit binds
    ((100, 40, 0), (12, 48, "registers")),  # 4 warps/block; 1280 regs/warp -> 51 warps -> 12 blocks
]


@pytest.mark.parametrize(("args", "expected"), HAND, ids=[str(a) for a, _ in HAND])
def test_occupancy_hand_cases(args, expected):
    occ = occupancy(*args, limits=SM90)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limiter) == expected
    assert occ.fraction == pytest.approx(expected[1] / 64)


def test_a_kernel_over_the_register_limit_cannot_launch():
    assert occupancy(128, 256, 0).blocks_per_sm == 0


def _paired(ratio: float, noise: float, rounds: int = 40, seed: int = 5) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    drift = 1 + 0.3 * np.sin(np.arange(rounds) / 3)  # machine drift shared by both in each round
    fused = 1.0 * drift * rng.lognormal(0, noise, rounds)
    unfused = ratio * drift * rng.lognormal(0, noise, rounds)
    return list(unfused), list(fused)


def test_clear_win_pays():
    c = compare(*_paired(2.0, 0.05))
    assert c.verdict == "pays" and 1.8 < c.lo < c.speedup < c.hi < 2.2


def test_clear_loss_loses():
    c = compare(*_paired(0.6, 0.05))
    assert c.verdict == "loses" and c.hi < 1


def test_overlap_is_neutral():
    c = compare(*_paired(1.0, 0.2))
    assert c.verdict == "neutral" and c.lo < 1 < c.hi


def test_an_interval_inside_or_across_the_band_is_neutral():
    assert verdict(1.004, 1.03) == "neutral"  # excludes 1, but the gain may be 0.4%
    assert verdict(0.97, 0.996) == "neutral"
    assert verdict(1.021, 1.05) == "pays" and verdict(0.95, 0.979) == "loses"


def test_drift_alone_does_not_decide():
    """Paired rounds cancel drift that two medians of unpaired samples would not."""
    c = compare(*_paired(1.0, 0.001))
    assert c.verdict == "neutral" and abs(c.speedup - 1) < 0.01


def test_efficiency_is_saved_time_over_predicted_time():
    # 1 GB removed at 10 GB/s should save 100 ms; 80 ms saved -> 0.8
    assert efficiency(300.0, 220.0, 10**9, 10.0) == pytest.approx(0.8)
    assert efficiency(1.0, 1.0, 0, 10.0) is None
