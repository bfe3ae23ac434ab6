"""Claims of article 001 (expand_as), section 5 "Combined with other operations" and section 6
"Debugging and performance analysis": B13-B18.

Each block is one claim: its evidence (runs code, returns facts), its judge (facts -> verdict and why)
and its registry row (the restatement, and facts under which the judge says something else).

>>> from viewlab.course.claims.model import judge
>>> judge(B16, B16.evidence())[0]
'false'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from viewlab import shares_storage

from .. import article_helpers as ah
from ._evidence import (
    bytes_of,
    error_of,
    fmt_us,
    no_elements,
    not_the_same_work,
    nothing_tried,
    paired_timings,
    small_shape_pairs,
    which_faster,
)
from .article_code import (
    article_guarded_expand_as,
    article_masked_loss,
)
from .model import B, Claim, Facts, Verdict, claim_row


# ---- B13 -------------------------------------------------------------------------------------------------------------
def _ev_masked_loss(seq: int = 3, vocab: int = 5, mask_layout: str = "batch, 1, seq", seed: int = 0) -> Facts:
    """``mask_layout``: the article's ``"batch, 1, seq"`` or ``"batch, seq, 1"``."""

    def shaped(keep: torch.Tensor) -> torch.Tensor:
        return keep[:, None, :] if mask_layout == "batch, 1, seq" else keep[:, :, None]

    gen = torch.Generator().manual_seed(seed)
    err = error_of(
        lambda: article_masked_loss(
            torch.randn(2, seq, vocab, generator=gen),
            torch.randint(vocab, (2, seq), generator=gen),
            shaped(torch.ones(2, seq)),
        )
    )
    n = 4  # seq_len == vocab: a (batch, 1, seq) mask now runs
    logits, labels = torch.randn(2, n, n, generator=gen), torch.randint(n, (2, n), generator=gen)
    keep = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    got = article_masked_loss(logits, labels, shaped(keep)).item()
    total = count = 0.0
    for i in range(2):
        for t in range(n):
            if keep[i, t]:
                row = F.binary_cross_entropy_with_logits(
                    logits[i, t], F.one_hot(labels[i, t], n).float(), reduction="sum"
                )
                total, count = total + row.item(), count + n
    return {
        "error_when_seq_ne_vocab": err,
        "loss_when_seq_eq_vocab": round(got, 4),
        "token_loop_loss": round(total / count, 4),
        "mask_layout": mask_layout,
        "seq_vocab": (seq, vocab),
        "elements": 2 * seq * vocab,
    }


def _j_masked_loss(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the element-wise loss")
    seq, vocab = f["seq_vocab"]
    if f["error_when_seq_ne_vocab"] is None and math.isclose(
        f["loss_when_seq_eq_vocab"], f["token_loop_loss"], abs_tol=1e-4
    ):
        return "true", f"a ({f['mask_layout']}) mask weights each token's loss, as a loop over tokens does"
    err = f["error_when_seq_ne_vocab"]
    ran = f"it raises ({err})" if err else "it runs"
    return "false", (
        f"a ({f['mask_layout']}) mask lines seq up with the vocabulary axis: with seq {seq}, vocab {vocab} {ran}; "
        "with seq = vocab = 4 it runs but masks vocabulary entries "
        f"(loss {f['loss_when_seq_eq_vocab']} vs {f['token_loop_loss']} from a loop over real tokens); "
        "the mask must be (batch, seq, 1)"
    )


B13 = claim_row(
    "B13",
    B,
    "5 Combined with other ops",
    "semantics",
    "In its custom loss, expand_as() aligns a (batch, 1, seq_len) attention mask with the (batch, seq_len, vocab_size) "
    "element-wise loss, so the mask weights each position's loss.",
    _ev_masked_loss,
    _j_masked_loss,
    true={"error_when_seq_ne_vocab": None, "loss_when_seq_eq_vocab": 0.5, "token_loop_loss": 0.5},
)


# ---- B14 -------------------------------------------------------------------------------------------------------------
def _ev_checker(ndims: tuple[int, ...] = (0, 1, 2, 3)) -> Facts:
    """``ndims``: the numbers of dimensions the tried shapes have (sizes 0-3)."""
    pairs = [(a, b) for a, b in small_shape_pairs() if len(a) in ndims and len(b) in ndims]
    wrong = [p for p in pairs if ah.article_check_expandable(*p) != ah.torch_can_expand(*p)]
    return {
        "pairs": len(pairs),
        "wrong": len(wrong),
        "all_wrong_have_more_dims": all(len(a) > len(b) for a, b in wrong),
        "says_for_1x3_to_3": ah.article_check_expandable((1, 3), (3,)),
        "torch_for_1x3_to_3": ah.torch_can_expand((1, 3), (3,)),
    }


def _j_checker(f: Mapping[str, Any]) -> Verdict:
    if f["pairs"] == 0:
        return nothing_tried("no pair of shapes")
    if f["wrong"] == 0:
        return "true", f"agrees with PyTorch on all {f['pairs']:,} shape pairs"
    more = (
        f" (all {f['wrong']:,} errors are pairs where a has more dims than b)" if f["all_wrong_have_more_dims"] else ""
    )
    return "false", (
        f"wrong on {f['wrong']:,} of {f['pairs']:,} shape pairs{more}: for (1, 3) -> (3,) it says "
        f"{f['says_for_1x3_to_3']}, PyTorch says {f['torch_for_1x3_to_3']} (zip stops at the shorter shape)"
    )


B14 = claim_row(
    "B14",
    B,
    "6 Debugging",
    "API",
    "Its check_expandable(a, b) tells whether a can be expanded to b's shape.",
    _ev_checker,
    _j_checker,
    true={"wrong": 0},
)


# ---- B15 -------------------------------------------------------------------------------------------------------------
def _ev_timer_memory(a_shape: tuple[int, ...] = (1, 1024), b_shape: tuple[int, ...] = (1024, 1024)) -> Facts:
    from torch.utils import benchmark

    a, b = torch.randn(a_shape), torch.randn(b_shape)
    measured = benchmark.Timer("small.expand_as(big)", globals={"small": a, "big": b}).timeit(
        100
    )  # the article's check
    # The "copy" allocates its result on every call: its first calls also map fresh pages from the system (first-touch
    # page faults), many times slower than the calls after them, so both paths are run a few times before timing.
    for _ in range(5):
        a.expand_as(b).clone()
    view, copy, ratios = paired_timings(lambda: a.expand_as(b), lambda: a.expand_as(b).clone())
    same = torch.equal(a.expand_as(b), a.expand_as(b).clone())  # the two timed paths give the same values
    held, _, _ = bytes_of(lambda: a.expand_as(b))
    return {
        "memory_fields": [n for n in dir(measured) if "mem" in n.lower() or "byte" in n.lower()],
        "expand_as_median_s": view["median_s"],
        "expand_as_iqr_s": view["iqr_s"],
        "copy_median_s": copy["median_s"],
        "copy_iqr_s": copy["iqr_s"],
        "copy_over_view_by_round": ratios,
        "expand_as_bytes": held,
        "same_values": same,
        "elements": b.numel(),
    }


def _j_timer_memory(f: Mapping[str, Any]) -> Verdict:
    if f["memory_fields"]:
        return "true", f"the Timer's result reports memory: {f['memory_fields']}"
    if f["elements"] == 0:
        return no_elements("the expand_as result")
    e = {"median_s": f["expand_as_median_s"], "iqr_s": f["expand_as_iqr_s"]}
    c = {"median_s": f["copy_median_s"], "iqr_s": f["copy_iqr_s"]}
    times = (
        f"expand_as {fmt_us(e['median_s'])}, allocate and copy {fmt_us(c['median_s'])}, copy / view by round "
        f"{f['copy_over_view_by_round']}"
    )
    if not f["same_values"]:
        return not_the_same_work("the view and its copy hold different values")
    # The verdict rests on what the Timer reports and on the bytes counted; the times are shown beside, never
    # judged (how clearly they separate a view from a copy moves with the sizes and the machine's load).
    hint = {
        "a": "this run's times do hint that nothing is copied",
        "b": "this run's times even put the copy first",
        "same": "this run's times cannot tell the view from a copy",
        "unclear": "this run's rounds disagree, so its times do not even hint",
    }[which_faster(e, c, round_ratios=f["copy_over_view_by_round"])]
    if f["expand_as_bytes"]:
        return "false", (
            f"a timer measures time only (no memory field in its result), and expand_as allocated "
            f"{f['expand_as_bytes']:,} B that no timing reports ({hint}: {times})"
        )
    return "misleading", (
        f"expand_as is memory-efficient -- counting the bytes gives {f['expand_as_bytes']} B -- but a timer "
        f"measures time only: no memory field in its result; {hint} ({times})"
    )


B15 = claim_row(
    "B15",
    B,
    "6 Debugging",
    "memory",
    "Timing a.expand_as(b) with torch.utils.benchmark.Timer tests expand_as's memory efficiency.",
    _ev_timer_memory,
    _j_timer_memory,
    true={"memory_fields": ["peak_memory"]},
    false={"memory_fields": [], "expand_as_bytes": 4096},
    not_checkable_here={"same_values": False},
)


# ---- B16 -------------------------------------------------------------------------------------------------------------
def _ev_noncontiguous(rows: int = 3, source_cols: int = 2, width: int = 4) -> Facts:
    col = torch.randn(rows, source_cols)[:, :1]  # a column sliced out of a wider tensor
    err = error_of(lambda: col.expand(rows, width))
    return {
        "input_contiguous": col.is_contiguous(),
        "error": err,
        "still_a_view": None if err else shares_storage(col.expand(rows, width), col),
        "elements": rows * width,
    }


def _j_noncontiguous(f: Mapping[str, Any]) -> Verdict:
    if f["input_contiguous"]:  # a column of 0 or 1 rows, or of a 1-column tensor, is contiguous
        return nothing_tried("the sliced column is contiguous: no non-contiguous tensor was expanded")
    if f["elements"] == 0 and not f["error"]:
        return no_elements("the expanded column")
    if f["error"] and not f["input_contiguous"]:
        return "true", f"expanding a non-contiguous tensor raised: {f['error']}"
    return "false", (
        f"a sliced column (contiguous: {f['input_contiguous']}) expands without error and "
        f"stays a view ({f['still_a_view']}); contiguous() first only adds a copy"
    )


B16 = claim_row(
    "B16",
    B,
    "6 Debugging",
    "semantics",
    "A common error is expanding a non-contiguous tensor; the fix is to call contiguous() first.",
    _ev_noncontiguous,
    _j_noncontiguous,
    true={"error": "RuntimeError: ...", "input_contiguous": False},
)


# ---- B17 -------------------------------------------------------------------------------------------------------------
def _ev_detach_or_clone(rows: int = 3, width: int = 4) -> Facts:
    if rows * width == 0:  # no element to write through either tensor
        return dict.fromkeys(_DETACH_FACTS) | {"elements": 0}
    p = torch.zeros(rows, 1, requires_grad=True)
    d = p.expand(rows, width).detach()
    shares_d = shares_storage(d, p)
    d[0, 0] = 5.0
    c = p.detach().expand(rows, width).clone()
    c[-1, 0] = 7.0
    return {
        "detach_shares": shares_d,
        "detach_write_reached": p[0, 0].item() == 5.0,
        "detach_add_error": error_of(lambda: p.expand(rows, width).detach().add_(1)),
        "clone_shares": shares_storage(c, p),
        "clone_write_reached": p[-1, 0].item() == 7.0,
        "elements": rows * width,
    }


_DETACH_FACTS = ("detach_shares", "detach_write_reached", "detach_add_error", "clone_shares", "clone_write_reached")


def _j_detach_or_clone(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the expanded tensor")
    if f["detach_shares"] or f["detach_write_reached"]:
        return "false", (
            f"detach() makes no copy: it shares memory ({f['detach_shares']}), a write through it reaches the "
            f"original ({f['detach_write_reached']}) and add_ still fails ({f['detach_add_error']}); only "
            f"clone() copies (shares: {f['clone_shares']})"
        )
    if f["clone_shares"]:
        return "false", "clone() shared memory"
    return "true", "both detach() and clone() gave independent copies"


B17 = claim_row(
    "B17",
    B,
    "6 Debugging",
    "advice",
    "To avoid modifying an expanded tensor by accident during autograd, create a copy with detach() or clone().",
    _ev_detach_or_clone,
    _j_detach_or_clone,
    true={"detach_shares": False, "detach_write_reached": False, "clone_shares": False},
)


# ---- B18 -------------------------------------------------------------------------------------------------------------
def _ev_guarded(ndims: tuple[int, ...] = (0, 1, 2, 3)) -> Facts:
    """``ndims``: the numbers of dimensions the tried shapes have (sizes 0-3)."""
    pairs = [(a, b) for a, b in small_shape_pairs() if len(a) in ndims and len(b) in ndims]
    missed = caught = 0
    for sa, sb in pairs:
        err = error_of(
            lambda sa=sa, sb=sb: article_guarded_expand_as(
                torch.empty(sa, device="meta"), torch.empty(sb, device="meta")
            )
        )
        if err and err.startswith("AssertionError"):
            caught += 1
        elif err:
            missed += 1
    return {
        "pairs": len(pairs),
        "mismatches_caught_by_assert": caught,
        "mismatches_missed": missed,
        "missed_example": error_of(lambda: article_guarded_expand_as(torch.zeros(1, 3), torch.zeros(3))),
    }


def _j_guarded(f: Mapping[str, Any]) -> Verdict:
    if f["mismatches_caught_by_assert"] + f["mismatches_missed"] == 0:
        return nothing_tried(f"no shape mismatch among the {f['pairs']:,} pairs tried")
    if f["mismatches_caught_by_assert"] == 0:
        return "false", "the assert never fires: PyTorch raises first every time"
    if f["mismatches_missed"]:
        return "misleading", (
            f"the guard catches {f['mismatches_caught_by_assert']:,} mismatches with an early message but "
            f"lets {f['mismatches_missed']:,} through to PyTorch's own error (e.g. (1, 3) -> (3,): "
            f"{f['missed_example']}); PyTorch's own errors already say what does not fit"
        )
    return "true", f"the guard caught every one of {f['mismatches_caught_by_assert']:,} mismatches"


B18 = claim_row(
    "B18",
    B,
    "6 Debugging",
    "advice",
    "Asserting check_expandable before expand_as (its safe_expand_as) is defensive programming that quickly locates "
    "the source of shape mismatches.",
    _ev_guarded,
    _j_guarded,
    true={"mismatches_missed": 0},
    false={"mismatches_caught_by_assert": 0},
)


CLAIMS: tuple[Claim, ...] = (
    B13,
    B14,
    B15,
    B16,
    B17,
    B18,
)
