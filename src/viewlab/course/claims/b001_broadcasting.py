"""Claims of article 001 (expand_as), its introduction, section 1 "What broadcasting is" and section 2
"How expand_as works": B01-B06.

Each block is one claim: its evidence (runs code, returns facts), its judge (facts -> verdict and why)
and its registry row (the restatement, and facts under which the judge says something else).

>>> from viewlab.course.claims.model import judge
>>> judge(B03, B03.evidence())[0]
'true'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from viewlab import shares_storage
from viewlab.memory import measure

from .. import article_helpers as ah
from ._evidence import (
    OpNames,
    bytes_of,
    error_of,
    no_elements,
    nothing_tried,
    small_shape_pairs,
)
from .model import B, Claim, Facts, Verdict, claim_row


# ---- B01 -------------------------------------------------------------------------------------------------------------
def _ev_broadcast_no_copy(a_shape: tuple[int, ...] = (3, 1), b_shape: tuple[int, ...] = (1, 4)) -> Facts:
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    with measure(log_ops=True) as m:
        c = a + b
    return {
        "allocated": m.allocated_bytes,
        "result_bytes": c.numel() * c.element_size(),
        "result_shape": tuple(c.shape),
        "ops": [op.name for op in m.ops],
        "shapes": (tuple(a.shape), tuple(b.shape)),
        "elements": c.numel(),
    }


def _j_broadcast_no_copy(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the result")
    if f["allocated"] == f["result_bytes"]:
        return (
            "true",
            f"{f['shapes'][0]} + {f['shapes'][1]} allocated {f['allocated']} B = the {f['result_shape']} result only; ops: {f['ops']}",
        )
    return "false", f"allocated {f['allocated']} B for a {f['result_bytes']}-byte result: the inputs were copied"


B01 = claim_row(
    "B01",
    B,
    "1 What broadcasting is",
    "memory",
    "Broadcasting lets tensors of different shapes be combined element-wise without explicitly copying data: a "
    "memory optimisation.",
    _ev_broadcast_no_copy,
    _j_broadcast_no_copy,
    false={"allocated": 96},
)


# ---- B02 -------------------------------------------------------------------------------------------------------------
def _torch_broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None


def _ev_three_rules(pairs: list[tuple[tuple[int, ...], tuple[int, ...]]] | None = None) -> Facts:
    pairs = small_shape_pairs() if pairs is None else pairs
    wrong = [p for p in pairs if ah.article_broadcast_shape(*p) != _torch_broadcast(*p)]
    return {"pairs": len(pairs), "disagreements": len(wrong), "first": wrong[0] if wrong else None}


def _j_three_rules(f: Mapping[str, Any]) -> Verdict:
    if f["pairs"] == 0:
        return nothing_tried("no pair of shapes")
    if f["disagreements"] == 0:
        return (
            "true",
            f"the three rules, applied literally, agree with torch.broadcast_shapes on all {f['pairs']:,} shape pairs tried",
        )
    return "false", f"{f['disagreements']:,} of {f['pairs']:,} pairs disagree, e.g. {f['first']}"


B02 = claim_row(
    "B02",
    B,
    "1 What broadcasting is",
    "semantics",
    "Broadcasting follows three rules: compare from the last dimension; sizes are equal or one of them is 1; a "
    "missing dimension counts as 1.",
    _ev_three_rules,
    _j_three_rules,
    false={"disagreements": 3, "first": ((2,), (3,))},
)


# ---- B03 -------------------------------------------------------------------------------------------------------------
def _ev_example_shape(a_shape: tuple[int, ...] = (3, 1), b_shape: tuple[int, ...] = (1, 4)) -> Facts:
    return {"shape": tuple((torch.randn(a_shape) + torch.randn(b_shape)).shape)}


def _j_example_shape(f: Mapping[str, Any]) -> Verdict:
    # The article says (3, 4); the judge compares what came out with that.
    return ("true", "shape (3, 4)") if f["shape"] == (3, 4) else ("false", f"shape {f['shape']}")


B03 = claim_row(
    "B03",
    B,
    "1 What broadcasting is",
    "semantics",
    "A (3, 1) tensor plus a (1, 4) tensor broadcasts to (3, 4).",
    _ev_example_shape,
    _j_example_shape,
    false={"shape": (3, 1)},
)


# ---- B04 -------------------------------------------------------------------------------------------------------------
#: Broadcasting in operators other than element-wise ones (a dispatch mode sees what each calls from its top level).
_OTHER_BROADCASTS = {
    "matmul (2, 1, 3, 4) @ (5, 4, 6)": lambda: torch.ones(2, 1, 3, 4) @ torch.ones(5, 4, 6),
    "masked_fill of (2, 7) with a (1, 7) mask": lambda: torch.ones(2, 7).masked_fill(
        torch.zeros(1, 7, dtype=torch.bool), 0.0
    ),
}
#: matmul broadcasts batch dims three ways: two batch dims, one broadcast, flattened into one (a copy of each
#: expanded operand); one broadcast batch dim (expand and view, no copy); a batch of 1 against a batch (folded into mm).
_MATMULS = {
    "(2, 1, 3, 4) @ (5, 4, 6)": ((2, 1, 3, 4), (5, 4, 6)),
    "(1, 3, 4) @ (5, 4, 6)": ((1, 3, 4), (5, 4, 6)),
    "(5, 3, 4) @ (1, 4, 6)": ((5, 3, 4), (1, 4, 6)),
}


def _ev_weights_times_features(w_shape: tuple[int, ...] = (2, 1), f_shape: tuple[int, ...] = (2, 7)) -> Facts:
    w, feats = torch.randn(w_shape), torch.randn(f_shape)
    err = error_of(lambda: w * feats)
    with measure(log_ops=True) as m:
        out = None if err else w * feats
    aligned_bytes = 0 if err else bytes_of(lambda: w.expand_as(feats))[0]
    dispatched = {}
    for name, fn in _OTHER_BROADCASTS.items():
        with OpNames() as seen:
            fn()
        dispatched[name] = [n for n in seen.names if n not in ("ones", "zeros")]
    matmuls = {}
    for case, (a_shape, b_shape) in _MATMULS.items():  # what matmul's broadcasting costs: operators, their bytes
        a, b = torch.ones(a_shape), torch.ones(b_shape)
        with measure(log_ops=True) as mm:
            product = a @ b
        matmuls[case] = {
            "ops": [op.name.split(".")[1] for op in mm.ops],
            "clone_bytes": [op.bytes for op in mm.ops if op.name.startswith("aten.clone")],
            "new_bytes": sum(op.bytes for op in mm.ops),
            "result_bytes": product.nbytes,
        }
    elements = 0 if out is None else out.numel()
    return {
        "error": err,
        "elements": elements,
        "shape": None if out is None else tuple(out.shape),
        "rows_scaled": elements > 0 and torch.equal(out, torch.stack([w[i] * feats[i] for i in range(len(w))])),
        "ops_while_broadcasting": [op.name for op in m.ops],
        "expand_as_gives_the_same": out is not None and torch.equal(w.expand_as(feats) * feats, out),
        "expand_as_bytes": aligned_bytes,
        "other_operators_dispatch": dispatched,
        "matmul_cases": matmuls,
        "matmul_clone_bytes": matmuls[next(iter(_MATMULS))]["clone_bytes"],
    }


def _j_weights_times_features(f: Mapping[str, Any]) -> Verdict:
    if not f["error"] and f["elements"] == 0:
        return no_elements("the product")
    if f["error"] or not f["rows_scaled"]:
        return "false", f"the product does not scale each row by its weight: {f['error'] or f['shape']}"
    if any("expand" in op for op in f["ops_while_broadcasting"]):
        return "true", f"broadcasting ran through expand: {f['ops_while_broadcasting']}"
    if not f["expand_as_gives_the_same"] or f["expand_as_bytes"]:
        return "false", (
            f"w.expand_as(x) * x does not give the broadcast product at no cost (same values: "
            f"{f['expand_as_gives_the_same']}, {f['expand_as_bytes']:,} B)"
        )
    with_expand = [name.split(" ")[0] for name, ops in f["other_operators_dispatch"].items() if "expand" in ops]
    # matmul_cases (what matmul's own broadcasting copies) are evidence beside the verdict, not its reason: the
    # notebook's text says what they show and its cell asserts each
    return "misleading", (
        f"as a tool it works: w.expand_as(x) * x gives the broadcast product, shape {f['shape']}, at "
        f"{f['expand_as_bytes']} B -- but broadcasting needs no expand_as: w * x alone runs "
        f"{f['ops_while_broadcasting']}, the kernel reading the size-1 dim with stride 0 itself, and the "
        "article's own section 1 calls expand_as an explicit control, no hero behind the scenes; operators "
        f"that expand as part of their own work ({', '.join(with_expand) or 'none'} here, as a dispatch mode "
        "sees; masked_fill too, inside its kernel) never call expand_as"
    )


B04 = claim_row(
    "B04",
    B,
    "introduction, title",
    "semantics",
    "Attention weights of shape (batch_size, 1) multiply features of shape (batch_size, sequence_length) by "
    "broadcasting, and expand_as() is the efficient tool that does this (the title calls it broadcasting's hero "
    "behind the scenes).",
    _ev_weights_times_features,
    _j_weights_times_features,
    true={"ops_while_broadcasting": ["aten.expand.default", "aten.mul.Tensor"]},
    false={"expand_as_gives_the_same": False},
)


# ---- B05 -------------------------------------------------------------------------------------------------------------
def _ev_expand_as_view(a_shape: tuple[int, ...] = (3, 1), b_shape: tuple[int, ...] = (3, 4)) -> Facts:
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    held, _, out = bytes_of(lambda: a.expand_as(b))
    return {
        "bytes": held,
        "shares": shares_storage(out, a),
        "shape": tuple(out.shape),
        "target": tuple(b.shape),
        "elements": out.numel(),
    }


def _j_expand_as_view(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the view")
    if f["bytes"] == 0 and f["shares"] and f["shape"] == f["target"]:
        return "true", f"0 B, shares memory with a, shape {f['shape']}"
    return "false", f"{f['bytes']:,} B, shares: {f['shares']}, shape {f['shape']}"


B05 = claim_row(
    "B05",
    B,
    "2 How expand_as works",
    "memory",
    "expand_as() is a view operation: it copies no data and returns a view with the target tensor's shape.",
    _ev_expand_as_view,
    _j_expand_as_view,
    false={"bytes": 48, "shares": False},
)


# ---- B06 -------------------------------------------------------------------------------------------------------------
def _ev_expand_equals_expand_as(a_shape: tuple[int, ...] = (3, 1), b_shape: tuple[int, ...] = (3, 4)) -> Facts:
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    e, ea = a.expand(*b_shape), a.expand_as(b)
    return {"equal": torch.equal(e, ea), "strides": (tuple(e.stride()), tuple(ea.stride())), "elements": e.numel()}


def _j_expand_equals_expand_as(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:  # any two empty tensors of one shape are equal
        return no_elements("the expanded tensor")
    if f["equal"] and f["strides"][0] == f["strides"][1]:
        return "true", f"equal values, same strides {f['strides'][0]}: b lends only its shape"
    return "false", f"equal: {f['equal']}, strides {f['strides']}"


B06 = claim_row(
    "B06",
    B,
    "2 How expand_as works",
    "API",
    "expand_as() does what expand() does with shorter syntax: a.expand(3, 4) equals a.expand_as(b) for b of shape (3, 4).",
    _ev_expand_equals_expand_as,
    _j_expand_equals_expand_as,
    false={"equal": False},
)


# ---- B19 -------------------------------------------------------------------------------------------------------------
def _ev_who_is_stretched(
    *, pairs: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (((3, 1), (1, 4)), ((2, 1), (2, 7)))
) -> Facts:
    """For each pair of shapes (the article's section-1 example and its introduction's): the broadcast shape,
    and which inputs broadcasting stretches to it."""
    cases = []
    for a, b in pairs:
        out = tuple(torch.broadcast_shapes(a, b))
        stretched = [s for s in (a, b) if tuple(s) != out]
        smaller = min((a, b), key=math.prod)
        cases.append(
            {
                "shapes": (tuple(a), tuple(b)),
                "result": out,
                "stretched": [tuple(s) for s in stretched],
                "only_the_smaller_to_the_larger": stretched == [smaller] and out in (tuple(a), tuple(b)),
            }
        )
    return {"cases": cases}


def _j_who_is_stretched(f: Mapping[str, Any]) -> Verdict:
    cases = f["cases"]
    if not cases:
        return nothing_tried("no pair of shapes")
    holds = [c for c in cases if c["only_the_smaller_to_the_larger"]]
    fails = [c for c in cases if not c["only_the_smaller_to_the_larger"]]
    if not fails:
        return "true", f"in every pair only the smaller tensor is stretched, to the larger one's shape: {cases}"
    bad = "; ".join(
        f"{c['shapes'][0]} with {c['shapes'][1]} stretches {c['stretched']} to {c['result']}" for c in fails
    )
    # a general statement with a counterexample is false, the section's own example among them; a pair where it
    # holds does not make it hold (verdict vocabulary: misleading is for statements that literally hold)
    also = f"; of the pairs tried, it holds for {holds[0]['shapes'][0]} with {holds[0]['shapes'][1]}" if holds else ""
    return "false", (
        f"not in general: {bad} -- both inputs, to a shape neither has; broadcasting stretches every input along "
        f"its size-1 (or missing) dimensions, whatever its size{also}"
    )


B19 = claim_row(
    "B19",
    B,
    "1 What broadcasting is",
    "semantics",
    "Broadcasting automatically stretches the smaller tensor along certain dimensions to match the larger "
    "tensor's shape.",
    _ev_who_is_stretched,
    _j_who_is_stretched,
    true={
        "cases": [
            {
                "shapes": ((2, 1), (2, 7)),
                "result": (2, 7),
                "stretched": [(2, 1)],
                "only_the_smaller_to_the_larger": True,
            }
        ]
    },
    false={
        "cases": [
            {
                "shapes": ((3, 1), (1, 4)),
                "result": (3, 4),
                "stretched": [(3, 1), (1, 4)],
                "only_the_smaller_to_the_larger": False,
            }
        ]
    },
)

CLAIMS: tuple[Claim, ...] = (
    B19,
    B01,
    B02,
    B03,
    B04,
    B05,
    B06,
)
