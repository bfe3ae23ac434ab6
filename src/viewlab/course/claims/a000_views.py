"""Claims of article 000 (expand), its introduction and section 1, "Views and copies: the logic under expand()":
A01-A09 and A28.

Each block is one claim: its evidence (runs code, returns facts), its judge (facts -> verdict and why)
and its registry row (the restatement, and facts under which the judge says something else).

>>> from viewlab.course.claims.model import judge
>>> judge(A02, A02.evidence())[0]
'true'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from viewlab import shares_storage
from viewlab._format import fmt_us, mib

from ._evidence import (
    INPLACE_OPS,
    STORAGE_CALLS,
    VIEW_OR_COPY_OPS,
    OpNames,
    bytes_of,
    error_of,
    judge_claimed_times,
    not_the_same_work,
    nothing_tried,
    same_result,
    small_shape_pairs,
    storage_call,
    stretches,
    timing,
)
from .model import NOT_CHECKABLE, A, Claim, Facts, Verdict, claim_row


# ---- A01 -------------------------------------------------------------------------------------------------------------
def _ev_repeat_allocates(*, shape: tuple[int, ...] = (1, 512), times: tuple[int, ...] = (8, 1)) -> Facts:
    base = torch.randn(shape)
    held, _, rep = bytes_of(lambda: base.repeat(*times))
    return {
        "repeat_bytes": held,
        "result_bytes": rep.numel() * rep.element_size(),
        "shares": shares_storage(rep, base),
        "torch_has_repeat_function": hasattr(torch, "repeat"),
    }


def _j_repeat_allocates(f: Mapping[str, Any]) -> Verdict:
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
    return {"expand_bytes": held, "shares": shares_storage(e, base), "stride": tuple(e.stride())}


def _j_expand_view(f: Mapping[str, Any]) -> Verdict:
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

    def kind(out: torch.Tensor, t: torch.Tensor) -> str:  # the input object itself is neither a new view nor a copy
        return "itself" if out is t else "view" if shares_storage(out, t) else "copy"

    kinds = {n: (kind(VIEW_OR_COPY_OPS[n](plain), plain), kind(VIEW_OR_COPY_OPS[n](flipped), flipped)) for n in ops}
    return {
        "kinds": kinds,
        "depends_on_layout": sorted(n for n, (a, b) in kinds.items() if a != b),
        "always_view": sorted(n for n, (a, b) in kinds.items() if a == b == "view"),
        "always_copy": sorted(n for n, (a, b) in kinds.items() if a == b == "copy"),
        "always_itself": sorted(n for n, (a, b) in kinds.items() if a == b == "itself"),
    }


def _j_two_kinds(f: Mapping[str, Any]) -> Verdict:
    if not f["kinds"]:
        return nothing_tried("no operation named")
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
        return "false", f"{said}: they belong to neither class ({classes})" + (
            f"; {itself}" if f["always_itself"] else ""
        )
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
    }


def _j_view_metadata(f: Mapping[str, Any]) -> Verdict:
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
    return {"equal": equal, "warning": warning}


def _j_storage_pointer(f: Mapping[str, Any]) -> Verdict:
    note = f'; Tensor.storage() warns: "{f["warning"]}" (claim A28)' if f["warning"] else ""
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


# ---- A06 -------------------------------------------------------------------------------------------------------------
def _ev_memory_table(*, batch: int = 1024, features: int = 512, dtype: torch.dtype = torch.float32) -> Facts:
    row = torch.randn(1, features, dtype=dtype)
    rep, _, _ = bytes_of(lambda: row.repeat(batch, 1))
    exp, _, _ = bytes_of(lambda: row.expand(batch, features))
    return {"repeat_bytes": rep, "expand_bytes": exp}


def _j_memory_table(f: Mapping[str, Any]) -> Verdict:
    claimed = {"repeat_bytes": 16.0, "expand_bytes": 2.0}
    close = all(abs(f[k] / 2**20 - mb) <= 0.05 * mb for k, mb in claimed.items())
    got = f"repeat: {mib(f['repeat_bytes'])}; expand: {f['expand_bytes']:,} B"
    if close:
        return "true", f"measured {got}, as the table says"
    return (
        "false",
        f"measured {got}; the table says 16.0 MB and 2.0 MB (for (1024, 512) float32, 2 MiB is what repeat takes)",
    )


A06 = claim_row(
    "A06",
    A,
    "1 Views and copies (table)",
    "memory",
    "Memory, batch 1024 and feature size 512: repeat takes 16.0 MB, expand 2.0 MB.",
    _ev_memory_table,
    _j_memory_table,
    true={"repeat_bytes": 16 * 2**20, "expand_bytes": 2 * 2**20},
)


# ---- A07 -------------------------------------------------------------------------------------------------------------
def _ev_table_times(*, batch: int = 1024, features: int = 512, devices: tuple[str, ...] = ("cpu", "meta")) -> Facts:
    """The expand half on every device named (expand is host work: it runs only ``aten.expand``, no kernel,
    so its time does not depend on the device); the repeat half only on a CUDA GPU (it writes memory)."""
    facts: Facts = {"cuda": torch.cuda.is_available(), "device_name": None}
    facts["repeat_median_s"] = facts["repeat_iqr_s"] = facts["expand_median_s"] = facts["expand_iqr_s"] = None
    facts["expand_ops"], expand_times = [], {}
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


def _j_table_times(f: Mapping[str, Any]) -> Verdict:
    if not f["same_result"]:
        return not_the_same_work("expand's view and repeat's copy hold different values")
    if f["expand_median_s"] is None:
        return nothing_tried("no device named for the expand half")
    expand_v, expand_why = judge_claimed_times(f, {"expand": 0.12e-3})
    if f["expand_ops"] == ["expand"] and f["expand_median_s"] < 0.12e-3 / 5:  # a busy machine widens the spread,
        median = fmt_us(f["expand_median_s"])  # never a metadata-only op's median: one wording on any machine
        expand_v, expand_why = "false", f"expand's median ({median}) is below a fifth of the claimed 120 us"
    expand_why += f" (slowest of {', '.join(f['expand_devices'])}; expand runs only {', '.join(f['expand_ops'])})"
    if f["repeat_median_s"] is None:
        if expand_v == "false":
            return "false", f"the expand half is wrong on any device: {expand_why}; the repeat half needs a CUDA GPU"
        return (
            NOT_CHECKABLE,
            f"needs a CUDA GPU for the repeat half (the article's RTX 3090); expand half: {expand_why}",
        )
    verdict, why = judge_claimed_times(f, {"repeat": 0.45e-3, "expand": 0.12e-3})
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


# ---- A08 -------------------------------------------------------------------------------------------------------------
def _ev_inplace_reaches(*, ops: tuple[str, ...] = tuple(INPLACE_OPS)) -> Facts:
    """Each named in-place operation of :data:`~._evidence.INPLACE_OPS` on a (1, 4) row expanded to (3, 4)."""
    raised, reached, missed = [], [], []
    for name in ops:
        op, src = INPLACE_OPS[name], torch.full((1, 4), 7.0)
        if error_of(lambda op=op, src=src: op(src.expand(3, 4))):
            raised.append(name)
        elif bool((src != 7.0).any()):
            reached.append(name)
        else:
            missed.append(name)
    return {"raised": raised, "reached_original": reached, "did_not_reach": missed}


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
    true={"raised": [], "reached_original": ["fill_(5)"], "did_not_reach": []},
    false={"raised": ["add_(1)"], "reached_original": [], "did_not_reach": ["fill_(5)"]},
)


# ---- A09 -------------------------------------------------------------------------------------------------------------
def _ev_contiguous_copy(*, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]] | None = None) -> Facts:
    """``expand(...).contiguous()`` for every (source, size) pair that expands (default: every pair of shapes
    with up to 3 dimensions of size 0-3): which results are a copy (a write leaves the source unchanged)."""
    counts = {"stretched": 0, "stretched_copied": 0, "unstretched": 0, "unstretched_shared": 0}
    example = None
    for src_shape, size in small_shape_pairs() if pairs is None else pairs:
        src = torch.zeros(src_shape)
        if math.prod(size) == 0 or error_of(lambda src=src, size=size: src.expand(size)):
            continue
        out = src.expand(size).contiguous()
        out.view(-1)[0] = 1.0
        copied = not bool((src == 1.0).any())
        if stretches(src_shape, size):
            counts["stretched"] += 1
            counts["stretched_copied"] += copied
        else:
            counts["unstretched"] += 1
            counts["unstretched_shared"] += not copied
            if not copied and (example is None or math.prod(size) > math.prod(example[1])):
                example = (src_shape, size)
    return {**counts, "shared_example": example}


def _j_contiguous_copy(f: Mapping[str, Any]) -> Verdict:
    if f["stretched"] == 0:
        return nothing_tried("no pair tried stretches a dimension, and the advice is about those")
    done = f"contiguous() copied in {f['stretched_copied']} of {f['stretched']} expands that stretched a dimension"
    if f["stretched_copied"] < f["stretched"]:
        return "false", f"{done}: a write through the others reached the source"
    if f["unstretched_shared"]:
        return "misleading", (
            f"{done}, but in {f['unstretched_shared']} of {f['unstretched']} that stretched nothing "
            f"(e.g. {f['shared_example'][0]} -> {f['shared_example'][1]}) it returned the same memory and a "
            "write reached the source: the copy comes from the stretch, not from contiguous(); clone() always copies"
        )
    return "true", f"{done}, and every other expand tried also gave a copy"


A09 = claim_row(
    "A09",
    A,
    "1 Views and copies",
    "advice",
    "When you need to modify the expanded tensor, first call .contiguous() to create a copy.",
    _ev_contiguous_copy,
    _j_contiguous_copy,
    true={"unstretched_shared": 0},
    false={"stretched_copied": 0},
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
    return {"method": f"Tensor.{method}()", "error": error, "agree": agree, "warning": warning}


def _j_storage_api(f: Mapping[str, Any]) -> Verdict:
    if f["error"] or not f["agree"]:
        return "false", f"{f['method']}.data_ptr() does not answer the question: {f['error'] or 'the pointers differ'}"
    if f["warning"] and "deprecated" in f["warning"].lower():
        return "misleading", (
            f"{f['method']}.data_ptr() still agrees for a view, but the call warns "
            f'"{f["warning"]}": the article teaches a deprecated API; untyped_storage() is the current one'
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
    A06,
    A07,
    A08,
    A09,
    A28,
)
