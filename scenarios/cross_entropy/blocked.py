"""The mean token loss a block of logits at a time, so that a float64 reference fits at a model's vocabulary.

At Llama-3's 128,256 columns, 2,048 tokens of float64 logits are 2 GiB, and a log-softmax written whole holds
three such arrays (the shifted logits, their exponentials, the result); linear cross-entropy's float64 W alone
would be 4 GiB at hidden 4,096. Here no block is larger than `BLOCK_BYTES`: rows of the logits where they exist
(cross_entropy), columns of W where the logits are a GEMM's (linear_cross_entropy), with an online logsumexp
across the column blocks. Both give the loss `mean_loss` gives, summed in another order (float64: the difference
is far below any tolerance).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from scenarios.cross_entropy.constants import IGNORE_INDEX

BLOCK_BYTES = 64 << 20
"""The largest float64 block a reference holds at once (its temporaries are a few such blocks)."""


def spans(length: int, width_bytes: int) -> Iterator[tuple[int, int]]:
    """[start, stop) spans of `length` items of `width_bytes` each, each span within `BLOCK_BYTES`."""
    step = max(1, BLOCK_BYTES // max(1, width_bytes))
    for start in range(0, length, step):
        yield start, min(length, start + step)


def log_softmax(x: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in x's own dtype, after subtracting the row's max."""
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True, dtype=x.dtype))


def mean_loss_by_rows(logp_rows: Callable[[int, int], np.ndarray], targets: np.ndarray, row_bytes: int) -> float:
    """The mean of −logp[t, target[t]] over the counted tokens, `logp_rows(start, stop)` giving those rows'
    log-probabilities (float64, or a storage dtype's rounding of them) a block of rows at a time."""
    total = 0.0
    for start, stop in spans(len(targets), row_bytes):
        picked = targets[start:stop]
        keep = np.flatnonzero(picked != IGNORE_INDEX)
        total -= float(logp_rows(start, stop)[keep, picked[keep]].astype(np.float64).sum())
    return total / np.count_nonzero(targets != IGNORE_INDEX)


def mean_loss_by_columns(blocks: Iterable[tuple[int, np.ndarray]], targets: np.ndarray) -> float:
    """The mean loss from (first column, tokens × width float64 logits) blocks, left to right: an online
    logsumexp per token (the running max, and the sum rescaled whenever the max grows) and the target's logit
    picked from the block that holds it."""
    tokens = len(targets)
    top, total, picked = np.full(tokens, -np.inf), np.zeros(tokens), np.zeros(tokens)
    for first, z in blocks:
        grown = np.maximum(top, z.max(axis=1))
        total = total * np.exp(top - grown) + np.exp(z - grown[:, None]).sum(axis=1)
        top = grown
        inside = np.flatnonzero((targets >= first) & (targets < first + z.shape[1]))
        picked[inside] = z[inside, targets[inside] - first]
    keep = targets != IGNORE_INDEX
    return float((top + np.log(total) - picked)[keep].sum() / np.count_nonzero(keep))
