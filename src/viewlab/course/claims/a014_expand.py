"""Claims A14-A28 of article 000 (expand): pooling, memory and autograd, errors, other APIs, conclusion;
each block is one claim: its evidence, its judge and its registry row.

>>> from viewlab.course.claims.model import judge
>>> judge(A22, A22.evidence())
('true', 'shape (2, 5)')
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from viewlab import shares_storage
from viewlab._format import fmt_us, mib
from viewlab.memory import measure

from ._evidence import (
    CLIP_BLOCKS,
    STORAGE_CALLS,
    best_device,
    bytes_of,
    error_of,
    expand_result,
    graph_nodes,
    paired_timings,
    storage_call,
    which_faster,
)
from .article_code import pool_expanded
from .model import NOT_CHECKABLE, A, Claim, Facts, Verdict, claim_row


# ---- A14 -------------------------------------------------------------------------------------------------------------
def _ev_pool_weights(*, batch: int = 4, steps: int = 6, features: int = 8) -> Facts:
    w = torch.randn(1, features)
    x = torch.randn(batch, steps, features)
    held, _, _ = bytes_of(lambda: w.expand(batch, features)[:, None, :])
    _, peak_e, out_e = bytes_of(lambda: pool_expanded(x, w))
    _, peak_b, out_b = bytes_of(lambda: (x * w).sum(1))
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


A14 = claim_row(
    "A14",
    A,
    "2.3 Broadcasting combined",
    "memory",
    "In its weighted-pooling layer, self.weights.expand(batch, -1) stretches the learnable weights over the batch "
    "without allocating new memory.",
    _ev_pool_weights,
    _j_pool_weights,
    false={"expand_bytes": 128},
)


# ---- A15 -------------------------------------------------------------------------------------------------------------
def _ev_per_sample(*, weight_shape: tuple[int, int] = (1, 8), batch: int = 4, steps: int = 6, seed: int = 0) -> Facts:
    """The pooling with a weight of ``weight_shape``: the article's (1, D), or (batch, D) for weights per sample."""
    gen = torch.Generator().manual_seed(seed)  # atol below: float32 sums in another order, entries near 0
    w = torch.randn(weight_shape, generator=gen).requires_grad_()
    x = torch.randn(batch, steps, weight_shape[-1], generator=gen)
    stretched = w.expand(len(x), weight_shape[-1])[:, None, :]
    (pool_expanded(x, w)).sum().backward()
    return {
        "parameter_shape": tuple(w.shape),
        "batch_stride": stretched.stride(0),
        "grad_shape": tuple(w.grad.shape),
        "grad_is_batch_sum": torch.allclose(w.grad, x.sum((0, 1))[None].expand_as(w.grad), atol=1e-5),
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


A15 = claim_row(
    "A15",
    A,
    "2.3 Broadcasting combined",
    "semantics",
    "The pooling example's scenario: giving different samples their own learnable weight parameters.",
    _ev_per_sample,
    _j_per_sample,
    true={"batch_stride": 8, "parameter_shape": (4, 8)},
)


# ---- A16 -------------------------------------------------------------------------------------------------------------
def _ev_allocated_expand(*, rows: int = 1024, features: int = 1024, dtype: torch.dtype = torch.float32) -> Facts:
    dev = best_device()
    row = torch.randn(1, features, device=dev, dtype=dtype)
    held, _, _ = bytes_of(lambda: row.expand(rows, features), device=dev)
    return {"device": dev, "expand_bytes": held}


def _j_allocated_expand(f: Mapping[str, Any]) -> Verdict:
    where = "the CUDA allocator" if f["device"] == "cuda" else "tensor storages on the CPU (the same count a GPU gives)"
    if f["expand_bytes"] == 0:
        return "true", f"expand allocated 0 B, counted by {where}"
    return "false", f"expand allocated {f['expand_bytes']:,} B, counted by {where}"


A16 = claim_row(
    "A16",
    A,
    "3.1 Memory, expand vs repeat",
    "memory",
    "Measured with torch.cuda.memory_allocated(), expanding a (1, 1024) tensor to (1024, 1024) leaves allocated "
    "memory essentially unchanged.",
    _ev_allocated_expand,
    _j_allocated_expand,
    false={"expand_bytes": 4 * 2**20},
)


# ---- A17 -------------------------------------------------------------------------------------------------------------
def _ev_allocated_repeat(*, rows: int = 1024, features: int = 1024, dtype: torch.dtype = torch.float32) -> Facts:
    dev = best_device()
    row = torch.randn(1, features, device=dev, dtype=dtype)
    held, _, out = bytes_of(lambda: row.repeat(rows, 1), device=dev)
    return {"device": dev, "repeat_bytes": held, "shape": tuple(out.shape), "dtype": str(out.dtype)}


def _j_allocated_repeat(f: Mapping[str, Any]) -> Verdict:
    in_mib = f["repeat_bytes"] / 2**20
    if 7.6 <= in_mib <= 8.4 or 7.6 <= f["repeat_bytes"] / 1e6 <= 8.4:
        return "true", f"repeat to {f['shape']} {f['dtype']} allocated {mib(f['repeat_bytes'])} on {f['device']}"
    return (
        "false",
        f"repeat to {f['shape']} {f['dtype']} allocated {mib(f['repeat_bytes'])} on {f['device']}, not 8 MB "
        "(8 MB is what float64 would take)",
    )


A17 = claim_row(
    "A17",
    A,
    "3.1 Memory, expand vs repeat",
    "memory",
    "Measured the same way, repeat(1024, 1) of that tensor adds 8 MB.",
    _ev_allocated_repeat,
    _j_allocated_repeat,
    true={"repeat_bytes": 8 * 2**20},
)


# ---- A18 -------------------------------------------------------------------------------------------------------------
def _ev_graph(*, shape: tuple[int, ...] = (1,), size: tuple[int, ...] = (4,)) -> Facts:
    x = torch.randn(shape, requires_grad=True)
    times = [n // m for n, m in zip(size, (1,) * (len(size) - len(shape)) + tuple(shape))]
    return {"expand_nodes": graph_nodes(x.expand(*size)), "repeat_nodes": graph_nodes(x.repeat(*times))}


def _j_graph(f: Mapping[str, Any]) -> Verdict:
    e, r = f["expand_nodes"], f["repeat_nodes"]
    if len(r) > len(e):
        return "true", f"repeat's graph has more nodes: {r} vs {e}"
    return "false", f"both graphs have one node over the leaf: expand {e}, repeat {r}; neither records copies"


A18 = claim_row(
    "A18",
    A,
    "3.2 Autograd graph",
    "semantics",
    "Under autograd, x.expand(4) records only the single original tensor, while x.repeat(4) records every copy operation.",
    _ev_graph,
    _j_graph,
    true={"repeat_nodes": ["AccumulateGrad", "CopyBackwards", "RepeatBackward0"]},
)


# ---- A19 -------------------------------------------------------------------------------------------------------------
def _ev_backward(*, rows: int = 512, features: int = 2048) -> Facts:
    x = torch.randn(1, features, requires_grad=True)
    upstream = torch.randn(rows, features)
    facts: Facts = {}
    outputs = {"expand": x.expand(rows, features), "repeat": x.repeat(rows, 1)}
    for name, y in outputs.items():
        with measure(log_ops=True) as m:
            torch.autograd.grad(y, x, upstream, retain_graph=True)
        facts[f"{name}_backward_ops"] = [op.name.split(".")[1] for op in m.ops]
        facts[f"{name}_backward_bytes"] = sum(op.bytes for op in m.ops)
    t_e, t_r, ratios = paired_timings(
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
    times = (
        f"backward {fmt_us(e['median_s'])} (IQR {fmt_us(e['iqr_s'])}) vs {fmt_us(r['median_s'])} "
        f"(IQR {fmt_us(r['iqr_s'])})"
    )
    ops = (
        f"expand's backward runs {f['expand_backward_ops']} ({f['expand_backward_bytes']:,} B), repeat's "
        f"{f['repeat_backward_ops']} ({f['repeat_backward_bytes']:,} B)"
    )
    faster = which_faster(e, r, margin=1.5, round_ratios=f["repeat_over_expand_by_round"])
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


A19 = claim_row(
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
)


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
        return {"shape": None, "stride": None, "bytes": 0, "shares": False, "error": err}
    held, _, out = bytes_of(lambda: t.permute(*dims).expand(*size))
    return {
        "shape": tuple(out.shape),
        "stride": out.stride(),
        "bytes": held,
        "shares": shares_storage(out, t),
        "error": None,
    }


def _j_permute_expand(f: Mapping[str, Any]) -> Verdict:
    if f["shape"] == (3, 256, 224) and f["bytes"] == 0:
        return "true", f"shape (3, 256, 224), stride {f['stride']}, 0 B: both steps are views"
    return "false", f"shape {f['shape']}, {f['bytes']:,} B, error: {f['error']}"


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
    return {"held_while_result_lives": held, "peak": peak, "result_bytes": out.numel() * out.element_size()}


def _j_contiguous_temporary(f: Mapping[str, Any]) -> Verdict:
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
    ``original`` (the article never gives it): which originals it changed."""
    changed = []
    for shape in originals:
        original = torch.ones(shape)
        safe = original.expand(*size).contiguous()
        safe[0] = 0
        changed.append(bool((original == 0).any()))
    return {
        "row_original_changed": any(c for sh, c in zip(originals, changed) if math.prod(sh) < math.prod(size)),
        "square_original_changed": any(c for sh, c in zip(originals, changed) if math.prod(sh) == math.prod(size)),
        "originals": tuple(originals),
    }


def _j_contiguous_example(f: Mapping[str, Any]) -> Verdict:
    if not f["row_original_changed"] and f["square_original_changed"]:
        return "misleading", (
            "the article never defines `original`: for a row the write leaves it unchanged, but for an "
            "original of the full shape expand is a no-op, contiguous() returns the same memory and "
            "the write changes it -- the safety comes from the stretch, not from contiguous()"
        )
    if not f["row_original_changed"] and not f["square_original_changed"]:
        return "true", f"the write left the original unchanged for every shape tried: {f['originals']}"
    return "false", "the write through the contiguous() result changed the original"


A25 = claim_row(
    "A25",
    A,
    "4.2 With other APIs",
    "semantics",
    "In its example, original.expand(100, 100).contiguous() can be written (row 0 set to 0) without affecting original.",
    _ev_contiguous_example,
    _j_contiguous_example,
    true={"row_original_changed": False, "square_original_changed": False},
    false={"row_original_changed": True, "square_original_changed": True},
)


# ---- A26 -------------------------------------------------------------------------------------------------------------
def _ev_saving_range(
    *, blocks: tuple[str, ...] = tuple(CLIP_BLOCKS), frames: int = 64, features: int = 256, seed: int = 0
) -> Facts:
    """Peak memory saved by writing each named block of :data:`~._evidence.CLIP_BLOCKS` with expand instead of
    repeat, on ``frames`` frames of a clip (``features`` each) and one per-clip row."""
    gen = torch.Generator().manual_seed(seed)
    clip, per_clip = torch.randn(frames, features, generator=gen), torch.randn(1, features, generator=gen)
    savings = {}
    for name in blocks:
        with_repeat, with_expand = CLIP_BLOCKS[name]
        _, peak_r, _ = bytes_of(lambda f=with_repeat: f(clip, per_clip))
        _, peak_e, _ = bytes_of(lambda f=with_expand: f(clip, per_clip))
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
    return "misleading", (
        "the author's projects are unnamed, so their figure cannot be rerun; what can be run shows the "
        "saving is a property of the workload, not of expand: the same clip saves anything from "
        f"{min(s.values()):.0%} to {max(s.values()):.0%} depending on the code around expand ({shown})"
    )


A26 = claim_row(
    "A26",
    A,
    "conclusion",
    "memory",
    "In the author's projects, sensible use of expand() cut GPU memory use by 30-70 %, especially for data with "
    "spatial locality such as video sequences and 3-D point clouds.",
    _ev_saving_range,
    _j_saving_range,
    true={"savings": {"a": 0.5, "b": 0.4}},
    false={"savings": {"a": 0.0, "b": 0.9}},
    misleading={"savings": {"a": 0.0, "b": 0.5}},
)


# ---- A27 -------------------------------------------------------------------------------------------------------------
def _ev_threshold(*, counts: tuple[int, ...] = (2, 8, 16, 17, 64), features: int = 512) -> Facts:
    row = torch.randn(1, features)
    by_count = {}
    for n in counts:
        e, _, _ = bytes_of(lambda n=n: row.expand(n, features))
        r, _, _ = bytes_of(lambda n=n: row.repeat(n, 1))
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


CLAIMS: tuple[Claim, ...] = (A14, A15, A16, A17, A18, A19, A20, A21, A22, A23, A24, A25, A26, A27, A28)
