"""Claims of article 000 (expand), section 4, "Edge cases and best practice": 4.1 errors, 4.2 with other APIs,
and the closing paragraph: A20-A27.

Each block is one claim: its evidence (runs code, returns facts), its judge (facts -> verdict and why)
and its registry row (the restatement, and facts under which the judge says something else).

>>> from viewlab.course.claims.model import judge
>>> judge(A22, A22.evidence())[0]
'true'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from viewlab import shares_storage

from ._evidence import (
    CLIP_BLOCKS,
    bytes_of,
    error_of,
    expand_result,
    no_elements,
    nothing_tried,
    source_layouts,
)
from .model import NOT_CHECKABLE, A, Claim, Facts, Verdict, claim_row


# ---- A20 -------------------------------------------------------------------------------------------------------------
def _ev_nonsingleton_error(*, shape: tuple[int, ...] = (2, 3), size: tuple[int, ...] = (4, 3)) -> Facts:
    return {"error": error_of(lambda: torch.randn(shape).expand(*size)), "shape": tuple(shape), "size": tuple(size)}


def _j_nonsingleton_error(f: Mapping[str, Any]) -> Verdict:
    if f["error"] and "non-singleton dimension 0" in f["error"]:
        return "true", f["error"]
    return "false", f"expand{f['size']} of a {f['shape']} tensor gave: {f['error'] or 'no error'}"


A20 = claim_row(
    "A20",
    A,
    "4.1 Errors",
    "semantics",
    "Expanding a (2, 3) tensor to (4, 3) raises an error because its first dimension is not 1.",
    _ev_nonsingleton_error,
    _j_nonsingleton_error,
    false={"error": None},
)


# ---- A21 -------------------------------------------------------------------------------------------------------------
def _ev_minus_one_grow(*, shape: tuple[int, ...] = (1, 5), size: tuple[int, ...] = (-1, 10)) -> Facts:
    return expand_result(shape, size)


def _j_minus_one_grow(f: Mapping[str, Any]) -> Verdict:
    if f["shape"] == (1, 10):
        return "true", "shape (1, 10)"
    got = f["error"] or f"shape {f['shape']}"
    return "false", f"{got}: -1 keeps dimension 0 as it is, and only a dimension of size 1 can grow to 10"


A21 = claim_row(
    "A21",
    A,
    "4.1 Errors",
    "API",
    "torch.ones(1, 5).expand(-1, 10) gives shape torch.Size([1, 10]) (-1 has a special meaning).",
    _ev_minus_one_grow,
    _j_minus_one_grow,
    true={"error": None, "shape": (1, 10)},
)


# ---- A22 -------------------------------------------------------------------------------------------------------------
def _ev_minus_one_keep(*, shape: tuple[int, ...] = (1, 5), size: tuple[int, ...] = (2, -1)) -> Facts:
    return expand_result(shape, size)


def _j_minus_one_keep(f: Mapping[str, Any]) -> Verdict:
    return (
        ("true", "shape (2, 5)") if f["shape"] == (2, 5) else ("false", f"shape {f['shape']}, error {f.get('error')}")
    )


A22 = claim_row(
    "A22",
    A,
    "4.1 Errors",
    "API",
    "torch.ones(1, 5).expand(2, -1) gives shape torch.Size([2, 5]).",
    _ev_minus_one_keep,
    _j_minus_one_keep,
    false={"shape": (1, 5)},
)


# ---- A23 -------------------------------------------------------------------------------------------------------------
def _ev_permute_expand(
    *, shape: tuple[int, ...] = (1, 3, 224), dims: tuple[int, ...] = (1, 0, 2), size: tuple[int, ...] = (3, 256, 224)
) -> Facts:
    t = torch.randn(shape)
    err = error_of(lambda: t.permute(*dims).expand(*size))
    if err:
        return {
            "size": tuple(size),
            "shape": None,
            "stride": None,
            "bytes": 0,
            "shares": False,
            "error": err,
            "elements": 0,
        }
    held, _, out = bytes_of(lambda: t.permute(*dims).expand(*size))
    return {
        "size": tuple(size),
        "shape": tuple(out.shape),
        "stride": out.stride(),
        "bytes": held,
        "shares": shares_storage(out, t),
        "error": None,
        "elements": out.numel(),
    }


def _j_permute_expand(f: Mapping[str, Any]) -> Verdict:
    if f["error"]:
        return "false", f"permute then expand{f['size']} raises: {f['error']}"
    if f["elements"] == 0:
        return no_elements("the expanded tensor")
    asked = f["size"]  # the shape asked for, -1 keeping a dimension as it is
    right_shape = len(asked) == len(f["shape"]) and all(a in (-1, s) for a, s in zip(asked, f["shape"]))
    if right_shape and f["bytes"] == 0 and f["shares"]:
        return "true", f"shape {f['shape']}, stride {f['stride']}, 0 B: both steps are views"
    return "false", f"shape {f['shape']}, {f['bytes']:,} B, shares memory: {f['shares']}"


A23 = claim_row(
    "A23",
    A,
    "4.2 With other APIs",
    "memory",
    "A (1, 3, 224) tensor, permute(1, 0, 2) then expand(3, 256, 224), gives an efficient transposed expansion of "
    "shape [3, 256, 224].",
    _ev_permute_expand,
    _j_permute_expand,
    false={"bytes": 688128},
)


# ---- A24 -------------------------------------------------------------------------------------------------------------
def _ev_contiguous_temporary(*, shape: tuple[int, ...] = (1, 100), size: tuple[int, ...] = (100, 100)) -> Facts:
    """Bytes of ``original.expand(size).contiguous()``: at the peak, and still held while the result lives."""
    original = torch.randn(shape)
    held, peak, out = bytes_of(lambda: original.expand(*size).contiguous())
    return {
        "held_while_result_lives": held,
        "peak": peak,
        "result_bytes": out.numel() * out.element_size(),
        "elements": out.numel(),
    }


def _j_contiguous_temporary(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the result")
    held, peak = f["held_while_result_lives"], f["peak"]
    if peak == 0:
        return "false", (
            "contiguous() added no memory at all: the expand stretched nothing, so it returned the same "
            "memory (and a write through it reaches the original, claim A09)"
        )
    if held >= f["result_bytes"] > 0:
        return "misleading", (
            f"the copy holds {held:,} B -- the full expanded size -- for as long as the result lives, like "
            "any tensor: 'temporary' undersells a copy of every element"
        )
    return "true", f"only {held:,} B stay held after the peak of {peak:,} B"


A24 = claim_row(
    "A24",
    A,
    "4.2 With other APIs",
    "memory",
    "Calling contiguous() on an expand() result before modifying it increases memory use temporarily.",
    _ev_contiguous_temporary,
    _j_contiguous_temporary,
    true={"held_while_result_lives": 0, "peak": 40000},
    false={"peak": 0},
)


# ---- A25 -------------------------------------------------------------------------------------------------------------
def _ev_contiguous_example(
    *, originals: tuple[tuple[int, ...], ...] = ((1, 100), (100, 100)), size: tuple[int, ...] = (100, 100)
) -> Facts:
    """The article's write, ``safe[0] = 0`` through ``original.expand(size).contiguous()``, for each shape of
    ``original`` (the article never gives it) in each layout it comes in (contiguous, transposed, strided):
    whether the expanded tensor was contiguous already, and whether the write changed the original."""
    cases, elements = [], 0
    for shape in originals:
        for layout, zeros in source_layouts(tuple(shape)).items():
            original = zeros.fill_(1.0)  # ones, in that layout
            expanded = original.expand(*size)
            safe = expanded.contiguous()
            safe[0] = 0
            elements += expanded.numel()
            cases.append((layout, tuple(shape), expanded.is_contiguous(), bool((original == 0).any())))
    return {"cases": cases, "originals": tuple(originals), "elements": elements}


def _j_contiguous_example(f: Mapping[str, Any]) -> Verdict:
    if not f["cases"]:
        return nothing_tried("no shape of `original` tried")
    if f["elements"] == 0:  # an empty row 0 is written: no element could reach the original
        return no_elements("every expanded tensor")
    changed = [f"a {lay} {sh}" for lay, sh, _, hit in f["cases"] if hit]
    kept = [f"a {lay} {sh}" for lay, sh, _, hit in f["cases"] if not hit]
    follows = all(hit == was for _, _, was, hit in f["cases"])  # changed exactly where the expand was contiguous
    if not changed:
        return "true", f"the write left the original unchanged for every original tried: {', '.join(kept)}"
    if not kept:
        return "false", f"the write through the contiguous() result changed every original tried: {', '.join(changed)}"
    rule = (
        "exactly where the expanded tensor was contiguous already, so contiguous() returned it: the safety "
        "comes from the expanded tensor not being contiguous, not from calling contiguous(); clone() always copies"
        if follows
        else "and not only where the expanded tensor was contiguous"
    )
    return "misleading", (
        f"the article never defines `original`: the write left {', '.join(kept)} unchanged, but changed "
        f"{', '.join(changed)} -- {rule}"
    )


A25 = claim_row(
    "A25",
    A,
    "4.2 With other APIs",
    "semantics",
    "In its example, original.expand(100, 100).contiguous() can be written (row 0 set to 0) without affecting original.",
    _ev_contiguous_example,
    _j_contiguous_example,
    true={"cases": [("contiguous", (1, 100), False, False)]},
    false={"cases": [("contiguous", (100, 100), True, True)]},
)


# ---- A26 -------------------------------------------------------------------------------------------------------------
def _ev_saving_range(
    *, blocks: tuple[str, ...] = tuple(CLIP_BLOCKS), frames: int = 64, features: int = 256, seed: int = 0
) -> Facts:
    """Peak memory saved by writing each named block of :data:`~._evidence.CLIP_BLOCKS` with expand instead of
    what the block compares it with (repeat, or plain broadcasting), on ``frames`` frames of a clip (``features``
    each) and one per-clip row."""
    gen = torch.Generator().manual_seed(seed)
    clip, per_clip = torch.randn(frames, features, generator=gen), torch.randn(1, features, generator=gen)
    savings, against = {}, {}
    for name in blocks:
        against[name], without, with_expand = CLIP_BLOCKS[name]
        _, peak_r, _ = bytes_of(lambda f=without: f(clip, per_clip))
        _, peak_e, _ = bytes_of(lambda f=with_expand: f(clip, per_clip))
        savings[name] = round(1 - peak_e / peak_r, 3) if peak_r else 0.0  # an empty clip: nothing to save
    return {"savings": savings, "against": against, "elements": clip.numel()}


def _saving_span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.0%}" if lo == hi else f"anything from {lo:.0%} to {hi:.0%}"


def _j_saving_range(f: Mapping[str, Any]) -> Verdict:
    # The claim is a report on the author's own, unnamed projects: nobody here can observe them, so no block
    # of ours can make it true. Only one result could refute it: expand saving nothing even where it should.
    s = f["savings"]
    if not s:
        return nothing_tried("no block named")
    if f["elements"] == 0:
        return no_elements("the clip")
    shown = ", ".join(f"{k}: {v:.0%}" for k, v in s.items())
    if max(s.values()) <= 0:
        return "false", f"expand saved no memory in any block tried ({shown})"
    against = f["against"]
    spans = []
    for base, label, note in (
        ("repeat", "against repeat", "depending on the code around expand"),
        ("broadcasting", "against plain broadcasting", "which copies nothing either"),
    ):
        group = {k: v for k, v in s.items() if against[k] == base}
        if group:
            listed = ", ".join(f"{k}: {v:.0%}" for k, v in group.items())
            varies = len(set(group.values())) > 1 or base == "broadcasting"
            spans.append(f"{_saving_span(list(group.values()))} {label} ({listed})" + (f", {note}" if varies else ""))
    return NOT_CHECKABLE, (
        "the 30-70 % is a report on the author's own projects, which are not named: nobody here can observe "
        "them, so the figure can be neither rerun nor refuted. Beside it, what can be run here: the saving is "
        "a property of the workload, not of expand -- the same clip saves " + "; and ".join(spans)
    )


A26 = claim_row(
    "A26",
    A,
    "conclusion",
    "memory",
    "In the author's projects, sensible use of expand() cut GPU memory use by 30-70 %.",
    _ev_saving_range,
    _j_saving_range,
    false={"savings": {"a": 0.0, "b": 0.0}},
)


# ---- A27 -------------------------------------------------------------------------------------------------------------
def _ev_threshold(*, counts: tuple[int, ...] = (2, 8, 16, 17, 64), features: int = 512) -> Facts:
    row = torch.randn(1, features)
    by_count = {}
    for n in counts:
        e, _, _ = bytes_of(lambda n=n: row.expand(n, features))
        r, _, _ = bytes_of(lambda n=n: row.repeat(n, 1))
        by_count[n] = (e, r)
    return {"bytes_by_count": by_count, "elements": row.numel()}


def _j_threshold(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the row repeated")
    pairs = {n: b for n, b in f["bytes_by_count"].items() if n > 0}  # a count of 0 repeats nothing: 0 B either way
    if not any(n > 16 for n in pairs) or not any(n <= 16 for n in pairs):
        return nothing_tried("the rule needs counts both above 16 and at or below it")
    shown = ", ".join(f"{n}: {e:,} B vs {r:,} B" for n, (e, r) in pairs.items())
    if all(e < r for n, (e, r) in pairs.items() if n > 16):
        if all(e < r for e, r in pairs.values()):
            return "misleading", (
                f"above 16 repeats expand is indeed cheaper -- but so it is at every count; nothing "
                f"changes at 16 (expand vs repeat bytes: {shown})"
            )
        return "true", f"expand wins only above 16: {shown}"
    return "false", f"repeat is not costlier above 16: {shown}"


A27 = claim_row(
    "A27",
    A,
    "conclusion",
    "advice",
    "Rule of thumb: when data must be repeated more than 16 times along a dimension, prefer expand().",
    _ev_threshold,
    _j_threshold,
    true={"bytes_by_count": {2: (4096, 4096), 17: (0, 34816)}},
    false={"bytes_by_count": {2: (0, 4096), 17: (34816, 34816)}},
)


# ---- A31 -------------------------------------------------------------------------------------------------------------
def _ev_locality(
    *, blocks: tuple[str, ...] = tuple(CLIP_BLOCKS), frames: int = 64, features: int = 256, seed: int = 0
) -> Facts:
    """The clip blocks of A26 on two clips of one shape: a smooth one (each frame close to the last: spatial and
    temporal locality) and one of independent noise. Does the saving depend on the data's values?"""
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(frames, features, generator=gen)
    smooth = noise.cumsum(0) / max(frames, 1) ** 0.5  # neighbouring frames nearly equal
    per_clip = torch.randn(1, features, generator=gen)
    savings: dict[str, dict[str, float]] = {}
    against = {name: CLIP_BLOCKS[name][0] for name in blocks}
    for clip_name, clip in (("smooth", smooth), ("noise", noise)):
        for name in blocks:
            _, without, with_expand = CLIP_BLOCKS[name]
            _, peak_r, _ = bytes_of(lambda f=without, c=clip: f(c, per_clip))
            _, peak_e, _ = bytes_of(lambda f=with_expand, c=clip: f(c, per_clip))
            savings.setdefault(name, {})[clip_name] = round(1 - peak_e / peak_r, 3) if peak_r else 0.0
    return {"elements": noise.numel(), "savings": savings, "against": against}


def _j_locality(f: Mapping[str, Any]) -> Verdict:
    # The clause is part of the author's report on their own projects (A26's sentence): nobody here can observe
    # which of their code saved most, so no run of ours can make it true. What a run can observe is whether the
    # values change what expand saves; on torch they never do (tensor bytes follow shapes: the property test in
    # tests/course/test_claims_reach_a.py), so that is said beside the verdict, never taken as a refutation.
    if not f["savings"]:
        return nothing_tried("no block named")
    if f["elements"] == 0:
        return no_elements("the clip")
    s = f["savings"]
    base = {"repeat": "against repeat", "broadcasting": "against plain broadcasting"}
    shown = "; ".join(
        f"{n} ({base[f['against'][n]]}): smooth {v['smooth']:.0%}, noise {v['noise']:.0%}" for n, v in s.items()
    )
    if max(max(v.values()) for v in s.values()) <= 0:
        return "false", f"expand saved no memory in any block tried, on the smooth clip or on noise ({shown})"
    if all(v["smooth"] == v["noise"] for v in s.values()):
        beside = (
            f"the saving is the same for a smooth clip and for noise of one shape ({shown}): expand saves the copies "
            "of data that is repeated (a stride-0 dimension), which the shapes decide, never the values -- "
            "'spatial locality' (neighbouring values close) is not what it exploits"
        )
    else:
        beside = f"the saving differed with the values here ({shown})"
    return NOT_CHECKABLE, (
        "the clause is part of the author's report on their own projects (A26), which are not named: which of "
        f"their workloads saved most cannot be observed here. Beside it, what can be run here: {beside}"
    )


A31 = claim_row(
    "A31",
    A,
    "conclusion",
    "memory",
    "The saving is especially marked for data with spatial locality, such as video sequences and 3-D point clouds.",
    _ev_locality,
    _j_locality,
    false={"savings": {"broadcasting instead": {"smooth": 0.0, "noise": 0.0}}},
)

CLAIMS: tuple[Claim, ...] = (
    A31,
    A20,
    A21,
    A22,
    A23,
    A24,
    A25,
    A26,
    A27,
)
