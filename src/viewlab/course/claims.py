"""Every claim of the two source articles, with the code that checks it and the rule that judges it.

The course was prompted by two blog posts (in Chinese):

* **000 expand** -- "PyTorch张量扩展的隐藏技巧：用expand()高效实现数据复制与广播" ("Hidden tricks of PyTorch
  tensor expansion: efficient data replication and broadcasting with expand()");
* **001 expand_as** -- "PyTorch张量广播的幕后功臣：手把手教你用expand_as()实现高效数据对齐" ("The unsung hero
  of PyTorch broadcasting: efficient data alignment with expand_as(), step by step").

Each :class:`Claim` restates one thing an article says, in our words; its ``evidence`` function runs
code here and returns facts (bytes, booleans, error texts, timings with their spread); its ``judge``
maps those facts to one verdict of :data:`VERDICTS` and a reason. Nothing is a literal: feed a judge
other facts and it gives another verdict (``examples`` holds, per claim, facts that do so, and
``tests/test_claims.py`` checks every one). Where an article's example is needed, its behaviour is
described in prose and rebuilt here in our own code -- the articles' code is not carried over.

>>> rows = table(ids=["A02", "B09"])
>>> [(r["id"], r["verdict"]) for r in rows]
[('A02', 'true'), ('B09', 'true')]
>>> sorted(rows[0])
['article', 'evidence', 'id', 'statement', 'verdict', 'why']
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..memory import measure
from ..sharing import shares_storage
from . import article_helpers as ah

__all__ = [
    "VERDICTS",
    "VERDICT_MEANINGS",
    "KINDS",
    "ARTICLES",
    "Claim",
    "CLAIMS",
    "get",
    "judge",
    "table",
    "counts",
    "format_table",
    "show",
]

#: The one verdict vocabulary of the course.
VERDICT_MEANINGS: dict[str, str] = {
    "true": "the literal statement holds (if it is redundant or pointless, `why` says so)",
    "false": "the literal statement does not hold",
    "misleading": "the literal statement holds, but it teaches a wrong lesson (`why` says which)",
    "not checkable here": "this machine lacks what the check needs (`why` names it, e.g. a CUDA GPU); "
    "where it is present, the claim is checked",
}
VERDICTS: tuple[str, ...] = tuple(VERDICT_MEANINGS)
KINDS: tuple[str, ...] = ("memory", "speed", "semantics", "API", "advice")
ARTICLES: dict[str, str] = {
    "000 expand": "PyTorch张量扩展的隐藏技巧：用expand()高效实现数据复制与广播",
    "001 expand_as": "PyTorch张量广播的幕后功臣：手把手教你用expand_as()实现高效数据对齐",
}
A, B = "000 expand", "001 expand_as"
NOT_CHECKABLE = "not checkable here"

Facts = dict[str, Any]
Verdict = tuple[str, str]


@dataclass(frozen=True)
class Claim:
    """One claim of a source article.

    Attributes:
        id: ``A01``... for article 000, ``B01``... for article 001.
        article: ``"000 expand"`` or ``"001 expand_as"``.
        section: where in the article (its own numbering, titles translated).
        statement: our one-sentence restatement of what the article says.
        kind: one of :data:`KINDS`.
        evidence: runs code, returns facts (plain Python values).
        judge: maps facts to ``(verdict, why)``.
        examples: verdict -> facts (overriding the measured ones) under which ``judge`` gives that verdict.
    """

    id: str
    article: str
    section: str
    statement: str
    kind: str
    evidence: Callable[[], Facts]
    judge: Callable[[Mapping[str, Any]], Verdict]
    examples: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.article not in ARTICLES:
            raise ValueError(f"claim {self.id}: article must be one of {tuple(ARTICLES)}, got {self.article!r}.")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind must be one of {KINDS}, got {self.kind!r}.")
        bad = [v for v in self.examples if v not in VERDICTS]
        if bad:
            raise ValueError(f"claim {self.id}: example verdicts {bad} are not in {VERDICTS}.")


# ------------------------------------------------------------------------------------------------
# Small measuring helpers
# ------------------------------------------------------------------------------------------------
def _error(fn: Callable[[], Any]) -> str | None:
    """``"TypeName: first sentence"`` of the exception ``fn()`` raises, or None when it runs."""
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the text of any error is the evidence
        return f"{type(err).__name__}: {str(err).split('. ')[0].rstrip('.')}"
    return None


def _bytes(fn: Callable[[], Any], device: str = "cpu") -> tuple[int, int, Any]:
    """(bytes still held, peak bytes, result) of running ``fn`` under :func:`viewlab.measure`."""
    with measure(device=device) as m:
        out = fn()
    return m.allocated_bytes, m.peak_bytes, out


def _time(fn: Callable[[], Any], min_run_time: float = 0.05) -> dict[str, float]:
    """Median and interquartile range (seconds per call) from ``torch.utils.benchmark`` (which
    synchronises CUDA, so GPU work is waited for)."""
    from torch.utils import benchmark

    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=1)
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return {"median_s": float(m.median), "iqr_s": float(m.iqr), "runs": len(m.times)}


def _time_pair(
    fa: Callable[[], Any], fb: Callable[[], Any], rounds: int = 5, min_run_time: float = 0.02
) -> tuple[dict[str, float], dict[str, float], list[float]]:
    """Time two candidates in alternating rounds (so a burst of load hits both). Returns the median and
    interquartile range of all per-call times of ``fa`` and of ``fb``, and per round the ratio of
    their medians (``fb`` over ``fa``): a difference is real only if every round agrees on it."""
    from torch.utils import benchmark

    times: dict[str, list[float]] = {"a": [], "b": []}
    ratios = []
    for _ in range(rounds):
        medians = {}
        for key, fn in (("a", fa), ("b", fb)):
            m = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=1).blocked_autorange(
                min_run_time=min_run_time
            )
            times[key] += list(m.times)
            medians[key] = float(m.median)
        ratios.append(round(medians["b"] / medians["a"], 3))
    out = []
    for key in ("a", "b"):
        t = torch.tensor(times[key], dtype=torch.float64)
        q1, med, q3 = (float(torch.quantile(t, q)) for q in (0.25, 0.5, 0.75))
        out.append({"median_s": med, "iqr_s": q3 - q1, "runs": len(times[key])})
    return out[0], out[1], ratios


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:,.2f} ms"


def _mib(n: int) -> str:
    return f"{n:,} B ({n / 2**20:.1f} MiB)"


def _which_faster(
    a: Mapping[str, float], b: Mapping[str, float], margin: float = 1.25, round_ratios: list[float] | None = None
) -> str:
    """Compare two timings with their spread: ``"a"`` or ``"b"`` (faster by ``margin``), ``"same"``
    (within 20 %) or ``"unclear"`` (the spread exceeds the difference).

    With ``round_ratios`` (b's median over a's, per alternating round, see :func:`_time_pair`), a
    difference counts only if every round shows it: rounds that disagree mean the spread exceeds the
    difference. Without them, the medians must differ by more than the interquartile ranges
    (taken as median +- IQR/2) allow.
    """
    if round_ratios:
        if min(round_ratios) >= margin:
            return "a"
        if max(round_ratios) <= 1 / margin:
            return "b"
        if all(1 / 1.2 <= r <= 1.2 for r in round_ratios):
            return "same"
        return "unclear"
    gap = b["median_s"] - a["median_s"]
    spread = (a["iqr_s"] + b["iqr_s"]) / 2
    ratio = b["median_s"] / a["median_s"]
    if abs(gap) > spread and (ratio >= margin or ratio <= 1 / margin):
        return "a" if gap > 0 else "b"
    relative_spread = a["iqr_s"] / a["median_s"] + b["iqr_s"] / b["median_s"]
    if abs(ratio - 1) <= 0.2 and relative_spread <= 0.5:
        return "same"
    return "unclear"


def _judge_claimed_times(facts: Mapping[str, Any], claimed: Mapping[str, float]) -> Verdict:
    """True when every measured median is within 2x of the claimed time, false when one is off by more
    than 5x beyond its spread, otherwise not checkable (spread or hardware could explain the gap)."""
    within, off, parts = [], [], []
    for name, claim_s in claimed.items():
        med, iqr = facts[f"{name}_median_s"], facts[f"{name}_iqr_s"]
        low, high = max(med - iqr, 1e-12), med + iqr  # the measured time, with its spread
        within.append(0.5 * claim_s <= med <= 2 * claim_s and iqr <= med)
        if low > 5 * claim_s or high < claim_s / 5:
            off.append(name)
        parts.append(f"{name}: claimed {_us(claim_s)}, measured {_us(med)} (IQR {_us(iqr)})")
    detail = "; ".join(parts)
    if off:
        return "false", f"{', '.join(off)} off by more than 5x even at the edges of the spread: {detail}"
    if all(within):
        return "true", f"within 2x of the claimed times: {detail}"
    return NOT_CHECKABLE, f"spread exceeds the difference, or the gap is within what other hardware explains: {detail}"


# ------------------------------------------------------------------------------------------------
# Article 000 (expand)
# ------------------------------------------------------------------------------------------------
def _ev_repeat_allocates() -> Facts:
    base = torch.randn(1, 512)
    held, _, rep = _bytes(lambda: base.repeat(8, 1))
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


def _ev_expand_view() -> Facts:
    base = torch.randn(1, 512)
    held, _, e = _bytes(lambda: base.expand(8, 512))
    return {"expand_bytes": held, "shares": shares_storage(e, base), "stride": tuple(e.stride())}


def _j_expand_view(f: Mapping[str, Any]) -> Verdict:
    if f["expand_bytes"] == 0 and f["shares"]:
        return "true", f"expand(8, 512) allocated 0 B and reads the same storage, stride {f['stride']}"
    return "false", f"expand allocated {f['expand_bytes']:,} B, shares memory: {f['shares']}"


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


_KIND_WORDS = {"view": "a view of", "copy": "a copy of", "itself": "the input itself for"}


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


def _ev_view_metadata() -> Facts:
    from ..layout import layout

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


def _ev_memory_table() -> Facts:
    row = torch.randn(1, 512)
    rep, _, _ = _bytes(lambda: row.repeat(1024, 1))
    exp, _, _ = _bytes(lambda: row.expand(1024, 512))
    return {"repeat_bytes": rep, "expand_bytes": exp}


def _j_memory_table(f: Mapping[str, Any]) -> Verdict:
    claimed = {"repeat_bytes": 16.0, "expand_bytes": 2.0}
    close = all(abs(f[k] / 2**20 - mb) <= 0.05 * mb for k, mb in claimed.items())
    got = f"repeat to (1024, 512) float32: {_mib(f['repeat_bytes'])}; expand: {f['expand_bytes']:,} B"
    if close:
        return "true", f"measured {got}, as the table says"
    return "false", f"measured {got}; the table says 16.0 MB and 2.0 MB (2 MiB is what repeat really takes)"


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
            t = _time(fn)
            facts[f"{name}_median_s"], facts[f"{name}_iqr_s"] = t["median_s"], t["iqr_s"]
    return facts


def _j_table_times(f: Mapping[str, Any]) -> Verdict:
    if not f["cuda"]:
        return NOT_CHECKABLE, "needs a CUDA GPU: the table's times are for an RTX 3090, and this machine has none"
    verdict, why = _judge_claimed_times(f, {"repeat": 0.45e-3, "expand": 0.12e-3})
    return verdict, f"on {f['device_name']} (not the article's RTX 3090), {why}; expand launches no kernel"


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
        if _error(lambda op=op, src=src: op(src.expand(3, 4))):
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


def _ev_batch_view() -> Facts:
    sample = torch.randn(3, 8, 8)
    held, _, batch = _bytes(lambda: sample.unsqueeze(0).expand(16, -1, -1, -1))
    stack_b, _, stacked = _bytes(lambda: torch.stack([sample] * 16))
    rep_b, _, _ = _bytes(lambda: sample.repeat(16, 1, 1, 1))
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


def _ev_batch_times() -> Facts:
    image = torch.randn(3, 224, 224)
    t_exp = _time(lambda: image.unsqueeze(0).expand(256, -1, -1, -1), min_run_time=0.05)
    t_rep = _time(lambda: image.repeat(256, 1, 1, 1), min_run_time=0.25)
    written = 256 * image.numel() * image.element_size()
    return {
        "expand_median_s": t_exp["median_s"],
        "expand_iqr_s": t_exp["iqr_s"],
        "repeat_median_s": t_rep["median_s"],
        "repeat_iqr_s": t_rep["iqr_s"],
        "repeat_writes_bytes": written,
    }


def _j_batch_times(f: Mapping[str, Any]) -> Verdict:
    verdict, why = _judge_claimed_times(f, {"expand": 28.7e-6, "repeat": 152e-6})
    need = f["repeat_writes_bytes"] / 152e-6 / 1e9
    return verdict, f"{why}; repeat writes {_mib(f['repeat_writes_bytes'])}, which in 152 us needs {need:,.0f} GB/s"


def _article_attention(x: torch.Tensor, w_in: torch.Tensor, w_out: torch.Tensor, heads: int) -> torch.Tensor:
    """Our model of article 000's attention layer (our code, its behaviour): one projection makes q, k
    and v side by side; the heads are never split (``heads`` only sets the scale); no softmax; a mask
    of ones is built and expanded on every call, then used to hide nothing."""
    n_batch, n_tok, width = x.shape
    q, k, v = (x @ w_in.T).chunk(3, dim=-1)
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(width // heads)
    keep = torch.ones(1, n_tok, n_tok).expand(n_batch, n_tok, n_tok)
    scores = scores.masked_fill(keep == 0, float("-inf"))
    return torch.bmm(scores, v) @ w_out.T


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
        _article_attention(x, w_in, w_out, heads=4)
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


def _ev_mask_reused() -> Facts:
    x, w_in, w_out = _attention_parts()
    calls = 3
    with torch.no_grad(), measure(log_ops=True) as m:
        for _ in range(calls):
            out = _article_attention(x, w_in, w_out, heads=4)
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


def _pool_expanded(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Our model of article 000's pooling (its behaviour): a learnable (1, D) weight is stretched to
    (batch, D), given a length-1 time axis, multiplied with x (batch, T, D) and summed over T."""
    stretched = w.expand(len(x), w.shape[-1])[:, None, :]
    return (x * stretched).sum(1)


def _ev_pool_weights() -> Facts:
    w = torch.randn(1, 8)
    x = torch.randn(4, 6, 8)
    held, _, _ = _bytes(lambda: w.expand(4, 8)[:, None, :])
    _, peak_e, out_e = _bytes(lambda: _pool_expanded(x, w))
    _, peak_b, out_b = _bytes(lambda: (x * w).sum(1))
    return {
        "expand_bytes": held,
        "equal_to_broadcasting": torch.equal(out_e, out_b),
        "peak_expand": peak_e,
        "peak_broadcasting": peak_b,
    }


def _j_pool_weights(f: Mapping[str, Any]) -> Verdict:
    if f["expand_bytes"] == 0:
        redundant = (
            (
                " -- and redundant: x * weights broadcasts by itself, same result, same peak "
                f"({f['peak_expand']:,} B vs {f['peak_broadcasting']:,} B)"
            )
            if f["equal_to_broadcasting"]
            else ""
        )
        return "true", f"the expand (and unsqueeze) allocate 0 B{redundant}"
    return "false", f"the expand allocated {f['expand_bytes']:,} B"


def _ev_per_sample() -> Facts:
    w = torch.randn(1, 8, requires_grad=True)
    x = torch.randn(4, 6, 8)
    stretched = w.expand(len(x), 8)[:, None, :]
    (_pool_expanded(x, w)).sum().backward()
    return {
        "parameter_shape": tuple(w.shape),
        "batch_stride": stretched.stride(0),
        "grad_shape": tuple(w.grad.shape),
        "grad_is_batch_sum": torch.allclose(w.grad, x.sum((0, 1), keepdim=True)[0]),
    }


def _j_per_sample(f: Mapping[str, Any]) -> Verdict:
    if f["batch_stride"] == 0 and f["parameter_shape"][0] == 1:
        return "false", (
            f"all samples share one {f['parameter_shape']} weight row: the expanded weights have batch "
            f"stride 0, and its gradient is summed over the batch (shape {f['grad_shape']}, equals the "
            f"batch sum: {f['grad_is_batch_sum']}); own weights per sample would need a (batch, D) "
            "parameter, and a fixed batch size"
        )
    return (
        "true",
        f"each sample reads its own weights (parameter {f['parameter_shape']}, batch stride {f['batch_stride']})",
    )


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _ev_allocated_expand() -> Facts:
    dev = _device()
    row = torch.randn(1, 1024, device=dev)
    held, _, _ = _bytes(lambda: row.expand(1024, 1024), device=dev)
    return {"device": dev, "expand_bytes": held}


def _j_allocated_expand(f: Mapping[str, Any]) -> Verdict:
    where = "the CUDA allocator" if f["device"] == "cuda" else "tensor storages on the CPU (the same count a GPU gives)"
    if f["expand_bytes"] == 0:
        return "true", f"expand(1024, 1024) allocated 0 B, counted by {where}"
    return "false", f"expand allocated {f['expand_bytes']:,} B, counted by {where}"


def _ev_allocated_repeat() -> Facts:
    dev = _device()
    row = torch.randn(1, 1024, device=dev)
    held, _, _ = _bytes(lambda: row.repeat(1024, 1), device=dev)
    return {"device": dev, "repeat_bytes": held}


def _j_allocated_repeat(f: Mapping[str, Any]) -> Verdict:
    mib = f["repeat_bytes"] / 2**20
    if 7.6 <= mib <= 8.4 or 7.6 <= f["repeat_bytes"] / 1e6 <= 8.4:
        return "true", f"repeat(1024, 1) allocated {_mib(f['repeat_bytes'])} on {f['device']}"
    return (
        "false",
        f"repeat(1024, 1) allocated {_mib(f['repeat_bytes'])} on {f['device']}: 1024 x 1024 x 4 bytes, not 8 MB",
    )


def _graph_nodes(t: torch.Tensor) -> list[str]:
    seen, todo, names = set(), [t.grad_fn], []
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__)
        todo += [n for n, _ in node.next_functions]
    return sorted(names)


def _ev_graph() -> Facts:
    x = torch.randn(1, requires_grad=True)
    return {"expand_nodes": _graph_nodes(x.expand(4)), "repeat_nodes": _graph_nodes(x.repeat(4))}


def _j_graph(f: Mapping[str, Any]) -> Verdict:
    e, r = f["expand_nodes"], f["repeat_nodes"]
    if len(r) > len(e):
        return "true", f"repeat's graph has more nodes: {r} vs {e}"
    return "false", f"both graphs have one node over the leaf: expand {e}, repeat {r}; neither records copies"


def _ev_backward() -> Facts:
    x = torch.randn(1, 2048, requires_grad=True)
    upstream = torch.randn(512, 2048)
    facts: Facts = {}
    outputs = {"expand": x.expand(512, 2048), "repeat": x.repeat(512, 1)}
    for name, y in outputs.items():
        with measure(log_ops=True) as m:
            torch.autograd.grad(y, x, upstream, retain_graph=True)
        facts[f"{name}_backward_ops"] = [op.name.split(".")[1] for op in m.ops]
        facts[f"{name}_backward_bytes"] = sum(op.bytes for op in m.ops)
    t_e, t_r, ratios = _time_pair(
        lambda: torch.autograd.grad(outputs["expand"], x, upstream, retain_graph=True),
        lambda: torch.autograd.grad(outputs["repeat"], x, upstream, retain_graph=True),
    )
    facts["expand_median_s"], facts["expand_iqr_s"] = t_e["median_s"], t_e["iqr_s"]
    facts["repeat_median_s"], facts["repeat_iqr_s"] = t_r["median_s"], t_r["iqr_s"]
    facts["repeat_over_expand_by_round"] = ratios
    return facts


def _j_backward(f: Mapping[str, Any]) -> Verdict:
    e = {"median_s": f["expand_median_s"], "iqr_s": f["expand_iqr_s"]}
    r = {"median_s": f["repeat_median_s"], "iqr_s": f["repeat_iqr_s"]}
    times = f"backward {_us(e['median_s'])} (IQR {_us(e['iqr_s'])}) vs {_us(r['median_s'])} (IQR {_us(r['iqr_s'])})"
    ops = (
        f"expand's backward runs {f['expand_backward_ops']} ({f['expand_backward_bytes']:,} B), repeat's "
        f"{f['repeat_backward_ops']} ({f['repeat_backward_bytes']:,} B)"
    )
    faster = _which_faster(e, r, margin=1.5, round_ratios=f["repeat_over_expand_by_round"])
    times += f" (repeat / expand by round: {f['repeat_over_expand_by_round']})"
    same_work = f["expand_backward_bytes"] == f["repeat_backward_bytes"] and [
        n for n in f["expand_backward_ops"] if n != "view"
    ] == [n for n in f["repeat_backward_ops"] if n != "view"]
    if faster == "a":
        return "true", f"expand's backward is faster: {times}; {ops}"
    if same_work:
        return "false", f"the same work: {ops} (a view is free); each accumulates into x.grad once; {times}"
    if faster == "unclear":
        return (
            NOT_CHECKABLE,
            f"the work differs and the spread exceeds the difference (the rounds disagree): {times}; {ops}",
        )
    return "false", f"expand's backward is not faster: {times}; {ops}"


def _ev_nonsingleton_error() -> Facts:
    return {"error": _error(lambda: torch.randn(2, 3).expand(4, 3))}


def _j_nonsingleton_error(f: Mapping[str, Any]) -> Verdict:
    if f["error"] and "non-singleton dimension 0" in f["error"]:
        return "true", f["error"]
    return "false", f"expand(4, 3) of a (2, 3) tensor gave: {f['error'] or 'no error'}"


def _ev_minus_one_grow() -> Facts:
    err = _error(lambda: torch.ones(1, 5).expand(-1, 10))
    shape = None if err else tuple(torch.ones(1, 5).expand(-1, 10).shape)
    return {"error": err, "shape": shape}


def _j_minus_one_grow(f: Mapping[str, Any]) -> Verdict:
    if f["shape"] == (1, 10):
        return "true", "shape (1, 10)"
    got = f["error"] or f"shape {f['shape']}"
    return "false", f"{got}: -1 keeps dimension 0 at 1, and dimension 1 has size 5, not 1"


def _ev_minus_one_keep() -> Facts:
    return {"shape": tuple(torch.ones(1, 5).expand(2, -1).shape)}


def _j_minus_one_keep(f: Mapping[str, Any]) -> Verdict:
    return ("true", "shape (2, 5)") if f["shape"] == (2, 5) else ("false", f"shape {f['shape']}")


def _ev_permute_expand() -> Facts:
    t = torch.randn(1, 3, 224)
    held, _, out = _bytes(lambda: t.permute(1, 0, 2).expand(3, 256, 224))
    return {"shape": tuple(out.shape), "stride": tuple(out.stride()), "bytes": held, "shares": shares_storage(out, t)}


def _j_permute_expand(f: Mapping[str, Any]) -> Verdict:
    if f["shape"] == (3, 256, 224) and f["bytes"] == 0:
        return "true", f"shape (3, 256, 224), stride {f['stride']}, 0 B: both steps are views"
    return "false", f"shape {f['shape']}, {f['bytes']:,} B"


def _ev_contiguous_temporary() -> Facts:
    original = torch.randn(1, 100)
    held, peak, out = _bytes(lambda: original.expand(100, 100).contiguous())
    return {"held_while_result_lives": held, "peak": peak, "result_bytes": out.numel() * out.element_size()}


def _j_contiguous_temporary(f: Mapping[str, Any]) -> Verdict:
    if f["held_while_result_lives"] >= f["result_bytes"] > 0:
        return "misleading", (
            f"the copy holds {f['held_while_result_lives']:,} B -- the full expanded size -- for as "
            "long as the result lives, like any tensor: 'temporary' undersells a copy of every element"
        )
    return "true", f"only {f['held_while_result_lives']:,} B stay held after the peak of {f['peak']:,} B"


def _ev_contiguous_example() -> Facts:
    facts: Facts = {}
    for case, shape in {"row_original": (1, 100), "square_original": (100, 100)}.items():
        original = torch.ones(shape)
        safe = original.expand(100, 100).contiguous()
        safe[0] = 0
        facts[f"{case}_changed"] = bool((original == 0).any())
    return facts


def _j_contiguous_example(f: Mapping[str, Any]) -> Verdict:
    if not f["row_original_changed"] and f["square_original_changed"]:
        return "misleading", (
            "the article never defines `original`: for a (1, 100) row the write leaves it unchanged, "
            "but for a (100, 100) original expand is a no-op, contiguous() returns the same memory and "
            "the write changes it -- the safety comes from the stretch, not from contiguous()"
        )
    if not f["row_original_changed"] and not f["square_original_changed"]:
        return "true", "the write left the original unchanged for every shape tried"
    return "false", "the write through the contiguous() result changed the original"


def _ev_saving_range() -> Facts:
    frames = torch.randn(64, 256)  # 64 frames of a video clip, 256 features each
    per_clip = torch.randn(1, 256)
    cases = {
        "add to every frame": (lambda: frames + per_clip.repeat(64, 1), lambda: frames + per_clip.expand(64, 256)),
        "mean over frames": (lambda: per_clip.repeat(64, 1).mean(0), lambda: per_clip.expand(64, 256).mean(0)),
        "broadcasting instead": (lambda: frames + per_clip, lambda: frames + per_clip.expand(64, 256)),
    }
    savings = {}
    for name, (with_repeat, with_expand) in cases.items():
        _, peak_r, _ = _bytes(with_repeat)
        _, peak_e, _ = _bytes(with_expand)
        savings[name] = round(1 - peak_e / peak_r, 3)
    return {"savings": savings}


def _j_saving_range(f: Mapping[str, Any]) -> Verdict:
    s = f["savings"]
    shown = ", ".join(f"{k}: {v:.0%}" for k, v in s.items())
    inside = [0.30 <= v <= 0.70 for v in s.values()]
    if all(inside):
        return "true", f"every block measured here saves 30-70 %: {shown}"
    if not any(inside):
        return "false", f"no block measured here saves 30-70 %: {shown}"
    return NOT_CHECKABLE, (
        "needs the author's (unnamed) projects: the saving is a property of the workload, not of "
        f"expand -- here, on small blocks: {shown}"
    )


def _ev_threshold() -> Facts:
    row = torch.randn(1, 512)
    by_count = {}
    for n in (2, 8, 16, 17, 64):
        e, _, _ = _bytes(lambda n=n: row.expand(n, 512))
        r, _, _ = _bytes(lambda n=n: row.repeat(n, 1))
        by_count[n] = (e, r)
    return {"bytes_by_count": by_count}


def _j_threshold(f: Mapping[str, Any]) -> Verdict:
    pairs = f["bytes_by_count"]
    shown = ", ".join(f"{n}: {e:,} B vs {r:,} B" for n, (e, r) in pairs.items())
    if all(e < r for n, (e, r) in pairs.items() if n > 16):
        if all(e < r for e, r in pairs.values()):
            return "misleading", (
                f"above 16 repeats expand is indeed cheaper -- but so it is at every count; nothing "
                f"changes at 16 (expand vs repeat bytes: {shown})"
            )
        return "true", f"expand wins only above 16: {shown}"
    return "false", f"repeat is not costlier above 16: {shown}"


# ------------------------------------------------------------------------------------------------
# Article 001 (expand_as)
# ------------------------------------------------------------------------------------------------
def _ev_broadcast_no_copy() -> Facts:
    a, b = torch.randn(3, 1), torch.randn(1, 4)
    with measure(log_ops=True) as m:
        c = a + b
    return {
        "allocated": m.allocated_bytes,
        "result_bytes": c.numel() * c.element_size(),
        "ops": [op.name for op in m.ops],
    }


def _j_broadcast_no_copy(f: Mapping[str, Any]) -> Verdict:
    if f["allocated"] == f["result_bytes"]:
        return "true", f"(3, 1) + (1, 4) allocated {f['allocated']} B = the (3, 4) result only; ops: {f['ops']}"
    return "false", f"allocated {f['allocated']} B for a {f['result_bytes']}-byte result: the inputs were copied"


def _torch_broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None


def _small_shape_pairs() -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    shapes = [s for n in range(4) for s in itertools.product(range(4), repeat=n)]
    return list(itertools.product(shapes, shapes))


def _ev_three_rules() -> Facts:
    pairs = _small_shape_pairs()
    wrong = [p for p in pairs if ah.article_broadcast_shape(*p) != _torch_broadcast(*p)]
    return {"pairs": len(pairs), "disagreements": len(wrong), "first": wrong[0] if wrong else None}


def _j_three_rules(f: Mapping[str, Any]) -> Verdict:
    if f["disagreements"] == 0:
        return (
            "true",
            f"the three rules, applied literally, agree with torch.broadcast_shapes on all {f['pairs']:,} shape pairs (0-3 dims of size 0-3)",
        )
    return "false", f"{f['disagreements']:,} of {f['pairs']:,} pairs disagree, e.g. {f['first']}"


def _ev_example_shape() -> Facts:
    return {"shape": tuple((torch.randn(3, 1) + torch.randn(1, 4)).shape)}


def _j_example_shape(f: Mapping[str, Any]) -> Verdict:
    return ("true", "shape (3, 4)") if f["shape"] == (3, 4) else ("false", f"shape {f['shape']}")


def _ev_weights_times_features() -> Facts:
    w, feats = torch.randn(2, 1), torch.randn(2, 7)
    out = w * feats
    return {"shape": tuple(out.shape), "row_scaled": torch.equal(out[1], w[1, 0] * feats[1])}


def _j_weights_times_features(f: Mapping[str, Any]) -> Verdict:
    if f["shape"] == (2, 7) and f["row_scaled"]:
        return "true", "(2, 1) * (2, 7) -> (2, 7), each row scaled by its own weight"
    return "false", f"shape {f['shape']}, rows scaled by their weight: {f['row_scaled']}"


def _ev_expand_as_view() -> Facts:
    a, b = torch.randn(3, 1), torch.randn(3, 4)
    held, _, out = _bytes(lambda: a.expand_as(b))
    return {"bytes": held, "shares": shares_storage(out, a), "shape": tuple(out.shape), "target": tuple(b.shape)}


def _j_expand_as_view(f: Mapping[str, Any]) -> Verdict:
    if f["bytes"] == 0 and f["shares"] and f["shape"] == f["target"]:
        return "true", f"0 B, shares memory with a, shape {f['shape']}"
    return "false", f"{f['bytes']:,} B, shares: {f['shares']}, shape {f['shape']}"


def _ev_expand_equals_expand_as() -> Facts:
    a, b = torch.randn(3, 1), torch.randn(3, 4)
    e, ea = a.expand(3, 4), a.expand_as(b)
    return {"equal": torch.equal(e, ea), "strides": (tuple(e.stride()), tuple(ea.stride()))}


def _j_expand_equals_expand_as(f: Mapping[str, Any]) -> Verdict:
    if f["equal"] and f["strides"][0] == f["strides"][1]:
        return "true", f"equal values, same strides {f['strides'][0]}: b lends only its shape"
    return "false", f"equal: {f['equal']}, strides {f['strides']}"


def _ev_channel_attention() -> Facts:
    from ..attention import SqueezeExcitation

    torch.manual_seed(0)
    block = SqueezeExcitation(32, reduction=16)
    x = torch.randn(2, 32, 6, 6)
    with torch.no_grad():
        w = block.weights(x)  # (B, C, 1, 1)
        with measure(log_ops=True) as m_e:
            out_e = block(x, use_expand_as=True)
        with measure(log_ops=True) as m_b:
            out_b = block(x, use_expand_as=False)
        by_hand = torch.stack([x[i] * w[i, :, 0, 0][:, None, None] for i in range(len(x))])
    return {
        "expand_bytes": sum(op.bytes for op in m_e.ops if "expand" in op.name),
        "every_position_weighted": torch.allclose(out_e, by_hand),
        "equal_to_broadcasting": torch.equal(out_e, out_b),
        "peak_expand_as": m_e.peak_bytes,
        "peak_broadcasting": m_b.peak_bytes,
    }


def _j_channel_attention(f: Mapping[str, Any]) -> Verdict:
    if f["expand_bytes"] == 0 and f["every_position_weighted"]:
        redundant = (
            (
                f" -- and redundant: x * y broadcasts by itself, identical output, same peak ({f['peak_expand_as']:,} B"
                f" vs {f['peak_broadcasting']:,} B)"
            )
            if f["equal_to_broadcasting"]
            else ""
        )
        return "true", f"the expand_as costs 0 B and every position gets its channel's weight{redundant}"
    return "false", f"expand bytes {f['expand_bytes']:,}; every position weighted: {f['every_position_weighted']}"


def _ev_no_singleton() -> Facts:
    return {"error": _error(lambda: torch.randn(3, 2).expand_as(torch.randn(3, 4)))}


def _j_no_singleton(f: Mapping[str, Any]) -> Verdict:
    if f["error"] and f["error"].startswith("RuntimeError"):
        return "true", f["error"]
    return "false", f"expand_as gave: {f['error'] or 'no error'}"


def _ev_write_through() -> Facts:
    a = torch.tensor([[1.0], [2.0], [3.0]])
    b = a.expand_as(torch.empty(3, 4))
    b[0, 0] = 10
    return {"a_after": a.flatten().tolist(), "row0": b[0].tolist()}


def _j_write_through(f: Mapping[str, Any]) -> Verdict:
    if f["a_after"] == [10.0, 2.0, 3.0]:
        return "true", f"a is now {f['a_after']}; the whole of b's row 0 reads it: {f['row0']}"
    return "false", f"a is {f['a_after']}"


def _ev_gradient() -> Facts:
    a = torch.randn(3, 1, requires_grad=True)
    w = torch.randn(3, 4)
    (a.expand_as(w) * w).sum().backward()
    return {"grad_is_row_sum": torch.allclose(a.grad, w.sum(1, keepdim=True)), "grad_shape": tuple(a.grad.shape)}


def _j_gradient(f: Mapping[str, Any]) -> Verdict:
    if f["grad_is_row_sum"] and f["grad_shape"] == (3, 1):
        return "true", "a.grad has a's shape (3, 1) and equals the gradient summed over the expanded dim"
    return "false", f"grad shape {f['grad_shape']}, equals the summed gradient: {f['grad_is_row_sum']}"


def _ev_cache() -> Facts:
    p = torch.randn(1, 64, 1, 1)
    held, _, _ = _bytes(lambda: p.expand(8, 64, 16, 16))
    t = _time(lambda: p.expand(8, 64, 16, 16), min_run_time=0.02)
    layer = nn.Linear(4, 3)
    cached = layer.bias.expand(2, 3)
    layer.double()
    return {
        "expand_bytes": held,
        "expand_median_s": t["median_s"],
        "cached_follows_parameter": shares_storage(cached, layer.bias) and cached.dtype == layer.bias.dtype,
    }


def _j_cache(f: Mapping[str, Any]) -> Verdict:
    stale = (
        ""
        if f["cached_follows_parameter"]
        else "; and a cached view goes stale: after module.double() it still reads the old float32 tensor"
    )
    if f["expand_bytes"] == 0:
        return "misleading", (
            f"caching saves at most the expand itself -- 0 B and {_us(f['expand_median_s'])} per call -- "
            f"so there is nothing worth pre-computing{stale}"
        )
    return "true", f"an expand allocates {f['expand_bytes']:,} B, worth caching{stale}"


class _ShapeBufferScale(nn.Module):
    """Our model of article 001's "efficient expansion" example (its behaviour, our code): a learnable
    (1, C, 1, 1) scale; buffers of two "common" input shapes, allocated and never filled, kept only to
    compare sizes; forward multiplies x by the scale stretched onto whichever buffer matches x, else onto x."""

    def __init__(self, channels: int, common: Iterable[tuple[int, ...]]) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.randn(1, channels, 1, 1))
        self.templates = []
        for i, shape in enumerate(common):
            self.register_buffer(f"template_{i}", torch.empty(shape))
            self.templates.append(f"template_{i}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        target = next((getattr(self, n) for n in self.templates if getattr(self, n).shape == x.shape), x)
        return x * self.scale.expand_as(target)


def _ev_shape_buffers() -> Facts:
    common = [(16, 256, 32, 32), (32, 256, 64, 64)]
    held, _, model = _bytes(lambda: _ShapeBufferScale(256, common))
    saved = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    x = torch.randn(4, 256, 16, 16)
    model.template_0 = torch.empty(x.shape)  # make the first branch the one taken, at a small size
    with torch.no_grad():
        same = torch.equal(model(x), x * model.scale)
        t_model, t_plain, ratios = _time_pair(lambda: model(x), lambda: x * model.scale)
    return {
        "buffer_bytes": held - 256 * 4,
        "state_dict_bytes": saved,
        "same_output_as_broadcasting": same,
        "model_median_s": t_model["median_s"],
        "model_iqr_s": t_model["iqr_s"],
        "plain_median_s": t_plain["median_s"],
        "plain_iqr_s": t_plain["iqr_s"],
        "plain_over_model_by_round": ratios,
    }


def _j_shape_buffers(f: Mapping[str, Any]) -> Verdict:
    a = {"median_s": f["model_median_s"], "iqr_s": f["model_iqr_s"]}
    b = {"median_s": f["plain_median_s"], "iqr_s": f["plain_iqr_s"]}
    faster = _which_faster(a, b, margin=1.5, round_ratios=f["plain_over_model_by_round"])
    times = (
        f"forward {_us(a['median_s'])} vs plain x * scale {_us(b['median_s'])}, plain / model by round "
        f"{f['plain_over_model_by_round']}"
    )
    cost = f"the buffers hold {_mib(f['buffer_bytes'])}, saved in every checkpoint ({_mib(f['state_dict_bytes'])})"
    if f["buffer_bytes"] > 0 and faster != "a":
        return (
            "false",
            f"{cost} and buy no speed ({times}); output equals plain broadcasting: {f['same_output_as_broadcasting']}",
        )
    if faster == "a":
        return "true", f"faster than plain broadcasting: {times}; {cost}"
    if faster == "unclear":
        return NOT_CHECKABLE, f"spread exceeds the difference (the rounds disagree): {times}"
    return "false", f"no faster than plain broadcasting ({times})"


def _article_masked_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Our model of article 001's masked loss (its behaviour): one-hot targets, element-wise binary
    cross-entropy on the logits (batch, seq, vocab), the (batch, 1, seq) mask stretched with expand_as
    onto that loss, weighted sum divided by the stretched mask's sum."""
    targets = F.one_hot(labels, logits.size(-1)).type_as(logits)
    each = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    weights = mask.expand_as(each)
    return (each * weights).sum() / weights.sum()


def _ev_masked_loss() -> Facts:
    gen = torch.Generator().manual_seed(0)
    err = _error(
        lambda: _article_masked_loss(
            torch.randn(2, 3, 5, generator=gen), torch.randint(5, (2, 3), generator=gen), torch.ones(2, 1, 3)
        )
    )
    n = 4  # seq_len == vocab: now it runs
    logits, labels = torch.randn(2, n, n, generator=gen), torch.randint(n, (2, n), generator=gen)
    keep = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    got = _article_masked_loss(logits, labels, keep[:, None, :]).item()
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
    }


def _j_masked_loss(f: Mapping[str, Any]) -> Verdict:
    if f["error_when_seq_ne_vocab"] is None and math.isclose(
        f["loss_when_seq_eq_vocab"], f["token_loop_loss"], abs_tol=1e-4
    ):
        return "true", "the mask weights each token's loss, as a loop over tokens does"
    return "false", (
        f"a (batch, 1, seq) mask lines seq up with the vocabulary axis: with seq 3, vocab 5 it raises "
        f"({f['error_when_seq_ne_vocab']}); with seq = vocab = 4 it runs but masks vocabulary entries "
        f"(loss {f['loss_when_seq_eq_vocab']} vs {f['token_loop_loss']} from a loop over real tokens); "
        "the mask must be (batch, seq, 1)"
    )


def _ev_checker() -> Facts:
    pairs = _small_shape_pairs()
    wrong = [p for p in pairs if ah.article_check_expandable(*p) != ah.torch_can_expand(*p)]
    return {
        "pairs": len(pairs),
        "wrong": len(wrong),
        "all_wrong_have_more_dims": all(len(a) > len(b) for a, b in wrong),
        "says_for_1x3_to_3": ah.article_check_expandable((1, 3), (3,)),
        "torch_for_1x3_to_3": ah.torch_can_expand((1, 3), (3,)),
    }


def _j_checker(f: Mapping[str, Any]) -> Verdict:
    if f["wrong"] == 0:
        return "true", f"agrees with PyTorch on all {f['pairs']:,} shape pairs"
    more = ", every time a has more dims than b" if f["all_wrong_have_more_dims"] else ""
    return "false", (
        f"wrong on {f['wrong']:,} of {f['pairs']:,} shape pairs{more}: for (1, 3) -> (3,) it says "
        f"{f['says_for_1x3_to_3']}, PyTorch says {f['torch_for_1x3_to_3']} (zip stops at the shorter shape)"
    )


def _ev_timer_memory() -> Facts:
    from torch.utils import benchmark

    a, b = torch.randn(1, 1024), torch.randn(1024, 1024)
    m = benchmark.Timer(stmt="a.expand_as(b)", globals={"a": a, "b": b}).timeit(100)  # what the article runs
    view, copy, ratios = _time_pair(lambda: a.expand_as(b), lambda: a.expand_as(b).clone())
    held, _, _ = _bytes(lambda: a.expand_as(b))
    return {
        "memory_fields": [n for n in dir(m) if "mem" in n.lower() or "byte" in n.lower()],
        "expand_as_median_s": view["median_s"],
        "expand_as_iqr_s": view["iqr_s"],
        "copy_median_s": copy["median_s"],
        "copy_iqr_s": copy["iqr_s"],
        "copy_over_view_by_round": ratios,
        "expand_as_bytes": held,
    }


def _j_timer_memory(f: Mapping[str, Any]) -> Verdict:
    if f["memory_fields"]:
        return "true", f"the Timer's result reports memory: {f['memory_fields']}"
    e = {"median_s": f["expand_as_median_s"], "iqr_s": f["expand_as_iqr_s"]}
    c = {"median_s": f["copy_median_s"], "iqr_s": f["copy_iqr_s"]}
    times = (
        f"expand_as {_us(e['median_s'])}, a 4 MiB copy {_us(c['median_s'])}, copy / view by round "
        f"{f['copy_over_view_by_round']}"
    )
    faster = _which_faster(e, c, round_ratios=f["copy_over_view_by_round"])
    if faster == "a":
        return "misleading", (
            f"a timer measures time only (no memory field in its result); the time does hint that "
            f"nothing is copied ({times}), but the bytes come from counting them: {f['expand_as_bytes']} B"
        )
    if faster == "unclear":
        return (
            NOT_CHECKABLE,
            f"the Timer reports no memory; the spread exceeds the difference (the rounds disagree): {times}",
        )
    return "false", f"the Timer reports no memory, and its times cannot tell a view from a copy here ({times})"


def _ev_noncontiguous() -> Facts:
    col = torch.randn(3, 2)[:, :1]
    err = _error(lambda: col.expand(3, 4))
    return {
        "input_contiguous": col.is_contiguous(),
        "error": err,
        "still_a_view": None if err else shares_storage(col.expand(3, 4), col),
    }


def _j_noncontiguous(f: Mapping[str, Any]) -> Verdict:
    if f["error"] and not f["input_contiguous"]:
        return "true", f"expanding a non-contiguous tensor raised: {f['error']}"
    return "false", (
        f"a non-contiguous (3, 1) column (contiguous: {f['input_contiguous']}) expands without error and "
        f"stays a view ({f['still_a_view']}); contiguous() first only adds a copy"
    )


def _ev_detach_or_clone() -> Facts:
    p = torch.zeros(3, 1, requires_grad=True)
    d = p.expand(3, 4).detach()
    shares_d = shares_storage(d, p)
    d[0, 0] = 5.0
    c = p.detach().expand(3, 4).clone()
    c[1, 0] = 7.0
    return {
        "detach_shares": shares_d,
        "detach_write_reached": p[0, 0].item() == 5.0,
        "detach_add_error": _error(lambda: p.expand(3, 4).detach().add_(1)),
        "clone_shares": shares_storage(c, p),
        "clone_write_reached": p[1, 0].item() == 7.0,
    }


def _j_detach_or_clone(f: Mapping[str, Any]) -> Verdict:
    if f["detach_shares"] or f["detach_write_reached"]:
        return "false", (
            f"detach() makes no copy: it shares memory ({f['detach_shares']}), a write through it reaches the "
            f"original ({f['detach_write_reached']}) and add_ still fails ({f['detach_add_error']}); only "
            f"clone() copies (shares: {f['clone_shares']})"
        )
    if f["clone_shares"]:
        return "false", "clone() shared memory"
    return "true", "both detach() and clone() gave independent copies"


def _article_guarded_expand_as(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Our model of article 001's guarded expand_as (its behaviour): assert that the article's checker
    accepts the pair, then call expand_as."""
    assert ah.article_check_expandable(a, b), f"expand_as guard refused {tuple(a.shape)} -> {tuple(b.shape)}"
    return a.expand_as(b)


def _ev_guarded() -> Facts:
    pairs = _small_shape_pairs()
    missed = caught = 0
    for sa, sb in pairs:
        err = _error(
            lambda sa=sa, sb=sb: _article_guarded_expand_as(
                torch.empty(sa, device="meta"), torch.empty(sb, device="meta")
            )
        )
        if err and err.startswith("AssertionError"):
            caught += 1
        elif err:
            missed += 1
    return {
        "mismatches_caught_by_assert": caught,
        "mismatches_missed": missed,
        "missed_example": _error(lambda: _article_guarded_expand_as(torch.zeros(1, 3), torch.zeros(3))),
    }


def _j_guarded(f: Mapping[str, Any]) -> Verdict:
    if f["mismatches_caught_by_assert"] == 0:
        return "false", "the assert never fires: PyTorch raises first every time"
    if f["mismatches_missed"]:
        return "misleading", (
            f"the guard catches {f['mismatches_caught_by_assert']:,} mismatches with an early message but "
            f"lets {f['mismatches_missed']:,} through to PyTorch's own error (e.g. (1, 3) -> (3,): "
            f"{f['missed_example']}); PyTorch's error already names the sizes and the dimension"
        )
    return "true", f"the guard caught every one of {f['mismatches_caught_by_assert']:,} mismatches"


# ------------------------------------------------------------------------------------------------
# The registry
# ------------------------------------------------------------------------------------------------
def _c(
    id: str,
    article: str,
    section: str,
    kind: str,
    statement: str,
    evidence: Callable[[], Facts],
    judge_fn: Callable[[Mapping[str, Any]], Verdict],
    **examples: Mapping[str, Any],
) -> Claim:
    return Claim(
        id, article, section, statement, kind, evidence, judge_fn, {k.replace("_", " "): v for k, v in examples.items()}
    )


CLAIMS: tuple[Claim, ...] = (
    _c(
        "A01",
        A,
        "introduction",
        "memory",
        "torch.repeat() copies data by allocating new memory, which can run a GPU out of memory on large data or models.",
        _ev_repeat_allocates,
        _j_repeat_allocates,
        false={"repeat_bytes": 0, "shares": True},
    ),
    _c(
        "A02",
        A,
        "introduction",
        "memory",
        "expand() extends data without copying it, through the view mechanism.",
        _ev_expand_view,
        _j_expand_view,
        false={"expand_bytes": 16384, "shares": False},
    ),
    _c(
        "A03",
        A,
        "1 Views and copies",
        "semantics",
        "Tensor operations fall into two classes: those that create a view and those that create a copy.",
        _ev_two_kinds,
        _j_two_kinds,
        true={"depends_on_layout": [], "always_itself": []},
        misleading={"depends_on_layout": []},
    ),
    _c(
        "A04",
        A,
        "1 Views and copies",
        "memory",
        "A view shares the original's storage and records only different metadata such as shape and stride; a copy "
        "allocates new memory.",
        _ev_view_metadata,
        _j_view_metadata,
        false={"view_shares": False},
    ),
    _c(
        "A05",
        A,
        "1 Views and copies",
        "API",
        "For a (1, 512) tensor expanded to (8, 512), comparing the two tensors' .storage().data_ptr() prints True.",
        _ev_storage_pointer,
        _j_storage_pointer,
        false={"equal": False},
    ),
    _c(
        "A06",
        A,
        "1 Views and copies (table)",
        "memory",
        "Memory, batch 1024 and feature size 512: repeat takes 16.0 MB, expand 2.0 MB.",
        _ev_memory_table,
        _j_memory_table,
        true={"repeat_bytes": 16 * 2**20, "expand_bytes": 2 * 2**20},
    ),
    _c(
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
    ),
    _c(
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
    ),
    _c(
        "A09",
        A,
        "1 Views and copies",
        "advice",
        "When you need to modify the expanded tensor, first call .contiguous() to create a copy.",
        _ev_contiguous_copy,
        _j_contiguous_copy,
        true={"same_shape_write_reaches": False, "stretched_write_reaches": False, "same_shape_shares": False},
    ),
    _c(
        "A10",
        A,
        "2.1 Generating batches",
        "memory",
        "sample.unsqueeze(0).expand(batch_size, -1, -1, -1) turns one [C, H, W] sample into a [B, C, H, W] batch, more "
        "efficiently than torch.stack() or repeat().",
        _ev_batch_view,
        _j_batch_view,
        false={"expand_bytes": 3072},
    ),
    _c(
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
    ),
    _c(
        "A12",
        A,
        "2.2 Attention",
        "semantics",
        "In a Transformer, expand() elegantly shares parameters across attention heads, as its MultiHeadAttention class shows.",
        _ev_heads_shared,
        _j_heads_shared,
        true={"heads_split": True, "expanded_a_weight": True},
    ),
    _c(
        "A13",
        A,
        "2.2 Attention",
        "memory",
        "In that class, expanding torch.ones(1, N, N) to the batch avoids creating the mask repeatedly.",
        _ev_mask_reused,
        _j_mask_reused,
        true={"masks_built": 1},
    ),
    _c(
        "A14",
        A,
        "2.3 Broadcasting combined",
        "memory",
        "In its weighted-pooling layer, self.weights.expand(batch, -1) stretches the learnable weights over the batch "
        "without allocating new memory.",
        _ev_pool_weights,
        _j_pool_weights,
        false={"expand_bytes": 128},
    ),
    _c(
        "A15",
        A,
        "2.3 Broadcasting combined",
        "semantics",
        "The pooling example's scenario: giving different samples their own learnable weight parameters.",
        _ev_per_sample,
        _j_per_sample,
        true={"batch_stride": 8, "parameter_shape": (4, 8)},
    ),
    _c(
        "A16",
        A,
        "3.1 Memory, expand vs repeat",
        "memory",
        "Measured with torch.cuda.memory_allocated(), expanding a (1, 1024) tensor to (1024, 1024) leaves allocated "
        "memory essentially unchanged.",
        _ev_allocated_expand,
        _j_allocated_expand,
        false={"expand_bytes": 4 * 2**20},
    ),
    _c(
        "A17",
        A,
        "3.1 Memory, expand vs repeat",
        "memory",
        "Measured the same way, repeat(1024, 1) of that tensor adds 8 MB.",
        _ev_allocated_repeat,
        _j_allocated_repeat,
        true={"repeat_bytes": 8 * 2**20},
    ),
    _c(
        "A18",
        A,
        "3.2 Autograd graph",
        "semantics",
        "Under autograd, x.expand(4) records only the single original tensor, while x.repeat(4) records every copy operation.",
        _ev_graph,
        _j_graph,
        true={"repeat_nodes": ["AccumulateGrad", "CopyBackwards", "RepeatBackward0"]},
    ),
    _c(
        "A19",
        A,
        "3.2 Autograd graph",
        "speed",
        "So expand's backward pass is more efficient: it needs only one gradient accumulation.",
        _ev_backward,
        _j_backward,
        true={
            "expand_median_s": 1e-4,
            "expand_iqr_s": 1e-6,
            "repeat_median_s": 3e-4,
            "repeat_iqr_s": 1e-6,
            "repeat_over_expand_by_round": [3.0, 2.9, 3.1],
        },
        false={
            "expand_median_s": 1e-4,
            "expand_iqr_s": 1e-6,
            "repeat_median_s": 1.05e-4,
            "repeat_iqr_s": 1e-6,
            "repeat_over_expand_by_round": [1.05, 0.98, 1.02],
        },
        not_checkable_here={
            "expand_median_s": 1e-4,
            "expand_iqr_s": 8e-5,
            "repeat_median_s": 1.5e-4,
            "repeat_iqr_s": 8e-5,
            "repeat_over_expand_by_round": [0.7, 1.6, 1.0],
            "expand_backward_bytes": 0,
        },
    ),
    _c(
        "A20",
        A,
        "4.1 Errors",
        "semantics",
        "Expanding a (2, 3) tensor to (4, 3) raises an error because its first dimension is not 1.",
        _ev_nonsingleton_error,
        _j_nonsingleton_error,
        false={"error": None},
    ),
    _c(
        "A21",
        A,
        "4.1 Errors",
        "API",
        "torch.ones(1, 5).expand(-1, 10) gives shape torch.Size([1, 10]) (-1 has a special meaning).",
        _ev_minus_one_grow,
        _j_minus_one_grow,
        true={"error": None, "shape": (1, 10)},
    ),
    _c(
        "A22",
        A,
        "4.1 Errors",
        "API",
        "torch.ones(1, 5).expand(2, -1) gives shape torch.Size([2, 5]).",
        _ev_minus_one_keep,
        _j_minus_one_keep,
        false={"shape": (1, 5)},
    ),
    _c(
        "A23",
        A,
        "4.2 With other APIs",
        "memory",
        "A (1, 3, 224) tensor, permute(1, 0, 2) then expand(3, 256, 224), gives an efficient transposed expansion of "
        "shape [3, 256, 224].",
        _ev_permute_expand,
        _j_permute_expand,
        false={"bytes": 688128},
    ),
    _c(
        "A24",
        A,
        "4.2 With other APIs",
        "memory",
        "Calling contiguous() on an expand() result before modifying it increases memory use temporarily.",
        _ev_contiguous_temporary,
        _j_contiguous_temporary,
        true={"held_while_result_lives": 0},
    ),
    _c(
        "A25",
        A,
        "4.2 With other APIs",
        "semantics",
        "In its example, original.expand(100, 100).contiguous() can be written (row 0 set to 0) without affecting original.",
        _ev_contiguous_example,
        _j_contiguous_example,
        true={"row_original_changed": False, "square_original_changed": False},
        false={"row_original_changed": True, "square_original_changed": True},
    ),
    _c(
        "A26",
        A,
        "conclusion",
        "memory",
        "In the author's projects, sensible use of expand() cut GPU memory use by 30-70 %, especially for video "
        "sequences and 3-D point clouds.",
        _ev_saving_range,
        _j_saving_range,
        true={"savings": {"a": 0.5, "b": 0.4}},
        false={"savings": {"a": 0.0, "b": 0.9}},
    ),
    _c(
        "A27",
        A,
        "conclusion",
        "advice",
        "Rule of thumb: when data must be repeated more than 16 times along a dimension, prefer expand().",
        _ev_threshold,
        _j_threshold,
        true={"bytes_by_count": {2: (4096, 4096), 17: (0, 34816)}},
        false={"bytes_by_count": {2: (0, 4096), 17: (34816, 34816)}},
    ),
    # ---- article 001 ----
    _c(
        "B01",
        B,
        "1 What broadcasting is",
        "memory",
        "Broadcasting lets tensors of different shapes be combined element-wise without explicitly copying data: a "
        "memory optimisation.",
        _ev_broadcast_no_copy,
        _j_broadcast_no_copy,
        false={"allocated": 96},
    ),
    _c(
        "B02",
        B,
        "1 What broadcasting is",
        "semantics",
        "Broadcasting follows three rules: compare from the last dimension; sizes are equal or one of them is 1; a "
        "missing dimension counts as 1.",
        _ev_three_rules,
        _j_three_rules,
        false={"disagreements": 3, "first": ((2,), (3,))},
    ),
    _c(
        "B03",
        B,
        "1 What broadcasting is",
        "semantics",
        "A (3, 1) tensor plus a (1, 4) tensor broadcasts to (3, 4).",
        _ev_example_shape,
        _j_example_shape,
        false={"shape": (3, 1)},
    ),
    _c(
        "B04",
        B,
        "introduction",
        "semantics",
        "Attention weights of shape (batch_size, 1) multiply features of shape (batch_size, sequence_length) by broadcasting.",
        _ev_weights_times_features,
        _j_weights_times_features,
        false={"row_scaled": False},
    ),
    _c(
        "B05",
        B,
        "2 How expand_as works",
        "memory",
        "expand_as() is a view operation: it copies no data and returns a view with the target tensor's shape.",
        _ev_expand_as_view,
        _j_expand_as_view,
        false={"bytes": 48, "shares": False},
    ),
    _c(
        "B06",
        B,
        "2 How expand_as works",
        "API",
        "expand_as() does what expand() does with shorter syntax: a.expand(3, 4) equals a.expand_as(b) for b of shape (3, 4).",
        _ev_expand_equals_expand_as,
        _j_expand_equals_expand_as,
        false={"equal": False},
    ),
    _c(
        "B07",
        B,
        "3 A custom layer",
        "memory",
        "In its channel-attention module, expand_as() makes the channel weights reach every spatial position of the "
        "feature map without extra memory.",
        _ev_channel_attention,
        _j_channel_attention,
        false={"expand_bytes": 9216},
    ),
    _c(
        "B08",
        B,
        "4 Pitfalls",
        "semantics",
        "A (3, 2) tensor cannot be expand_as'ed to (3, 4): it has no dimension that can be expanded.",
        _ev_no_singleton,
        _j_no_singleton,
        false={"error": None},
    ),
    _c(
        "B09",
        B,
        "4 Pitfalls",
        "semantics",
        "b = a.expand_as(torch.empty(3, 4)) shares a's memory: b[0, 0] = 10 turns a into [[10.], [2.], [3.]].",
        _ev_write_through,
        _j_write_through,
        false={"a_after": [1.0, 2.0, 3.0]},
    ),
    _c(
        "B10",
        B,
        "4 Pitfalls",
        "semantics",
        "expand_as() keeps the link to the original tensor's gradient: gradients from the expanded tensor flow back correctly.",
        _ev_gradient,
        _j_gradient,
        false={"grad_is_row_sum": False},
    ),
    _c(
        "B11",
        B,
        "4 Performance advice",
        "advice",
        "Pre-compute likely expansion shapes at model initialisation, and cache the expand() result of frequent expansions.",
        _ev_cache,
        _j_cache,
        true={"expand_bytes": 4096},
    ),
    _c(
        "B12",
        B,
        "4 Performance advice (example)",
        "memory",
        "Its 'efficient expansion' model -- buffers of the common shapes registered in __init__, the parameter "
        "expand_as'ed onto the matching one -- makes the expansion efficient.",
        _ev_shape_buffers,
        _j_shape_buffers,
        true={
            "buffer_bytes": 0,
            "model_median_s": 1e-4,
            "model_iqr_s": 1e-6,
            "plain_median_s": 3e-4,
            "plain_iqr_s": 1e-6,
            "plain_over_model_by_round": [3.0, 3.0, 2.8],
        },
        not_checkable_here={
            "buffer_bytes": 0,
            "model_median_s": 1e-4,
            "model_iqr_s": 9e-5,
            "plain_median_s": 1.4e-4,
            "plain_iqr_s": 9e-5,
            "plain_over_model_by_round": [0.8, 1.6, 1.1],
        },
    ),
    _c(
        "B13",
        B,
        "5 Combined with other ops",
        "semantics",
        "In its custom loss, expand_as() aligns a (batch, 1, seq_len) attention mask with the (batch, seq_len, vocab_size) "
        "element-wise loss, so the mask weights each position's loss.",
        _ev_masked_loss,
        _j_masked_loss,
        true={"error_when_seq_ne_vocab": None, "loss_when_seq_eq_vocab": 0.5, "token_loop_loss": 0.5},
    ),
    _c(
        "B14",
        B,
        "6 Debugging",
        "API",
        "Its check_expandable(a, b) tells whether a can be expanded to b's shape.",
        _ev_checker,
        _j_checker,
        true={"wrong": 0},
    ),
    _c(
        "B15",
        B,
        "6 Debugging",
        "memory",
        "Timing a.expand_as(b) with torch.utils.benchmark.Timer tests expand_as's memory efficiency.",
        _ev_timer_memory,
        _j_timer_memory,
        true={"memory_fields": ["peak_memory"]},
        false={
            "memory_fields": [],
            "expand_as_median_s": 1e-3,
            "expand_as_iqr_s": 1e-5,
            "copy_median_s": 1e-3,
            "copy_iqr_s": 1e-5,
            "copy_over_view_by_round": [1.0, 1.01, 0.99],
        },
        not_checkable_here={"memory_fields": [], "copy_over_view_by_round": [0.9, 80.0, 95.0]},
    ),
    _c(
        "B16",
        B,
        "6 Debugging",
        "semantics",
        "A common error is expanding a non-contiguous tensor; the fix is to call contiguous() first.",
        _ev_noncontiguous,
        _j_noncontiguous,
        true={"error": "RuntimeError: ...", "input_contiguous": False},
    ),
    _c(
        "B17",
        B,
        "6 Debugging",
        "advice",
        "To avoid modifying an expanded tensor by accident during autograd, create a copy with detach() or clone().",
        _ev_detach_or_clone,
        _j_detach_or_clone,
        true={"detach_shares": False, "detach_write_reached": False, "clone_shares": False},
    ),
    _c(
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
    ),
)
_BY_ID = {c.id: c for c in CLAIMS}
assert len(_BY_ID) == len(CLAIMS), "claim ids must be unique"


def get(claim_id: str) -> Claim:
    """The claim with this id.

    >>> get("A21").article
    '000 expand'
    """
    try:
        return _BY_ID[claim_id]
    except KeyError:
        raise KeyError(f"get(): no claim {claim_id!r}; known ids: {', '.join(_BY_ID)}.") from None


def judge(claim: Claim, facts: Mapping[str, Any]) -> Verdict:
    """Apply ``claim.judge`` to ``facts`` and check that the verdict is one of :data:`VERDICTS`.

    >>> judge(get("A22"), {"shape": (2, 5)})[0], judge(get("A22"), {"shape": (1, 5)})[0]
    ('true', 'false')
    """
    verdict, why = claim.judge(facts)
    if verdict not in VERDICTS:
        raise ValueError(f"judge(): claim {claim.id} gave verdict {verdict!r}, not one of {VERDICTS}.")
    if not why.strip():
        raise ValueError(f"judge(): claim {claim.id} gave no reason for {verdict!r}.")
    return verdict, why


def table(claims: Iterable[Claim] | None = None, ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Run every claim's evidence and judge it: one dict per claim with keys
    ``id, article, statement, verdict, why, evidence``.

    >>> [r["verdict"] for r in table(ids=["A21", "A22"])]
    ['false', 'true']
    """
    chosen = list(CLAIMS if claims is None else claims)
    bad = [c for c in chosen if not isinstance(c, Claim)]
    if bad:
        raise TypeError(
            f"table(): `claims` must hold Claim objects (from viewlab.course.claims.CLAIMS), got "
            f"{type(bad[0]).__name__}."
        )
    if ids is not None:
        if isinstance(ids, str):
            raise TypeError(
                f"table(): `ids` must be a list of claim ids such as ['A01', 'B02'], got the string {ids!r}."
            )
        ids = list(ids)
        unknown = [i for i in ids if i not in _BY_ID]
        if unknown:
            raise KeyError(f"table(): unknown claim ids {unknown}; known ids: {', '.join(_BY_ID)}.")
        chosen = [c for c in chosen if c.id in ids]
    rows = []
    for claim in chosen:
        facts = claim.evidence()
        verdict, why = judge(claim, facts)
        rows.append(
            {
                "id": claim.id,
                "article": claim.article,
                "statement": claim.statement,
                "verdict": verdict,
                "why": why,
                "evidence": facts,
            }
        )
    return rows


def counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Verdict counts per article (every verdict listed, zeros included).

    >>> counts([{"article": "000 expand", "verdict": "true"}])["000 expand"]["true"]
    1
    """
    out = {a: {v: 0 for v in VERDICTS} for a in ARTICLES}
    for r in rows:
        out[r["article"]][r["verdict"]] += 1
    return out


def _facts_text(facts: Mapping[str, Any]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {fmt(x)}" for k, x in v.items()) + "}"
        return repr(v)

    return "; ".join(f"{k} = {fmt(v)}" for k, v in facts.items())


def show(claim_id: str, width: int = 108) -> dict[str, Any]:
    """Run one claim's evidence, judge it, print the restatement, the facts, the verdict and why;
    return the row (as in :func:`table`).

    >>> row = show("A22")
    A22 · 000 expand · 4.1 Errors · API
    claim:    torch.ones(1, 5).expand(2, -1) gives shape torch.Size([2, 5]).
    evidence: shape = (2, 5)
    verdict:  true -- shape (2, 5)
    """
    import textwrap

    claim = get(claim_id)
    (row,) = table(claims=[claim])
    print(f"{claim.id} · {claim.article} · {claim.section} · {claim.kind}")
    for label, text in (
        ("claim", claim.statement),
        ("evidence", _facts_text(row["evidence"])),
        ("verdict", f"{row['verdict']} -- {row['why']}"),
    ):
        print(textwrap.fill(text, width, initial_indent=f"{label + ':':<10}", subsequent_indent=" " * 10))
    return row


def format_table(rows: Iterable[Mapping[str, Any]], width: int = 60) -> str:
    """A plain-text summary: id, verdict and the statement (shortened to ``width`` characters).

    >>> print(format_table([{"id": "A22", "verdict": "true", "statement": "expand(2, -1) gives (2, 5)."}]))
    A22  true                expand(2, -1) gives (2, 5).
    """
    lines = []
    for r in rows:
        text = r["statement"] if len(r["statement"]) <= width else r["statement"][: width - 3] + "..."
        lines.append(f"{r['id']:<4} {r['verdict']:<19} {text}")
    return "\n".join(lines)
