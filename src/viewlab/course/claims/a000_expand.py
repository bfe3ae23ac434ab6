"""Claims A01-A13 of article 000 (expand): introduction, views and copies, batches, attention.

Each block is one claim: its evidence (runs code, returns facts), its judge (facts -> verdict and why)
and its registry row (the restatement, and facts under which the judge says something else).

>>> from viewlab.course.claims.model import judge
>>> judge(A02, A02.evidence())[0], judge(A02, {**A02.evidence(), **A02.examples["false"]})[0]
('true', 'false')
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from viewlab import shares_storage
from viewlab._format import mib
from viewlab.memory import measure

from ._evidence import bytes_of, error_of, judge_claimed_times, timing
from .article_code import article_attention
from .model import NOT_CHECKABLE, A, Claim, Facts, Verdict, claim_row


# ---- A01 -------------------------------------------------------------------------------------------------------------
def _ev_repeat_allocates() -> Facts:
    base = torch.randn(1, 512)
    held, _, rep = bytes_of(lambda: base.repeat(8, 1))
    return {
        "repeat_bytes": held,
        "result_bytes": rep.numel() * rep.element_size(),
        "shares": shares_storage(rep, base),
        "torch_has_repeat_function": hasattr(torch, "repeat"),
    }


def _j_repeat_allocates(f: Mapping[str, Any]) -> Verdict:
    name = "" if f["torch_has_repeat_function"] else " (the method is Tensor.repeat; torch.repeat does not exist)"
    if f["repeat_bytes"] >= f["result_bytes"] > 0 and not f["shares"]:
        return "true", f"repeat(8, 1) of a (1, 512) row allocated {f['repeat_bytes']:,} B = its whole result{name}"
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
def _ev_expand_view() -> Facts:
    base = torch.randn(1, 512)
    held, _, e = bytes_of(lambda: base.expand(8, 512))
    return {"expand_bytes": held, "shares": shares_storage(e, base), "stride": tuple(e.stride())}


def _j_expand_view(f: Mapping[str, Any]) -> Verdict:
    if f["expand_bytes"] == 0 and f["shares"]:
        return "true", f"expand(8, 512) allocated 0 B and reads the same storage, stride {f['stride']}"
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


def _ev_two_kinds() -> Facts:
    plain = torch.arange(6.0).view(2, 3)
    flipped = plain.t()
    ops = {
        "reshape(6)": lambda t: t.reshape(6),
        "flatten()": lambda t: t.flatten(),
        "contiguous()": lambda t: t.contiguous(),
        "to(torch.float32)": lambda t: t.to(torch.float32),
        "to(torch.float64)": lambda t: t.to(torch.float64),
        "expand(2, 2, 3)": lambda t: t.expand(2, *t.shape),
        "clone()": lambda t: t.clone(),
    }

    def kind(out: torch.Tensor, t: torch.Tensor) -> str:  # the input object itself is neither a new view nor a copy
        return "itself" if out is t else "view" if shares_storage(out, t) else "copy"

    kinds = {name: (kind(op(plain), plain), kind(op(flipped), flipped)) for name, op in ops.items()}
    return {
        "kinds": kinds,
        "depends_on_layout": sorted(n for n, (a, b) in kinds.items() if a != b),
        "always_view": sorted(n for n, (a, b) in kinds.items() if a == b == "view"),
        "always_copy": sorted(n for n, (a, b) in kinds.items() if a == b == "copy"),
        "always_itself": sorted(n for n, (a, b) in kinds.items() if a == b == "itself"),
    }


def _j_two_kinds(f: Mapping[str, Any]) -> Verdict:
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
def _ev_view_metadata() -> Facts:
    from viewlab.layout import layout

    base = torch.randn(1, 512)
    e = base.expand(8, 512)
    r = base.repeat(8, 1)
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
def _ev_storage_pointer() -> Facts:
    base = torch.randn(1, 512)
    e = base.expand(8, 512)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        equal = e.storage().data_ptr() == base.storage().data_ptr()
    return {"equal": equal, "warning": str(caught[0].message).split(".")[0] if caught else None}


def _j_storage_pointer(f: Mapping[str, Any]) -> Verdict:
    note = f'; but Tensor.storage() warns: "{f["warning"]}" (use untyped_storage())' if f["warning"] else ""
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
def _ev_memory_table() -> Facts:
    row = torch.randn(1, 512)
    rep, _, _ = bytes_of(lambda: row.repeat(1024, 1))
    exp, _, _ = bytes_of(lambda: row.expand(1024, 512))
    return {"repeat_bytes": rep, "expand_bytes": exp}


def _j_memory_table(f: Mapping[str, Any]) -> Verdict:
    claimed = {"repeat_bytes": 16.0, "expand_bytes": 2.0}
    close = all(abs(f[k] / 2**20 - mb) <= 0.05 * mb for k, mb in claimed.items())
    got = f"repeat to (1024, 512) float32: {mib(f['repeat_bytes'])}; expand: {f['expand_bytes']:,} B"
    if close:
        return "true", f"measured {got}, as the table says"
    return "false", f"measured {got}; the table says 16.0 MB and 2.0 MB (2 MiB is what repeat really takes)"


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
def _ev_table_times() -> Facts:
    facts: Facts = {
        "cuda": torch.cuda.is_available(),
        "device_name": None,
        "repeat_median_s": None,
        "repeat_iqr_s": None,
        "expand_median_s": None,
        "expand_iqr_s": None,
    }
    if facts["cuda"]:
        row = torch.randn(1, 512, device="cuda")
        facts["device_name"] = torch.cuda.get_device_name()
        for name, fn in {"repeat": lambda: row.repeat(1024, 1), "expand": lambda: row.expand(1024, 512)}.items():
            t = timing(fn)
            facts[f"{name}_median_s"], facts[f"{name}_iqr_s"] = t["median_s"], t["iqr_s"]
    return facts


def _j_table_times(f: Mapping[str, Any]) -> Verdict:
    if not f["cuda"]:
        return NOT_CHECKABLE, "needs a CUDA GPU: the table's times are for an RTX 3090, and this machine has none"
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
    not_checkable_here={"cuda": False},
    false={
        "cuda": True,
        "device_name": "a GPU",
        "repeat_median_s": 20e-6,
        "repeat_iqr_s": 1e-6,
        "expand_median_s": 2e-6,
        "expand_iqr_s": 1e-7,
    },
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
def _ev_inplace_reaches() -> Facts:
    ops = {
        "add_(1)": lambda e: e.add_(1),
        "mul_(2)": lambda e: e.mul_(2),
        "copy_(ones)": lambda e: e.copy_(torch.ones(3, 4)),
        "fill_(5)": lambda e: e.fill_(5),
        "fill_(tensor(5))": lambda e: e.fill_(torch.tensor(5.0)),
        "zero_()": lambda e: e.zero_(),
        "e[0, 0] = 3": lambda e: e.__setitem__((0, 0), 3.0),
        "e[:, 0] = 3": lambda e: e.__setitem__((slice(None), 0), 3.0),
    }
    raised, reached, missed = [], [], []
    for name, op in ops.items():
        src = torch.full((1, 4), 7.0)
        if error_of(lambda op=op, src=src: op(src.expand(3, 4))):
            raised.append(name)
        elif bool((src != 7.0).any()):
            reached.append(name)
        else:
            missed.append(name)
    return {"raised": raised, "reached_original": reached, "did_not_reach": missed}


def _j_inplace_reaches(f: Mapping[str, Any]) -> Verdict:
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
def _ev_contiguous_copy() -> Facts:
    facts: Facts = {}
    for case, shape in {"stretched": (1, 4), "same_shape": (3, 4)}.items():
        src = torch.zeros(shape)
        out = src.expand(3, 4).contiguous()
        out[0, 0] = 1.0
        facts[f"{case}_shares"] = shares_storage(out, src)
        facts[f"{case}_write_reaches"] = bool(src.flatten()[0] == 1.0)
    src = torch.zeros(3, 4)
    cl = src.expand(3, 4).clone()
    facts["clone_shares"] = shares_storage(cl, src)
    return facts


def _j_contiguous_copy(f: Mapping[str, Any]) -> Verdict:
    if f["same_shape_write_reaches"] or f["stretched_write_reaches"]:
        return "false", (
            "contiguous() copies only when the layout is not contiguous: after expand(3, 4) of a (3, 4) "
            f"tensor (nothing stretched) it returns the same memory (shares: {f['same_shape_shares']}) and "
            f"the write reaches the original; clone() always copies (shares: {f['clone_shares']})"
        )
    return "true", "contiguous() gave an independent copy in every case tried"


A09 = claim_row(
    "A09",
    A,
    "1 Views and copies",
    "advice",
    "When you need to modify the expanded tensor, first call .contiguous() to create a copy.",
    _ev_contiguous_copy,
    _j_contiguous_copy,
    true={"same_shape_write_reaches": False, "stretched_write_reaches": False, "same_shape_shares": False},
)


# ---- A10 -------------------------------------------------------------------------------------------------------------
def _ev_batch_view() -> Facts:
    sample = torch.randn(3, 8, 8)
    held, _, batch = bytes_of(lambda: sample.unsqueeze(0).expand(16, -1, -1, -1))
    stack_b, _, stacked = bytes_of(lambda: torch.stack([sample] * 16))
    rep_b, _, _ = bytes_of(lambda: sample.repeat(16, 1, 1, 1))
    return {
        "shape": tuple(batch.shape),
        "expand_bytes": held,
        "shares": shares_storage(batch, sample),
        "stack_bytes": stack_b,
        "repeat_bytes": rep_b,
        "equal": torch.equal(batch, stacked),
    }


def _j_batch_view(f: Mapping[str, Any]) -> Verdict:
    if (
        f["shape"] == (16, 3, 8, 8)
        and f["expand_bytes"] == 0
        and f["equal"]
        and min(f["stack_bytes"], f["repeat_bytes"]) > 0
    ):
        return "true", (
            f"a (16, 3, 8, 8) batch equal to torch.stack's, 0 B (stack {f['stack_bytes']:,} B, repeat "
            f"{f['repeat_bytes']:,} B); it is read-only in effect: in-place augmentation would fail"
        )
    return "false", f"shape {f['shape']}, expand bytes {f['expand_bytes']:,}, equal to stack: {f['equal']}"


A10 = claim_row(
    "A10",
    A,
    "2.1 Generating batches",
    "memory",
    "sample.unsqueeze(0).expand(batch_size, -1, -1, -1) turns one [C, H, W] sample into a [B, C, H, W] batch, more "
    "efficiently than torch.stack() or repeat().",
    _ev_batch_view,
    _j_batch_view,
    false={"expand_bytes": 3072},
)


# ---- A11 -------------------------------------------------------------------------------------------------------------
def _ev_batch_times() -> Facts:
    image = torch.randn(3, 224, 224)
    t_exp = timing(lambda: image.unsqueeze(0).expand(256, -1, -1, -1), min_run_time=0.05)
    t_rep = timing(lambda: image.repeat(256, 1, 1, 1), min_run_time=0.25)
    written = 256 * image.numel() * image.element_size()
    return {
        "expand_median_s": t_exp["median_s"],
        "expand_iqr_s": t_exp["iqr_s"],
        "repeat_median_s": t_rep["median_s"],
        "repeat_iqr_s": t_rep["iqr_s"],
        "repeat_writes_bytes": written,
    }


def _j_batch_times(f: Mapping[str, Any]) -> Verdict:
    verdict, why = judge_claimed_times(f, {"expand": 28.7e-6, "repeat": 152e-6})
    need = f["repeat_writes_bytes"] / 152e-6 / 1e9
    return verdict, f"{why}; repeat writes {mib(f['repeat_writes_bytes'])}, which in 152 us needs {need:,.0f} GB/s"


A11 = claim_row(
    "A11",
    A,
    "2.1 Generating batches",
    "speed",
    "Timed with %timeit for a 3x224x224 sample and batch 256: the expand version takes 28.7 us, repeat(256, 1, 1, 1) 152 us.",
    _ev_batch_times,
    _j_batch_times,
    true={"expand_median_s": 25e-6, "expand_iqr_s": 1e-6, "repeat_median_s": 150e-6, "repeat_iqr_s": 5e-6},
    not_checkable_here={
        "expand_median_s": 25e-6,
        "expand_iqr_s": 20e-6,
        "repeat_median_s": 1e-3,
        "repeat_iqr_s": 1e-3,
    },
)


# ---- A12 -------------------------------------------------------------------------------------------------------------
class _ExpandSpy(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the input storage of every ``aten.expand`` (to ask: is a parameter ever expanded?)."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[torch.Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        if func is torch.ops.aten.expand.default:
            self.inputs.append(args[0])
        return func(*args, **(kwargs or {}))


def _attention_parts() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return (
        torch.randn(2, 5, 16, generator=gen),
        torch.randn(48, 16, generator=gen) / 4,
        torch.randn(16, 16, generator=gen) / 4,
    )


def _ev_heads_shared() -> Facts:
    x, w_in, w_out = _attention_parts()
    with torch.no_grad(), _ExpandSpy() as spy:
        article_attention(x, w_in, w_out, heads=4)
    q = (x @ w_in.T).chunk(3, dim=-1)[0]
    return {
        "expands": len(spy.inputs),
        "expanded_a_weight": any(shares_storage(t, w) for t in spy.inputs for w in (w_in, w_out)),
        "q_shape": tuple(q.shape),
        "heads_split": q.dim() == 4,
    }


def _j_heads_shared(f: Mapping[str, Any]) -> Verdict:
    if f["heads_split"] and f["expanded_a_weight"]:
        return "true", "the heads are split and a projection weight is expanded across them"
    return "false", (
        f"no weight is ever expanded (the {f['expands']} expand in a forward is of the mask); the heads are "
        f"never split (q is {f['q_shape']}: one head of full width, num_heads only changes the scale); "
        "and without a softmax the scores are not attention weights"
    )


A12 = claim_row(
    "A12",
    A,
    "2.2 Attention",
    "semantics",
    "In a Transformer, expand() elegantly shares parameters across attention heads, as its MultiHeadAttention class shows.",
    _ev_heads_shared,
    _j_heads_shared,
    true={"heads_split": True, "expanded_a_weight": True},
)


# ---- A13 -------------------------------------------------------------------------------------------------------------
def _ev_mask_reused() -> Facts:
    x, w_in, w_out = _attention_parts()
    calls = 3
    with torch.no_grad(), measure(log_ops=True) as m:
        for _ in range(calls):
            out = article_attention(x, w_in, w_out, heads=4)
    made = [op.bytes for op in m.ops if op.name.startswith("aten.ones")]
    with torch.no_grad():  # the same layer with the mask step left out
        q, k, v = (x @ w_in.T).chunk(3, dim=-1)
        plain = torch.bmm(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(16 // 4), v) @ w_out.T
    return {
        "calls": calls,
        "masks_built": len(made),
        "mask_bytes_each": made[0] if made else 0,
        "mask_changes_output": not torch.equal(out, plain),
    }


def _j_mask_reused(f: Mapping[str, Any]) -> Verdict:
    hides = "" if f["mask_changes_output"] else "; and an all-ones mask hides nothing (output equal without it)"
    if f["masks_built"] >= f["calls"]:
        return "false", (
            f"torch.ones builds a new {f['mask_bytes_each']}-byte mask on each of {f['calls']} calls "
            f"({f['masks_built']} built); expand saves only a copy masked_fill never needed{hides}"
        )
    return "true", f"{f['masks_built']} masks built over {f['calls']} calls{hides}"


A13 = claim_row(
    "A13",
    A,
    "2.2 Attention",
    "memory",
    "In that class, expanding torch.ones(1, N, N) to the batch avoids creating the mask repeatedly.",
    _ev_mask_reused,
    _j_mask_reused,
    true={"masks_built": 1},
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
    A10,
    A11,
    A12,
    A13,
)
