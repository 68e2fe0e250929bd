"""The report's section on hand fusion against the compiler: does writing the fused kernel by hand beat what a
user gets for free by compiling the unfused decomposition?

A hand-fused row names its rival (`rival`, backend/variant on the same device) and carries the paired speedup
over it from the same interleaved rounds (`rival_speedup`, above 1 the hand kernel is faster), its interval and
verdict. This section counts those verdicts per implementation and dtype, then lays every case out beside the
other ways a user could run it (the library's tuned kernel, the eager decomposition) and says what the compiler
generated (`extra["compiler"]` of the rival row), so a win can be read against a compiler that fused everything
into one kernel or one that left full-size intermediates behind. It reads variant names and rival columns only:
which backend plays which part is the rows' to say.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from suite.core.fusion import verdict as interval_verdict
from suite.kit.markdown import details, table
from suite.kit.tidy import VERDICTS, fmt_size, fmt_x, json_dict, timed

OTHERS = ("library", "eager")
"""Variants shown beside the rival for context, in this order: a tuned kernel, then the op-by-op decomposition."""
FOLD = 12
"""Tables longer than this fold into <details>."""
CASE = ["series_rank", "size", "series", "params"]
"""One case of a scenario, in the order the tables list them."""


def section(rows: pd.DataFrame) -> str | None:
    """Markdown for one scenario's tidy rows; None when no timed row was compared with a rival."""
    data = timed(rows)
    hand = _medians(data[data["rival"] != ""])
    if hand.empty:
        return None
    hand["rival_verdict"] = [_verdict(r) for r in hand.itertuples()]
    parts = [
        "### Hand fusion against the compiler",
        "Each hand-fused kernel against its rival on the same device (the compiler's fusion of the same unfused "
        "decomposition), timed in the same interleaved rounds: the ratio is rival time / hand time, above 1 the "
        "hand kernel is faster; the verdict uses the same interval and ±2% band as above.",
        _summary(hand),
    ]
    every = _medians(data)
    for (device, _, dtype), block in hand.groupby(["device", "dtype_rank", "dtype"]):
        same = every[(every["device"] == device) & (every["dtype"] == dtype)]
        parts += [f"#### {device}, {dtype}", _table(block, same)]
    return "\n\n".join(parts)


def _medians(data: pd.DataFrame) -> pd.DataFrame:
    """One row per (case, implementation, variant, rival): repeated rows reduced to their median, first extra."""
    keys = ["device", "dtype_rank", "dtype", *CASE, "size_axis", "backend", "impl", "variant", "rival"]
    numbers = data.groupby(keys, as_index=False)[["time_ms", "rival_speedup", "rival_lo", "rival_hi"]].median()
    words = data.groupby(keys, as_index=False)[["rival_verdict", "extra"]].first()
    return numbers.merge(words, on=keys)


def _verdict(row: Any) -> str:
    """The runner's verdict; for a row without one, the same interval rule on its interval."""
    if row.rival_verdict in VERDICTS:
        return str(row.rival_verdict)
    lo = row.rival_lo if row.rival_lo == row.rival_lo else row.rival_speedup
    hi = row.rival_hi if row.rival_hi == row.rival_hi else row.rival_speedup
    return interval_verdict(lo, hi)


def _summary(hand: pd.DataFrame) -> str:
    """One bullet per (hand implementation, variant, dtype): how many cases pay, are neutral, lose."""
    out = []
    for (impl, variant, _, dtype), group in hand.groupby(["impl", "variant", "dtype_rank", "dtype"]):
        label = f"{impl}, {dtype}" + (f", {variant}" if variant != "fused" else "")
        rival, total = " / ".join(dict.fromkeys(group["rival"])), len(group)
        said = {v: group.loc[group["rival_verdict"] == v, "rival_speedup"] for v in VERDICTS}
        if len(said["pays"]):
            lead = f"hand fusion beat {rival} in {len(said['pays'])} of {total} cases ({_range(said['pays'])})"
        else:
            lead = f"hand fusion never beat {rival} ({total} case{'s' if total != 1 else ''})"
        rest = [
            f"{word} in {len(said[v])} ({_range(said[v])})"
            for v, word in (("neutral", "was neutral"), ("loses", "lost"))
            if len(said[v])
        ]
        out.append(f"- **{label}**: " + ", ".join([lead, *rest]))
    return "\n".join(out)


def _table(block: pd.DataFrame, others: pd.DataFrame) -> str:
    """Per case of one device and dtype: every time, each hand kernel's verdict, and what the compiler made.

    `block` holds the hand rows of that device and dtype, `others` every timed row of it (rival and context)."""
    hands = list(dict.fromkeys(block.sort_values(["impl", "variant"])[["impl", "variant"]].itertuples(index=False)))
    rivals = list(dict.fromkeys(block["rival"]))
    extra = others[others["variant"].isin(OTHERS) & ~(others["backend"] + "/" + others["variant"]).isin(rivals)]
    shown = sorted(set(extra[["backend", "variant"]].itertuples(index=False)), key=lambda k: (OTHERS.index(k[1]), k))
    made = {r: _made(others, r) for r in rivals}
    made = {r: m for r, m in made.items() if m}
    head = ["case", block["size_axis"].iloc[0]]
    head += [f"{i} {v} ms" for i, v in hands] + [f"{r} ms" for r in rivals] + [f"{b}/{v} ms" for b, v in shown]
    head += [f"{i} {v} vs {_rival_of(block, i, v)}" for i, v in hands] + [f"what {r} made" for r in made]
    body = []
    for (_, size, series, params), case in block.groupby(CASE, sort=True):
        mine = others[others["params"] == params]
        row = [series, fmt_size(size)]
        row += [_ms(case[(case["impl"] == i) & (case["variant"] == v)]) for i, v in hands]
        row += [_ms(mine[mine["backend"] + "/" + mine["variant"] == r]) for r in rivals]
        row += [_ms(mine[(mine["backend"] == b) & (mine["variant"] == v)]) for b, v in shown]
        row += [_against(case[(case["impl"] == i) & (case["variant"] == v)]) for i, v in hands]
        row += [made[r].get(params, "") for r in made]
        body.append(row)
    text = table(head, body)
    return details(f"{len(body)} cases", text) if len(body) > FOLD else text


def _rival_of(block: pd.DataFrame, impl: str, variant: str) -> str:
    mine = block[(block["impl"] == impl) & (block["variant"] == variant)]
    return " / ".join(dict.fromkeys(mine["rival"]))


def _made(others: pd.DataFrame, rival: str) -> dict[str, str]:
    """What the rival's compiler generated, per case (params), from its row's `extra["compiler"]`."""
    mine = others[others["backend"] + "/" + others["variant"] == rival]
    found = {p: json_dict(e).get("compiler") for p, e in zip(mine["params"], mine["extra"], strict=True)}
    return {p: describe(info) for p, info in found.items() if isinstance(info, dict)}


def describe(info: dict[str, Any]) -> str:
    """'3 kernels (2 library calls); kept 1 full-size intermediate 1×4×2048×2048; first call 0.4 s (warm cache)'.

    Full-size intermediates (as many elements as the case's largest tensor, its largest input or output: see
    `backends.torch.inductor_code`) are the traffic fusion exists to remove: the count
    says whether the compiler removed them all. A warm cache is said because its first call did not compile."""
    kernels, calls = int(info.get("kernels") or 0), len(info.get("extern") or [])
    text = _count(kernels, "kernel") + (f" ({_count(calls, 'library call')})" if calls else "")
    full, shape = int(info.get("full_size_intermediates") or 0), info.get("largest_intermediate") or []
    dims = "×".join(str(d) for d in shape)
    if full == 1:
        text += f"; kept 1 full-size intermediate {dims}".rstrip()
    elif full > 1:
        text += f"; kept {full} full-size intermediates" + (f" (largest {dims})" if dims else "")
    if int(info.get("graphs") or 1) > 1:
        text += f"; {info['graphs']} graphs (graph breaks)"
    if info.get("first_call_s") is not None:
        text += f"; first call {float(info['first_call_s']):.2g} s"
    return text + (" (warm cache)" if info.get("cache") == "warm" else "")


def _against(hand: pd.DataFrame) -> str:
    """'pays 1.35× [1.30–1.41]': the verdict against the rival with its bootstrap interval."""
    if hand.empty:
        return ""
    r = hand.iloc[0]
    spread = f" [{_fine(r.rival_lo)}–{_fine(r.rival_hi)}]" if r.rival_lo == r.rival_lo else ""
    return f"{r.rival_verdict} {_fine(r.rival_speedup)}×{spread}"


def _ms(rows: pd.DataFrame) -> str:
    return "" if rows.empty else f"{rows['time_ms'].median():.4g}"


def _fine(value: float) -> str:
    """A ratio with enough digits that an interval around 12.7 does not read as 12–13."""
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _range(values: pd.Series) -> str:
    low, high = fmt_x(float(values.min())), fmt_x(float(values.max()))
    return low if low == high else f"{low}–{high}"
