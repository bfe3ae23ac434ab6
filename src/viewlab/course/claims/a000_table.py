"""Claims of article 000 (expand), the table that closes section 1, "Views and copies": expand against
repeat in memory (A06) and in time (A07).

Each block is one claim: its evidence (runs code, returns facts), its judge (facts -> verdict and why)
and its registry row (the restatement, and facts under which the judge says something else).

>>> from viewlab.course.claims.model import judge
>>> judge(A06, A06.evidence())[0]
'misleading'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from viewlab._format import mib

from ._evidence import (
    OpNames,
    bytes_of,
    fmt_us,
    judge_claimed_times,
    no_elements,
    not_the_same_work,
    nothing_tried,
    same_result,
    timing,
)
from .model import NOT_CHECKABLE, A, Claim, Facts, Verdict, claim_row


# ---- A06 -------------------------------------------------------------------------------------------------------------
def _ev_memory_table(
    *, batch: int = 1024, features: int = 512, heads: int = 8, dtype: torch.dtype = torch.float32
) -> Facts:
    """The table's setting read two ways: a ``(1, features)`` row made into ``batch`` rows, and (the article's
    example above the table expands to 8 heads) a ``(batch, features)`` tensor made into ``heads`` copies. For
    each: the bytes ``repeat`` allocates, the bytes ``expand`` allocates, and the bytes of the storage the
    expanded tensor reads (memory that existed before the call)."""
    facts: dict[str, Any] = {"heads": heads, "elements": batch * features}
    for reading, shape, times in (("rows", (1, features), (batch, 1)), ("heads", (batch, features), (heads, 1, 1))):
        src = torch.randn(shape, dtype=dtype)
        size = tuple(t * n for t, n in zip(times, (1,) * (len(times) - len(shape)) + shape))
        rep, _, _ = bytes_of(lambda src=src, times=times: src.repeat(*times))
        exp, _, out = bytes_of(lambda src=src, size=size: src.expand(size))
        facts[f"{reading}_repeat_bytes"] = rep
        facts[f"{reading}_expand_bytes"] = exp
        facts[f"{reading}_expand_reads_bytes"] = out.untyped_storage().nbytes()
    return facts


def _size(n: int) -> str:
    """Bytes, with MiB beside them from 1 MiB up (below it, "0.0 MiB" would read as nothing)."""
    return mib(n) if n >= 2**20 else f"{n:,} B ({n / 2**10:.1f} KiB)"


def _memory_reading(f: Mapping[str, Any], reading: str) -> tuple[str, str]:
    """The verdict of the table's two figures under one reading, and what was measured."""
    mb = {k: f[f"{reading}_{k}"] / 2**20 for k in ("repeat_bytes", "expand_bytes", "expand_reads_bytes")}
    near = lambda got, claimed: abs(got - claimed) <= 0.05 * claimed  # noqa: E731 -- the table rounds to 0.1 MB
    got = (
        f"repeat {_size(f[f'{reading}_repeat_bytes'])}, expand {f[f'{reading}_expand_bytes']:,} B "
        f"(the storage it reads: {_size(f[f'{reading}_expand_reads_bytes'])})"
    )
    if not near(mb["repeat_bytes"], 16.0):
        return "false", got
    if near(mb["expand_bytes"], 2.0):
        return "true", got
    if mb["expand_bytes"] == 0 and near(mb["expand_reads_bytes"], 2.0):
        return "misleading", got
    return "false", got


def _j_memory_table(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the batch")
    if f["heads"] == 0:  # the heads reading would make 0 copies: it measures nothing, and the verdict needs both
        return no_elements("the batch made into 0 heads")
    rows, heads = _memory_reading(f, "rows"), _memory_reading(f, "heads")
    both = (
        f"read as one row made into the batch: {rows[0]} (measured {rows[1]}); read as the batch made into "
        f"{f['heads']} heads, the article's example above the table: {heads[0]} (measured {heads[1]})"
    )
    fitting = [v for v, _ in (heads, rows) if v != "false"]  # a reading under which the repeat figure fits
    if not fitting:
        return "false", f"no reading fits the table's 16.0 MB and 2.0 MB: {both}"
    if fitting[0] == "misleading":
        return "misleading", (
            f"{both}; the 2.0 MB for expand is the memory the view reads, which existed before it: expand adds 0 B"
        )
    return fitting[0], both


A06 = claim_row(
    "A06",
    A,
    "1 Views and copies (table)",
    "memory",
    "Memory, batch 1024 and feature size 512: repeat takes 16.0 MB, expand 2.0 MB.",
    _ev_memory_table,
    _j_memory_table,
    true={"heads_expand_bytes": 2 * 2**20},
    false={"heads_repeat_bytes": 2 * 2**20},
)


# ---- A07 -------------------------------------------------------------------------------------------------------------
def _ev_table_times(*, batch: int = 1024, features: int = 512, devices: tuple[str, ...] = ("cpu", "meta")) -> Facts:
    """The expand half on every device named (expand is host work: it runs only ``aten.expand``, no kernel,
    so its time does not depend on the device); the repeat half only on a CUDA GPU (it writes memory)."""
    facts: Facts = {"cuda": torch.cuda.is_available(), "device_name": None}
    facts["repeat_median_s"] = facts["repeat_iqr_s"] = facts["expand_median_s"] = facts["expand_iqr_s"] = None
    facts["expand_ops"], expand_times = [], {}
    facts["elements"] = batch * features
    probe = torch.randn(1, features)  # the two halves do the same work: the same values, one viewed, one written
    facts["same_result"] = same_result(probe.expand(batch, features), probe.repeat(batch, 1))
    for dev in devices + (("cuda",) if facts["cuda"] else ()):
        row = torch.randn(1, features, device=dev)
        with OpNames() as seen:
            row.expand(batch, features)
        expand_times[dev] = timing(lambda row=row: row.expand(batch, features))
        facts["expand_ops"] = sorted(set(seen.names))
    if expand_times:
        slowest = max(expand_times.values(), key=lambda t: t["median_s"])
        facts["expand_median_s"], facts["expand_iqr_s"] = slowest["median_s"], slowest["iqr_s"]
    facts["expand_devices"] = sorted(expand_times)
    if facts["cuda"]:
        row = torch.randn(1, features, device="cuda")
        facts["device_name"] = torch.cuda.get_device_name()
        t = timing(lambda: row.repeat(batch, 1))
        facts["repeat_median_s"], facts["repeat_iqr_s"] = t["median_s"], t["iqr_s"]
    return facts


#: The article's RTX 3090 times for A07's case, in seconds.
_A07_CLAIMED_S = {"repeat": 0.45e-3, "expand": 0.12e-3}


def _j_table_times(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:  # equal values and a time to write them mean nothing when there are none
        return no_elements("the expanded batch")
    if not f["same_result"]:
        return not_the_same_work("expand's view and repeat's copy hold different values")
    if f["expand_median_s"] is None:
        return nothing_tried("no device named for the expand half")
    expand_v, expand_why = judge_claimed_times(f, {"expand": _A07_CLAIMED_S["expand"]})
    # a busy machine widens the spread, never a metadata-only op's median: one wording on any machine
    if f["expand_ops"] == ["expand"] and f["expand_median_s"] < _A07_CLAIMED_S["expand"] / 5:
        median = fmt_us(f["expand_median_s"])
        expand_v, expand_why = (
            "false",
            f"expand's median ({median}) is below a fifth of the claimed {fmt_us(_A07_CLAIMED_S['expand'])}",
        )
    expand_why += f" (slowest of {', '.join(f['expand_devices'])}; expand runs only {', '.join(f['expand_ops'])})"
    if f["repeat_median_s"] is None:
        if expand_v == "false":
            return "false", (
                f"the expand half is wrong on any device, inferred from {' and '.join(f['expand_devices'])}, where "
                f"expand is the same host-side operation as on a GPU (it launches no kernel): {expand_why}; the "
                "repeat half needs a CUDA GPU"
            )
        return (
            NOT_CHECKABLE,
            f"needs a CUDA GPU for the repeat half (the article's RTX 3090); expand half: {expand_why}",
        )
    if expand_v == "false":  # the claim holds only if both halves do: a wrong expand half decides it
        return "false", (
            f"on {f['device_name']} (not the article's RTX 3090), the expand half is wrong whatever the repeat half "
            f"gives: {expand_why}; repeat's median {fmt_us(f['repeat_median_s'])} (claimed {fmt_us(_A07_CLAIMED_S['repeat'])})"
        )
    verdict, why = judge_claimed_times(f, _A07_CLAIMED_S)
    return verdict, f"on {f['device_name']} (not the article's RTX 3090), {why}; expand launches no kernel"


A07 = claim_row(
    "A07",
    A,
    "1 Views and copies (table)",
    "speed",
    "Time on an RTX 3090 for the same case: repeat 0.45 ms, expand 0.12 ms.",
    _ev_table_times,
    _j_table_times,
    not_checkable_here={"repeat_median_s": None, "expand_median_s": 0.1e-3, "expand_iqr_s": 1e-6},
    false={"repeat_median_s": None, "expand_median_s": 2e-6, "expand_iqr_s": 1e-7},
    true={
        "cuda": True,
        "device_name": "a GPU",
        "repeat_median_s": 0.4e-3,
        "repeat_iqr_s": 1e-5,
        "expand_median_s": 0.1e-3,
        "expand_iqr_s": 1e-6,
    },
)


CLAIMS: tuple[Claim, ...] = (A06, A07)
