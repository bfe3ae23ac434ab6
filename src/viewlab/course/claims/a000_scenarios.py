"""Claims of article 000 (expand), section 2, "Frequent scenarios": 2.1 generating batches, 2.2 attention,
2.3 broadcasting combined: A10-A15.

Each block is one claim: its evidence (runs code, returns facts), its judge (facts -> verdict and why)
and its registry row (the restatement, and facts under which the judge says something else).

>>> from viewlab.course.claims.model import judge
>>> judge(A10, A10.evidence())[0]
'true'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from viewlab import shares_storage
from viewlab._format import mib
from viewlab.memory import measure

from ._evidence import (
    OpNames,
    attention_inputs,
    bytes_of,
    error_of,
    judge_claimed_times,
    no_elements,
    not_the_same_work,
    nothing_tried,
    same_result,
    timing,
)
from .article_code import (
    article_attention,
    pool_expanded,
)
from .model import A, Claim, Facts, Verdict, claim_row


# ---- A10 -------------------------------------------------------------------------------------------------------------
def _ev_batch_view(*, sample_shape: tuple[int, int, int] = (3, 8, 8), batch_size: int = 16) -> Facts:
    sample = torch.randn(sample_shape)
    held, _, batch = bytes_of(lambda: sample.unsqueeze(0).expand(batch_size, -1, -1, -1))
    # torch.stack refuses an empty list: for batch 0 its result is the empty batch (judged below as nothing tried)
    stack_b, _, stacked = bytes_of(lambda: torch.stack([sample] * batch_size) if batch_size else batch.clone())
    rep_b, _, _ = bytes_of(lambda: sample.repeat(batch_size, 1, 1, 1))
    equal = torch.equal(batch, stacked)  # before the augmentation below writes through the batch
    before = sample.clone()
    augment_error = error_of(lambda: batch[0].add_(1))  # in-place augmentation of one sample of the batch
    return {
        "augment_error": augment_error,
        "augment_changed_source": not torch.equal(sample, before),
        "augment_changed_every_sample": bool((batch == batch[:1]).all()) and not torch.equal(sample, before),
        "batch_size": batch_size,
        "sample_shape": tuple(sample_shape),
        "shape": tuple(batch.shape),
        "expand_bytes": held,
        "shares": shares_storage(batch, sample),
        "stack_bytes": stack_b,
        "repeat_bytes": rep_b,
        "equal": equal,
        "elements": batch.numel(),
    }


def _j_batch_view(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the batch")
    if (
        f["shape"] == (f["batch_size"], *f["sample_shape"])
        and f["expand_bytes"] == 0
        and f["equal"]
        and min(f["stack_bytes"], f["repeat_bytes"]) > 0
    ):
        if f["augment_error"]:
            aug = f"in-place augmentation of one sample fails ({f['augment_error']})"
        else:
            aug = (
                "but in-place augmentation is a trap: batch[0].add_(1) runs silently and changes "
                f"every sample: {f['augment_changed_every_sample']}, and the source: {f['augment_changed_source']}"
            )
        return "true", (
            f"a {f['shape']} batch equal to torch.stack's, 0 B (stack {f['stack_bytes']:,} B, repeat "
            f"{f['repeat_bytes']:,} B); {aug}"
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
    true={"augment_error": "RuntimeError: unsupported operation"},
)


# ---- A11 -------------------------------------------------------------------------------------------------------------
def _ev_batch_times(*, sample_shape: tuple[int, int, int] = (3, 224, 224), batch_size: int = 256) -> Facts:
    image = torch.randn(sample_shape)
    # the same values, exactly (a copy does no arithmetic); torch.equal reads both once and allocates nothing more
    same = torch.equal(image.unsqueeze(0).expand(batch_size, -1, -1, -1), image.repeat(batch_size, 1, 1, 1))
    t_exp = timing(lambda: image.unsqueeze(0).expand(batch_size, -1, -1, -1), min_run_time=0.05)
    t_rep = timing(lambda: image.repeat(batch_size, 1, 1, 1), min_run_time=0.1, rounds=2)  # each call writes it all
    written = batch_size * image.numel() * image.element_size()
    return {
        "expand_median_s": t_exp["median_s"],
        "expand_iqr_s": t_exp["iqr_s"],
        "repeat_median_s": t_rep["median_s"],
        "repeat_iqr_s": t_rep["iqr_s"],
        "expand_fastest_s": t_exp["fastest_s"],
        "repeat_fastest_s": t_rep["fastest_s"],
        "repeat_writes_bytes": written,
        "repeat_runs": t_rep["runs"],
        "same_result": same,
        "device": image.device.type,  # the article's code, torch.randn(3, 224, 224), makes a CPU tensor too
    }


#: The article's case: a 3x224x224 float32 sample, batch 256 -- the bytes its claimed 152 us of repeat write.
_A11_BYTES = 256 * 3 * 224 * 224 * 4


def _j_batch_times(f: Mapping[str, Any]) -> Verdict:
    if not f["same_result"]:
        return not_the_same_work("the expanded batch and the repeated one hold different values")
    if f["repeat_writes_bytes"] == 0:
        return nothing_tried("an empty batch: repeat writes nothing")
    # The claimed repeat time is for the article's bytes; at any other size it is scaled by the bytes written
    # (the same write speed), and expand's claimed time is per call at any size (it writes no data).
    speed = _A11_BYTES / 152e-6
    scaled = f["repeat_writes_bytes"] / speed
    verdict, why = judge_claimed_times(f, {"expand": 28.7e-6, "repeat": scaled})
    return verdict, (
        f"timed on the {f['device'].upper()} (on one thread, as every timing here), where the article's torch.randn(3, 224, 224) puts its sample: {why}; "
        f"repeat writes {mib(f['repeat_writes_bytes'])} ({f['repeat_runs']} timed blocks), and the claimed 152 us "
        f"for the article's 147 MiB means writing {speed / 1e9:,.0f} GB/s -- the repeat half is judged for a CPU "
        f"only (a datacenter GPU's memory could write that fast; not measured here)"
    )


A11 = claim_row(
    "A11",
    A,
    "2.1 Generating batches",
    "speed",
    "Timed with %timeit for a 3x224x224 sample and batch 256: the expand version takes 28.7 us, repeat(256, 1, 1, 1) 152 us.",
    _ev_batch_times,
    _j_batch_times,
    true={
        "expand_median_s": 25e-6,
        "expand_iqr_s": 1e-6,
        "expand_fastest_s": 24e-6,
        "repeat_median_s": 150e-6,
        "repeat_iqr_s": 5e-6,
        "repeat_fastest_s": 148e-6,
    },
    not_checkable_here={
        "expand_median_s": 25e-6,
        "expand_iqr_s": 20e-6,
        "expand_fastest_s": 10e-6,
        "repeat_median_s": 1e-3,
        "repeat_iqr_s": 1e-3,
        "repeat_fastest_s": 5e-4,
    },
)


# ---- A12 -------------------------------------------------------------------------------------------------------------
def _growing_expands(seen: OpNames) -> list[torch.Tensor]:
    """The tensors an ``expand`` grew (to a shape other than its own). A no-op expand, shape unchanged, is how a
    3-d ``@`` hands its operands to ``bmm``: it shares nothing across anything, so it is not counted."""
    return [args[0] for args in seen.calls.get("expand", []) if tuple(args[1]) != tuple(args[0].shape)]


def _ev_heads_shared(
    *, heads: tuple[int, ...] = (1, 4), batch: int = 2, tokens: int = 5, width: int = 16, seed: int = 0
) -> Facts:
    """The rebuilt layer, once per head count: what its matrix products multiply, and what it expands."""
    x, w_in, w_out = attention_inputs(batch, tokens, width, seed)
    if not x.numel():  # no element to share or compare (and a width of 0 has no q, k, v to split)
        return {"heads_tried": tuple(heads), "elements": 0}
    split, expanded_weight, expands, operand_shapes, outputs = False, False, 0, set(), []
    for h in heads:
        with torch.no_grad(), OpNames() as seen:
            outputs.append(article_attention(x, w_in, w_out, heads=h))
        # heads are split when a product works on per-head slices: (batch * heads, N, width / heads) or 4-D
        shapes = {tuple(a.shape) for args in seen.calls.get("bmm", []) for a in args}
        operand_shapes |= shapes
        split |= any(len(sh) == 4 or (h > 1 and sh[0] == batch * h and sh[-1] == width // h) for sh in shapes)
        expanded = _growing_expands(seen)
        expands = max(expands, len(expanded))
        expanded_weight |= any(shares_storage(t, w) for t in expanded for w in (w_in, w_out))
    scale_only = all(
        torch.allclose(out * math.sqrt(width // h), outputs[0] * math.sqrt(width // heads[0]), atol=1e-4)
        for h, out in zip(heads, outputs)
    )
    return {
        "heads_tried": tuple(heads),
        "expands": expands,
        "expanded_a_weight": expanded_weight,
        "product_shapes": sorted(operand_shapes),
        "heads_split": split,
        "heads_only_scale": scale_only,
        "elements": x.numel(),
    }


def _j_heads_shared(f: Mapping[str, Any]) -> Verdict:
    if not f["heads_tried"]:
        return nothing_tried("no head count tried")
    if f["elements"] == 0:
        return no_elements("the input x")
    if f["heads_split"] and f["expanded_a_weight"]:
        return "true", "the heads are split and a projection weight is expanded across them"
    return "false", (
        f"for heads {f['heads_tried']}, no weight is ever expanded (the {f['expands']} expand in a forward is of "
        f"the mask); the heads are never split (the products multiply {f['product_shapes']}: one head of full "
        f"width; the head count only rescales the output: {f['heads_only_scale']}); "
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
def _ev_mask_reused(
    *, calls: int = 3, heads: int = 4, batch: int = 2, tokens: int = 5, width: int = 16, seed: int = 0
) -> Facts:
    x, w_in, w_out = attention_inputs(batch, tokens, width, seed)
    if not x.numel():  # no byte of mask or output to count (and a width of 0 has no q, k, v to split)
        return {"calls": calls, "elements": 0}
    with torch.no_grad(), measure(log_ops=True) as m:
        outs = [article_attention(x, w_in, w_out, heads=heads) for _ in range(calls)]
    made = [op.bytes for op in m.ops if op.name.startswith("aten.ones")]
    mask = torch.ones(1, tokens, tokens)
    # the layer turns its float mask into a bool one (.bool() here, `mask == 0` in the usual masked_fill idiom):
    # from the expanded mask that writes (B, N, N) bools, from the (1, N, N) mask left to broadcast, (1, N, N)
    compare_expanded, _, _ = bytes_of(lambda: mask.expand(batch, tokens, tokens).bool())
    compare_broadcast, _, _ = bytes_of(lambda: mask.bool())
    with torch.no_grad():  # the same layer with the mask step left out
        q, k, v = (x @ w_in.T).chunk(3, dim=-1)
        plain = torch.bmm(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(width // heads), v) @ w_out.T
    return {
        "calls": calls,
        "masks_built": len(made),
        "mask_bytes_each": made[0] if made else 0,
        "mask_changes_output": any(not torch.allclose(out, plain) for out in outs),
        "mask_compare_bytes_expanded": compare_expanded,
        "mask_compare_bytes_broadcast": compare_broadcast,
        "elements": x.numel(),
    }


def _j_mask_reused(f: Mapping[str, Any]) -> Verdict:
    if f["calls"] == 0:
        return nothing_tried("the layer was never called")
    if f["elements"] == 0:
        return no_elements("the input x")
    hides = "" if f["mask_changes_output"] else "; and an all-ones mask hides nothing (output equal without it)"
    if f["masks_built"] >= f["calls"]:
        return "false", (
            f"torch.ones builds a new {f['mask_bytes_each']}-byte mask on each of {f['calls']} calls "
            f"({f['masks_built']} built), so the mask is re-created every time; read instead as 'one (1, N, N) mask, "
            "not (B, N, N)', the expand does avoid a (B, N, N) float mask -- but the .bool() (or == 0) that "
            f"follows writes a (B, N, N) bool one, {f['mask_compare_bytes_expanded']:,} B, where a (1, N, N) mask "
            f"left to broadcast (masked_fill and torch.where broadcast it themselves) costs "
            f"{f['mask_compare_bytes_broadcast']:,} B: the expand is redundant and multiplies that step's bytes by "
            f"the batch{hides}"
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
    true={"masks_built": 1, "mask_changes_output": True},
    not_checkable_here={"calls": 0},
)


# ---- A14 -------------------------------------------------------------------------------------------------------------
def _ev_pool_weights(*, batch: int = 4, steps: int = 6, features: int = 8) -> Facts:
    w = torch.randn(1, features)
    x = torch.randn(batch, steps, features)
    held, _, _ = bytes_of(lambda: w.expand(batch, features)[:, None, :])
    _, peak_e, out_e = bytes_of(lambda: pool_expanded(x, w))
    _, peak_b, out_b = bytes_of(lambda: (x * w).sum(1))
    return {
        "expand_bytes": held,
        "batch": batch,
        # same_result, the course's one test of "the same result" (here the two are bit-identical: the same
        # products, summed in the same order)
        "equal_to_broadcasting": same_result(out_e, out_b),
        "peak_expand": peak_e,
        "peak_broadcasting": peak_b,
        "elements": x.numel(),
    }


def _j_pool_weights(f: Mapping[str, Any]) -> Verdict:
    if f["batch"] == 0:
        return nothing_tried("an empty batch")
    if f["elements"] == 0:
        return no_elements("the input x")
    if f["expand_bytes"] == 0:
        redundant = (
            (
                " -- and redundant: x * weights broadcasts by itself, the same result, the same peak "
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
        "batch": batch,
        "parameter_shape": tuple(w.shape),
        "batch_stride": stretched.stride(0),
        "grad_shape": tuple(w.grad.shape),
        "grad_is_batch_sum": torch.allclose(w.grad, x.sum((0, 1))[None].expand_as(w.grad), atol=1e-5),
        "elements": x.numel(),
    }


def _j_per_sample(f: Mapping[str, Any]) -> Verdict:
    if f["batch"] < 2:
        return nothing_tried(f"a batch of {f['batch']}: there are no different samples to give weights")
    if f["elements"] == 0:
        return no_elements("the input x")
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


# ---- A29 -------------------------------------------------------------------------------------------------------------
def _ev_scores_expanded(*, heads: int = 4, batch: int = 2, tokens: int = 5, width: int = 16, seed: int = 0) -> Facts:
    """The rebuilt layer once: which tensors it expands, and whether they are the (all-ones) mask or data."""
    x, w_in, w_out = attention_inputs(batch, tokens, width, seed)
    if not x.numel():  # no value to compare with 1 (and a width of 0 has no q, k, v to split)
        return {"elements": 0}
    with torch.no_grad(), OpNames() as seen:
        article_attention(x, w_in, w_out, heads=heads)
    expanded = _growing_expands(seen)
    return {
        "expanded_shapes": [tuple(t.shape) for t in expanded],
        "expanded_all_ones": [bool((t == 1).all()) for t in expanded],
        "scores_shape": (batch, tokens, tokens),
        "ones_made": seen.names.count("ones"),
        "elements": x.numel(),
    }


def _j_scores_expanded(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:  # an empty mask is "all ones" vacuously
        return no_elements("the input x")
    data = [sh for sh, ones in zip(f["expanded_shapes"], f["expanded_all_ones"]) if not ones]
    if data:
        return "true", f"the layer expands tensors holding data: {data}"
    # (an expand that keeps its input's shape, as a 3-d @ runs on its operands, is not counted: it stretches nothing)
    return "false", (
        f"the only tensors expanded are all-ones masks made by torch.ones ({f['expanded_shapes'] or 'none'}; "
        f"{f['ones_made']} torch.ones call); the {f['scores_shape']} scores come out of a batched product, already "
        "of full size, and are never expanded -- the comment names the wrong tensor"
    )


A29 = claim_row(
    "A29",
    A,
    "2.2 Attention",
    "semantics",
    "In that class, expand() broadcasts the attention scores (the comment on the line that computes them).",
    _ev_scores_expanded,
    _j_scores_expanded,
    true={"expanded_shapes": [(5, 5)], "expanded_all_ones": [False]},
)


# ---- A30 -------------------------------------------------------------------------------------------------------------
def _ev_combined_saving(*, batch: int = 4, steps: int = 6, features: int = 8, seed: int = 0) -> Facts:
    """The rebuilt pooling (expand, then broadcasting) against plain broadcasting of the (1, D) weight: peaks."""
    gen = torch.Generator().manual_seed(seed)
    w, x = torch.randn(1, features, generator=gen), torch.randn(batch, steps, features, generator=gen)
    _, peak_e, out_e = bytes_of(lambda: pool_expanded(x, w))
    _, peak_b, out_b = bytes_of(lambda: (x * w).sum(1))
    return {
        "elements": x.numel(),
        "peak_expand_then_broadcast": peak_e,
        "peak_broadcasting_alone": peak_b,
        "same_result": same_result(out_e, out_b),
    }


def _j_combined_saving(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return nothing_tried("an empty input")
    if not f["same_result"]:
        return not_the_same_work("the pooled outputs differ")
    e, b = f["peak_expand_then_broadcast"], f["peak_broadcasting_alone"]
    if e < b:
        return "true", f"expand then broadcasting peaks at {e:,} B, broadcasting alone at {b:,} B"
    return "false", (
        f"no optimisation at all: with the expand the pooling peaks at {e:,} B, with plain broadcasting at {b:,} B, "
        "and the results agree -- the (batch, T, D) product is what costs memory, and the expand does not "
        "avoid it (broadcasting alone never copied the weight either)"
    )


A30 = claim_row(
    "A30",
    A,
    "2.3 Broadcasting combined",
    "memory",
    "Combined with PyTorch's broadcasting rules, expand() achieves more complex memory optimisations (the sentence "
    "that opens section 2.3, above its pooling example).",
    _ev_combined_saving,
    _j_combined_saving,
    true={"peak_expand_then_broadcast": 256},
)


CLAIMS: tuple[Claim, ...] = (
    A29,
    A30,
    A10,
    A11,
    A12,
    A13,
    A14,
    A15,
)
