"""Claims of article 000 (expand), its introduction and section 1, "Views and copies: the logic under expand()":
A01-A05, A08, A09 and A28 (the section's table of memory and time, A06 and A07, is in ``a000_table``).

Each block is one claim: its evidence (runs code, returns facts), its judge (facts -> verdict and why)
and its registry row (the restatement, and facts under which the judge says something else).

>>> from viewlab.course.claims.model import judge
>>> judge(A02, A02.evidence())[0]
'true'
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from viewlab import shares_storage

from ._evidence import (
    INPLACE_OPS,
    STORAGE_CALLS,
    VIEW_OR_COPY_OPS,
    bytes_of,
    error_of,
    grows,
    no_elements,
    nothing_tried,
    small_shape_pairs,
    source_layouts,
    storage_call,
)
from .model import A, Claim, Facts, Verdict, claim_row


# ---- A01 -------------------------------------------------------------------------------------------------------------
def _ev_repeat_allocates(*, shape: tuple[int, ...] = (1, 512), times: tuple[int, ...] = (8, 1)) -> Facts:
    base = torch.randn(shape)
    held, _, rep = bytes_of(lambda: base.repeat(*times))
    return {
        "repeat_bytes": held,
        "result_bytes": rep.numel() * rep.element_size(),
        "shares": shares_storage(rep, base),
        "torch_has_repeat_function": hasattr(torch, "repeat"),
        "elements": rep.numel(),
    }


def _j_repeat_allocates(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the repeat's result")
    name = "" if f["torch_has_repeat_function"] else " (the method is Tensor.repeat; torch.repeat does not exist)"
    if f["repeat_bytes"] >= f["result_bytes"] > 0 and not f["shares"]:
        return "true", f"repeat allocated {f['repeat_bytes']:,} B = its whole result{name}"
    return (
        "false",
        f"repeat allocated {f['repeat_bytes']:,} B for a {f['result_bytes']:,}-byte result, shares memory: {f['shares']}",
    )


A01 = claim_row(
    "A01",
    A,
    "introduction",
    "memory",
    "torch.repeat() copies data by allocating new memory, which can run a GPU out of memory on large data or models.",
    _ev_repeat_allocates,
    _j_repeat_allocates,
    false={"repeat_bytes": 0, "shares": True},
)


# ---- A02 -------------------------------------------------------------------------------------------------------------
def _ev_expand_view(*, shape: tuple[int, ...] = (1, 512), size: tuple[int, ...] = (8, 512)) -> Facts:
    base = torch.randn(shape)
    held, _, e = bytes_of(lambda: base.expand(*size))
    return {"expand_bytes": held, "shares": shares_storage(e, base), "stride": tuple(e.stride()), "elements": e.numel()}


def _j_expand_view(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the expanded tensor")
    if f["expand_bytes"] == 0 and f["shares"]:
        return "true", f"expand allocated 0 B and reads the same storage, stride {f['stride']}"
    return "false", f"expand allocated {f['expand_bytes']:,} B, shares memory: {f['shares']}"


A02 = claim_row(
    "A02",
    A,
    "introduction",
    "memory",
    "expand() extends data without copying it, through the view mechanism.",
    _ev_expand_view,
    _j_expand_view,
    false={"expand_bytes": 16384, "shares": False},
)


# ---- A03 -------------------------------------------------------------------------------------------------------------
_KIND_WORDS = {"view": "a view of", "copy": "a copy of", "itself": "the input itself for"}


def _ev_two_kinds(*, ops: tuple[str, ...] = tuple(VIEW_OR_COPY_OPS), rows: int = 2, cols: int = 3) -> Facts:
    """Each named operation of :data:`~._evidence.VIEW_OR_COPY_OPS`, on a contiguous (rows, cols) tensor and on its transpose."""
    plain = torch.arange(float(rows * cols)).view(rows, cols)
    flipped = plain.t()
    line = torch.arange(float(rows * cols))

    def kind(out: torch.Tensor, t: torch.Tensor) -> str:  # the input object itself is neither a new view nor a copy
        return "itself" if out is t else "view" if shares_storage(out, t) else "copy"

    kinds = {n: (kind(VIEW_OR_COPY_OPS[n](plain), plain), kind(VIEW_OR_COPY_OPS[n](flipped), flipped)) for n in ops}
    return {
        "kinds": kinds,
        "depends_on_layout": sorted(n for n, (a, b) in kinds.items() if a != b),
        "always_view": sorted(n for n, (a, b) in kinds.items() if a == b == "view"),
        "always_copy": sorted(n for n, (a, b) in kinds.items() if a == b == "copy"),
        "always_itself": sorted(n for n, (a, b) in kinds.items() if a == b == "itself"),
        # a third outcome on a 1-D input: some of them hand it back itself
        "itself_for_1d": sorted(n for n in ops if kind(VIEW_OR_COPY_OPS[n](line), line) == "itself"),
        "elements": plain.numel(),
    }


def _j_two_kinds(f: Mapping[str, Any]) -> Verdict:
    if not f["kinds"]:
        return nothing_tried("no operation named")
    if f["elements"] == 0:  # empty tensors share no storage, whatever the operation: no view to tell from a copy
        return no_elements("the tensor tried")
    classes = f"always a view: {', '.join(f['always_view']) or 'none'}; always a copy: {', '.join(f['always_copy']) or 'none'}"
    itself = f"{', '.join(f['always_itself'])} returned the input itself (the same object: no new view, no copy)"
    if f["depends_on_layout"]:
        groups: dict[tuple[str, str], list[str]] = {}
        for name in f["depends_on_layout"]:
            groups.setdefault(tuple(f["kinds"][name]), []).append(name)
        said = "; ".join(
            f"{', '.join(names)} {'returns' if len(names) == 1 else 'return'} {_KIND_WORDS[a]} a contiguous input "
            f"and {_KIND_WORDS[b]} a transposed one"
            for (a, b), names in groups.items()
        )
        one_d = [n for n in f["depends_on_layout"] if n in f.get("itself_for_1d", []) and f["kinds"][n][0] != "itself"]
        return "false", f"{said}: they belong to neither class ({classes})" + (
            f"; {itself}" if f["always_itself"] else ""
        ) + (f"; a 1-D input comes back itself from {', '.join(one_d)}" if one_d else "")
    if f["always_itself"]:
        return "misleading", f"no operation tried depends on the layout, but there is a third answer: {itself}"
    return "true", f"every operation tried is always a view or always a copy ({classes})"


A03 = claim_row(
    "A03",
    A,
    "1 Views and copies",
    "semantics",
    "Tensor operations fall into two classes: those that create a view and those that create a copy.",
    _ev_two_kinds,
    _j_two_kinds,
    true={"depends_on_layout": [], "always_itself": []},
    misleading={"depends_on_layout": []},
)


# ---- A04 -------------------------------------------------------------------------------------------------------------
def _ev_view_metadata(*, shape: tuple[int, ...] = (1, 512), size: tuple[int, ...] = (8, 512)) -> Facts:
    from viewlab.layout import layout

    base = torch.randn(shape)
    e = base.expand(*size)
    r = e.clone()  # a copy of the same values
    return {
        "view_shares": shares_storage(e, base),
        "view_storage_bytes": layout(e).storage_bytes,
        "base_storage_bytes": layout(base).storage_bytes,
        "view_stride": tuple(e.stride()),
        "copy_shares": shares_storage(r, base),
        "copy_storage_bytes": layout(r).storage_bytes,
        "elements": e.numel(),
    }


def _j_view_metadata(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the view")
    if f["view_shares"] and f["view_storage_bytes"] == f["base_storage_bytes"] and not f["copy_shares"]:
        return "true", (
            f"the view keeps the {f['base_storage_bytes']:,}-byte storage and changes only shape and stride "
            f"{f['view_stride']}; the copy has its own {f['copy_storage_bytes']:,} B"
        )
    return "false", f"view shares: {f['view_shares']}, copy shares: {f['copy_shares']}"


A04 = claim_row(
    "A04",
    A,
    "1 Views and copies",
    "memory",
    "A view shares the original's storage and records only different metadata such as shape and stride; a copy "
    "allocates new memory.",
    _ev_view_metadata,
    _j_view_metadata,
    false={"view_shares": False},
)


# ---- A05 -------------------------------------------------------------------------------------------------------------
def _ev_storage_pointer(*, shape: tuple[int, ...] = (1, 512), size: tuple[int, ...] = (8, 512)) -> Facts:
    base = torch.randn(shape)
    e = base.expand(*size)
    equal, warning = storage_call(lambda: e.storage().data_ptr() == base.storage().data_ptr())
    return {"equal": equal, "warning": warning, "elements": e.numel()}


def _j_storage_pointer(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:  # new empty storages all have data pointer 0, shared or not
        return no_elements("the expanded tensor")
    note = (
        f'; Tensor.storage() warns, the first time in a process: "{f["warning"]}" (claim A28)' if f["warning"] else ""
    )
    if f["equal"]:
        return "true", f"the storage data pointers are equal{note}"
    return "false", f"the storage data pointers differ{note}"


A05 = claim_row(
    "A05",
    A,
    "1 Views and copies",
    "API",
    "For a (1, 512) tensor expanded to (8, 512), comparing the two tensors' .storage().data_ptr() prints True.",
    _ev_storage_pointer,
    _j_storage_pointer,
    false={"equal": False},
)


# ---- A08 -------------------------------------------------------------------------------------------------------------
def _ev_inplace_reaches(*, ops: tuple[str, ...] = tuple(INPLACE_OPS)) -> Facts:
    """Each named in-place operation of :data:`~._evidence.INPLACE_OPS` on a (1, 4) row expanded to (3, 4):
    does it raise, reach the original or not, and (of those that run) which warn, with each one's warnings."""
    raised, reached, missed, warnings_of = [], [], [], {}
    for name in ops:
        op, src = INPLACE_OPS[name], torch.full((1, 4), 7.0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            err = error_of(lambda op=op, src=src: op(src.expand(3, 4)))
        if err:
            raised.append(name)
            continue
        (reached if bool((src != 7.0).any()) else missed).append(name)
        if caught:  # an indexed write can warn twice (e[mask] = v: index_put_, then the masked_fill_ it runs)
            warnings_of[name] = list(dict.fromkeys(str(w.message).split(". ")[0] for w in caught))
    return {
        "raised": raised,
        "reached_original": reached,
        "did_not_reach": missed,
        "warned": list(warnings_of),
        "warnings": warnings_of,
    }


def _warnings_said(f: Mapping[str, Any]) -> str:
    """The distinct warning texts of the ops that warned (which op gave which is in the evidence)."""
    texts = dict.fromkeys(text for name in f["warned"] for text in f["warnings"][name])
    return "; ".join(f'"{text}"' for text in texts)


def _j_inplace_reaches(f: Mapping[str, Any]) -> Verdict:
    if not (f["raised"] or f["reached_original"] or f["did_not_reach"]):
        return nothing_tried("no in-place operation named")
    if f["reached_original"] and not f["did_not_reach"]:
        if f["raised"]:
            tried = len(f["raised"]) + len(f["reached_original"])
            return "misleading", (
                f"the in-place ops that run ({', '.join(f['reached_original'])}) do change the original, "
                f"but {len(f['raised'])} of the {tried} tried refuse: {', '.join(f['raised'])} raise RuntimeError "
                "(more than one element refers to one memory location) -- an error, not a silent change; "
                "which ones refuse depends on the operator and on the region written, not on the values "
                "(notebook 05, P2)"
                + (
                    f"; and {', '.join(f['warned'])} run, change the original and warn ({_warnings_said(f)}) -- "
                    "a third outcome, neither an error nor silent"
                    if f["warned"]
                    else ""
                )
            )
        return "true", f"every in-place op tried changed the original: {', '.join(f['reached_original'])}"
    return "false", f"in-place ops that left the original unchanged: {', '.join(f['did_not_reach']) or 'all'}"


A08 = claim_row(
    "A08",
    A,
    "1 Views and copies",
    "semantics",
    "An in-place operation on the tensor expand() returns changes the original tensor, which can cause bugs that "
    "are hard to notice.",
    _ev_inplace_reaches,
    _j_inplace_reaches,
    true={"raised": [], "reached_original": ["fill_(5)"], "did_not_reach": [], "warned": []},
    false={"raised": ["add_(1)"], "reached_original": [], "did_not_reach": ["fill_(5)"]},
)


# ---- A09 -------------------------------------------------------------------------------------------------------------
def _ev_contiguous_copy(*, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]] | None = None) -> Facts:
    """``e = src.expand(size)``, then ``e.contiguous()``, for every (source, size) pair that expands (default:
    every pair of shapes with up to 3 dimensions of size 0-3) and every layout of the source (contiguous,
    transposed, strided): was the result a copy (a write through it leaves the source unchanged), and which rule
    predicts it -- ``e`` not being contiguous, or the expand stretching a dimension. Results of 0 elements have no
    byte to copy or share: they are counted apart (``empty``), never as evidence."""
    counts = {"tried": 0, "empty": 0, "noncontiguous": 0, "noncontiguous_copied": 0, "contiguous": 0}
    counts |= {"contiguous_shared": 0, "grown": 0, "grown_copied": 0, "ungrown": 0, "ungrown_shared": 0}
    shared = None  # the case to show where contiguous() returned the same memory
    for src_shape, size in small_shape_pairs() if pairs is None else pairs:
        for layout, src in source_layouts(tuple(src_shape)).items():
            if error_of(lambda src=src, size=size: src.expand(size)):
                continue
            e = src.expand(size)
            if not e.numel():
                counts["empty"] += 1
                continue
            before = e.is_contiguous()
            out = e.contiguous()
            out.view(-1)[0] = 1.0
            copied = not bool((src == 1.0).any())
            grown, case = grows(tuple(src_shape), tuple(size)), (layout, tuple(src_shape), tuple(size))
            counts["tried"] += 1
            counts["contiguous" if before else "noncontiguous"] += 1
            counts["contiguous_shared" if before else "noncontiguous_copied"] += (not copied) if before else copied
            counts["grown" if grown else "ungrown"] += 1
            counts["grown_copied" if grown else "ungrown_shared"] += copied if grown else not copied
            if before and not copied and _shared_rank(case) > _shared_rank(shared):
                shared = case
    return {**counts, "example_shared": shared}


def _batch_of_one(c: tuple[str, tuple[int, ...], tuple[int, ...]]) -> bool:
    """An expand a reader writes for a batch that happens to be 1: ``x.expand(batch, ...)`` of a (1, ...) x."""
    return len(c[1]) == len(c[2]) >= 2 and c[1][0] == c[2][0] == 1


def _shared_rank(c: tuple[str, tuple[int, ...], tuple[int, ...]] | None) -> tuple[bool, int]:
    """Which shared case to show: a batch of one first, then the largest."""
    return (False, -1) if c is None else (_batch_of_one(c), math.prod(c[2]))


def _case(c: tuple[str, tuple[int, ...], tuple[int, ...]]) -> str:
    return f"a {c[0]} {c[1]} -> {c[2]}"


def _j_contiguous_copy(f: Mapping[str, Any]) -> Verdict:
    if f["tried"] == 0:
        return nothing_tried("no pair of shapes expands to a result with elements")
    done = (
        f"contiguous() copied in {f['noncontiguous_copied']} of {f['noncontiguous']} expands whose result was not "
        f"contiguous"
    )
    if f["noncontiguous_copied"] < f["noncontiguous"]:
        return "false", f"{done}: a write through the others reached the source"
    if not f["contiguous_shared"]:
        return "true", f"{done}, and no expand tried returned memory shared with its source"
    if f["grown"] and f["grown_copied"] == f["grown"]:  # so every expand that kept its memory stretched nothing
        stretched = f", among them every one that stretched a dimension ({f['grown']} of {f['grown']}: stride 0 there)"
        nothing = ", expands that stretched nothing"
    else:
        stretched = f"; {f['grown'] - f['grown_copied']} of {f['grown']} that stretched a dimension were not copied"
        nothing = ""
    ex = f["example_shared"]
    example = _case(ex) + (
        f", x.expand(batch{', -1' * (len(ex[2]) - 1)}) for a batch of 1" if _batch_of_one(ex) else ""
    )
    return "misleading", (
        f"{done}{stretched}; but it returned the same memory in {f['contiguous_shared']} of {f['contiguous']} that "
        f"already were{nothing} (e.g. {example}), where a write reaches the source: the copy comes from the "
        "expanded tensor not being contiguous, not from calling contiguous(); clone() always copies"
    )


A09 = claim_row(
    "A09",
    A,
    "1 Views and copies",
    "advice",
    "When you need to modify the expanded tensor, first call .contiguous() to create a copy.",
    _ev_contiguous_copy,
    _j_contiguous_copy,
    true={"contiguous_shared": 0},
    false={"noncontiguous_copied": 0},
)


# ---- A28 -------------------------------------------------------------------------------------------------------------
def _ev_storage_api(
    *, method: str = "storage", shape: tuple[int, ...] = (1, 512), size: tuple[int, ...] = (8, 512)
) -> Facts:
    """The article's sharing check, ``x.<method>().data_ptr()`` on a tensor and on its expand: does it run,
    agree, and warn?"""
    base = torch.randn(shape)
    call = STORAGE_CALLS[method]

    def probe() -> tuple[str | None, bool]:
        error = error_of(lambda: call(base))
        return error, error is None and call(base.expand(*size)) == call(base)

    (error, agree), warning = storage_call(probe)
    # Where equal pointers mislead: new 0-byte storages all have pointer 0, while an empty slice keeps its parent's.
    fresh = torch.empty(0), torch.zeros(2, 0)
    parent = torch.arange(3.0)
    return {
        "method": f"Tensor.{method}()",
        "error": error,
        "agree": agree,
        "warning": warning,
        "elements": base.numel(),
        "new_empty_pointers": [t.untyped_storage().data_ptr() for t in fresh],
        "new_empties_share": shares_storage(*fresh),
        "empty_slice_keeps_parent_pointer": parent[3:].untyped_storage().data_ptr()
        == parent.untyped_storage().data_ptr(),
    }


def _pointer_caveat(f: Mapping[str, Any]) -> str:
    """Why equal pointers do not mean shared memory, from the empty tensors the evidence made."""
    first, second = f["new_empty_pointers"]
    kept = f["empty_slice_keeps_parent_pointer"]
    if first != second or f["new_empties_share"]:
        return ""
    return (
        f" -- and pointer equality is no test of sharing: two new empty tensors (torch.empty(0), torch.zeros(2, 0)) "
        f"both have pointer {first} and share nothing, while an empty slice x[3:] "
        + ("keeps its parent's pointer" if kept else "gets a pointer of its own")
        + " (viewlab.shares_storage tells them apart)"
    )


def _j_storage_api(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:  # an empty tensor of new 0-byte storage has data pointer 0, like any other
        return no_elements("the tensor")
    if f["error"] or not f["agree"]:
        return "false", f"{f['method']}.data_ptr() does not answer the question: {f['error'] or 'the pointers differ'}"
    if f["warning"] and "deprecated" in f["warning"].lower():
        return "misleading", (
            f"{f['method']}.data_ptr() still agrees for a view, but the call warns (the first time in a process) "
            f'"{f["warning"]}": the article teaches a deprecated API; untyped_storage() is the current one{_pointer_caveat(f)}'
        )
    return "true", f"{f['method']}.data_ptr() agrees for a view, without a warning"


A28 = claim_row(
    "A28",
    A,
    "1 Views and copies",
    "API",
    "The article shows that a view shares memory by comparing the two tensors' .storage().data_ptr().",
    _ev_storage_api,
    _j_storage_api,
    true={"warning": None},
    false={"agree": False},
)


CLAIMS: tuple[Claim, ...] = (
    A01,
    A02,
    A03,
    A04,
    A05,
    A08,
    A09,
    A28,
)
