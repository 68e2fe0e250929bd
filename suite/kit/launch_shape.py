"""Launch settings chosen from a case's shape, shared by the GPU backends, and how the choice is recorded.

An elementwise kernel over n values wants enough blocks to fill every SM a few times over, and no more: past
that, extra blocks only add scheduling work, so the grid is capped at `WAVES` full waves of resident blocks and
each thread walks the rest with a grid-stride loop; a small n gets one element per thread, smaller blocks so
that every SM has one, and no more threads than it has elements (rounded up to a warp). Row kernels take their
threads from `suite.kit.launch.row_threads` and their tiles from the case. The SM count comes from the device where there is one, else from `NOMINAL`, the
architecture the resource report compiles for, so a machine without a GPU makes the same choice as an H100.

What a launcher chose goes into its `notes` (`launch_notes`), which the suite copies into the row's `extra`:
the settings, the grid, and whether each came from the user's `backend_options` or from the shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from suite.kit.launch import cdiv

WARP = 32
WAVES = 4
"""Full waves of resident blocks an elementwise grid is capped at: enough to hide the tail of the last wave
(a quarter of the work at most idles), few enough that each thread loops over several elements."""


@dataclass(frozen=True)
class Device:
    """What a grid is sized for: SMs and resident threads per SM, and where the numbers came from."""

    sms: int
    threads_per_sm: int
    source: str


NOMINAL = Device(132, 2048, "nominal sm_90 (H100 SXM/H200)")
"""Used where no device answers (interpreter, simulator, compile-only): the architecture kernels compile for."""


FLAT_THREADS = 256
"""Threads per block of a flat kernel over many elements when no option sets them: 8 blocks fill an SM's 2048
threads, each block small enough that registers never cap occupancy (CUDA's Best Practices Guide)."""
MIN_FLAT_THREADS = 64
"""The smallest block the shape's choice halves down to: an SM holds at most 32 resident blocks (sm_80 and
sm_90), so blocks of a warp would leave half of its 2048 threads idle at best."""


def flat_threads(n: int, threads: int | None, device: Device = NOMINAL) -> int:
    """Threads per block of a kernel with a thread per element of `n`: `threads` (the backend's `block` option)
    where set; None chooses from the shape, FLAT_THREADS, halved (to MIN_FLAT_THREADS at least) while that
    leaves some SM without a block, the rule of the Triton chain's BLOCK (`backends.triton.launch.chain_config`). Either way
    no more than n rounded up to a warp."""
    if threads is None:
        threads = FLAT_THREADS
        while threads > MIN_FLAT_THREADS and cdiv(n, threads) < device.sms:
            threads //= 2
    return min(threads, max(WARP, cdiv(max(n, 1), WARP) * WARP))


def elementwise_launch(n: int, threads: int | None, device: Device = NOMINAL) -> tuple[int, int]:
    """(threads per block, blocks) for a grid-stride kernel over `n` elements: `flat_threads` of `threads` (the
    backend's option, None for the shape's choice), and at most `WAVES` waves of resident blocks; never zero
    blocks (an empty launch is still a valid one)."""
    threads = flat_threads(n, threads, device)
    resident = max(1, device.threads_per_sm // threads) * device.sms
    return threads, max(1, min(cdiv(n, threads), WAVES * resident))


def block_chosen_by(option: int | None) -> str:
    """`chosen_by` of a CUDA launch whose grid always follows the shape and whose block follows the `block`
    option where it is set."""
    return "shape" if option is None else "option+shape"


def chosen_by(given: Mapping[str, Any], names: Iterable[str]) -> str:
    """`option` where the user set every one of `names`, `shape` where none, `option+shape` in between."""
    names = list(names)
    set_ = [name for name in names if given.get(name) is not None]
    return "option" if len(set_) == len(names) else "shape" if not set_ else "option+shape"


def launch_notes(settings: Mapping[str, Any], grid: Iterable[int] | int, by: str, **more: Any) -> dict[str, Any]:
    """The `notes` of a launcher: {"launch": {settings..., "grid": [...], "chosen_by": by, more...}}."""
    grid_list = [int(grid)] if isinstance(grid, int) else [int(g) for g in grid]
    return {"launch": {**settings, "grid": grid_list, "chosen_by": by, **more}}
