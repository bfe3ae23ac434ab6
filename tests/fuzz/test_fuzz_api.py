"""Fuzzing the public API: layouts, broadcasting, view ops, attention, bench and the exercises.

Each public callable is one row of :data:`TARGETS`: ``Target(name, fn, good, oracle)`` -- the callable
(looked up by its public name), a strategy of good arguments, and an oracle that checks a returned result
against torch where torch has the same operation. What happens to each example (bends, the clear-error
rule, the time limit, the checks that nothing changed or was left behind) is :mod:`tests.fuzz.harness`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from matplotlib.figure import Figure

from tests.fuzz.harness import (
    MODE,
    Target,
    _broadcastable,
    _fixed,
    _merge,
    _optional,
    _randn,
    any_strided,
    broadcastable,
    drawable,
    fuzz,
    mhsa_args,
    public,
    qkv,
    seeds,
    small,
)
from viewlab.course.exercises.rules import FAMILIES

EXERCISES = "viewlab.course.exercises"  # its get and show are not the claims' get and show
storage_indices, OP_CASES = public("storage_indices"), public("OP_CASES")
padding_mask, causal_mask, SqueezeExcitation = (
    public("padding_mask"),
    public("causal_mask"),
    public("SqueezeExcitation"),
)
CheckResult, PASSED, get_exercise = public("CheckResult"), public("PASSED"), public("get", EXERCISES)

_SE = SqueezeExcitation(4, reduction=2)
_SE_STATE = {k: v.clone() for k, v in _SE.state_dict().items()}
_IDS = public("exercise_ids")()


def _pasted_solution(exercise_id: str) -> Any:
    """The printed solution, pasted into a cell: check_exercise refuses the bank's own reference object."""
    from viewlab.course.exercises import solution_source

    e = get_exercise(exercise_id)
    namespace = {"torch": torch}
    exec(compile(solution_source(e), "<pasted cell>", "exec"), namespace)
    return namespace[e.signature[4:].split("(")[0]]


_UNIQUE_OPS = sorted({c.op for c in OP_CASES if sum(d.op == c.op for d in OP_CASES) == 1})


# ----- oracles: check a returned result ----------------------------------------------------------------------
def _scores_shape(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, ...]:
    """The shape of the attention scores: the batch dims of q, k and v broadcast, then (Lq, Lk)."""
    return (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]), q.shape[-2], k.shape[-2])


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    tol = {torch.float64: 1e-7, torch.float32: 1e-4}.get(b.dtype, 1e-2)
    torch.testing.assert_close(a, b, rtol=tol, atol=tol, equal_nan=True)


def _brute_overlap(t: torch.Tensor) -> bool:
    idx = storage_indices(t).reshape(-1)
    return idx.unique().numel() < idx.numel()


def oracle_layout(kw: dict, result: Any, data: Any) -> None:
    t = kw["t"]
    assert result.shape == tuple(t.shape) and result.stride == tuple(t.stride())
    assert result.storage_offset == t.storage_offset() and result.numel == t.numel()
    assert result.logical_bytes == t.numel() * t.element_size()
    assert result.overlaps == _brute_overlap(t)
    str(result), result._repr_html_()


def oracle_storage_indices(kw: dict, result: Any, data: Any) -> None:
    t = kw["t"]
    n = t.untyped_storage().nbytes() // t.element_size()
    expected = torch.arange(max(n, 1)).as_strided(tuple(t.shape), t.stride(), t.storage_offset())
    assert torch.equal(result, expected)


def oracle_draw_layout(kw: dict, result: Any, data: Any) -> None:
    assert isinstance(result, Figure) and len(result.axes) == 2
    cells = [x.get_text() for x in result.axes[0].texts if x.get_text().startswith("@")]
    assert len(cells) == kw["t"].numel()


def oracle_describe_layout(kw: dict, result: Any, data: Any) -> None:
    t = kw["t"]
    assert isinstance(result, str) and f"shape {tuple(t.shape)}, stride {t.stride()}" in result
    assert ("An arrow" in result) == any(
        x.get_text().startswith("offset ") for x in public("draw_layout")(t).axes[1].texts
    )


def oracle_draw_broadcast(kw: dict, result: Any, data: Any) -> None:
    assert isinstance(result, Figure) and len(result.axes) == len(kw["*"]) + 1


def oracle_explain(kw: dict, result: Any, data: Any) -> None:
    shapes = [tuple(o.shape) if isinstance(o, torch.Tensor) else tuple(o) for o in kw["*"]]
    assert result.shape == torch.broadcast_shapes(*shapes)
    str(result), result._repr_html_()


def oracle_shares(kw: dict, result: Any, data: Any) -> None:
    a, b = kw["a"], kw["b"]
    assert isinstance(result, bool)
    if (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.untyped_storage().nbytes()
        and b.untyped_storage().nbytes()
    ):
        assert result == (a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def oracle_observe(kw: dict, result: Any, data: Any) -> None:
    assert result in ("view", "copy", "same tensor", "mixed")


def oracle_table(kw: dict, result: Any, data: Any) -> None:
    doc = kw.get("documented")
    assert len(result.rows) == sum(1 for c in OP_CASES if doc is None or c.documented == doc)


def oracle_padding(kw: dict, result: Any, data: Any) -> None:
    lengths = kw["lengths"].tolist()
    max_len = kw["max_len"] if kw.get("max_len") is not None else max(lengths, default=0)
    expected = torch.tensor([[j < n for j in range(max_len)] for n in lengths], dtype=torch.bool).reshape(
        len(lengths), 1, 1, max_len
    )
    assert torch.equal(result, expected)


def oracle_causal(kw: dict, result: Any, data: Any) -> None:
    q = int(kw["q_len"])
    k = q if kw.get("k_len") is None else int(kw["k_len"])
    assert tuple(result.shape) == (q, k) and result.dtype == torch.bool
    if result.device.type == "meta":
        # meta allocates nothing, so a bent size (q_len=10**12) comes back: the reference must not build
        # that mask for real on the CPU (it once took 24 GB); the shape and dtype are all a meta result has
        return
    assert torch.equal(result.cpu(), torch.ones(q, k, dtype=torch.bool).tril())


def oracle_combine(kw: dict, result: Any, data: Any) -> None:
    masks = torch.broadcast_tensors(*kw["*"])
    if result.device.type == "meta":
        assert result.shape == masks[0].shape
        return
    expected = masks[0]
    for m in masks[1:]:
        expected = torch.logical_and(expected, m)
    assert torch.equal(result, expected)


def oracle_sdpa(kw: dict, result: Any, data: Any) -> None:
    q, k, v = kw["q"], kw["k"], kw["v"]
    out = result[0] if kw.get("return_weights") else result
    assert out.device == q.device and out.dtype == q.dtype
    if q.device.type == "meta" or q.dtype not in (torch.float32, torch.float64):
        return
    mask, scale = kw.get("mask"), kw.get("scale")
    if kw.get("fully_masked") == "nan" or (kw.get("is_causal") and mask is not None):
        return  # SDPA has no NaN mode and refuses a mask together with is_causal
    batch = _scores_shape(q, k, v)[:-2]
    # SDPA broadcasts fewer batch dims than we do, and wants masks of at least 2 dims: give it full shapes
    q, k, v = (t.detach().expand(*batch, *t.shape[-2:]) for t in (q, k, v))
    if mask is not None:
        mask = torch.broadcast_to(mask, _scores_shape(q, k, v))
    if scale is not None and float(scale) == 0.0:
        # every score is 0: uniform weights over the keys a query may see (SDPA's math kernel returns NaN
        # here with is_causal, as it multiplies the -inf of masked scores by the scale)
        keep = torch.ones(_scores_shape(q, k, v), dtype=torch.bool)
        if kw.get("is_causal"):
            keep = keep & causal_mask(q.shape[-2], k.shape[-2])
        if mask is not None and mask.dtype == torch.bool:
            keep = keep & mask
        if mask is not None and mask.dtype != torch.bool:
            return
        weights = keep.to(q.dtype) / keep.sum(-1, keepdim=True).clamp(min=1).to(q.dtype)
        _close(out.detach(), weights @ v)
        return
    expected = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=bool(kw.get("is_causal")), scale=None if scale is None else float(scale)
    )
    _close(out.detach(), expected)


def oracle_split(kw: dict, result: Any, data: Any) -> None:
    x, h = kw["x"], int(kw["num_heads"])
    b, length, d = x.shape
    assert torch.equal(result, x.reshape(b, length, h, d // h).transpose(1, 2)) if x.device.type != "meta" else True
    assert tuple(result.shape) == (b, h, length, d // h)


def oracle_merge(kw: dict, result: Any, data: Any) -> None:
    x = kw["x"]
    b, h, length, dh = x.shape
    assert tuple(result.shape) == (b, length, h * dh)
    if x.device.type != "meta":
        assert torch.equal(result, x.transpose(1, 2).reshape(b, length, h * dh))


def oracle_mhsa(kw: dict, result: Any, data: Any) -> None:
    x = kw["x"]
    b, length, d = x.shape
    h = int(kw["num_heads"])
    lengths, causal = kw.get("lengths"), kw.get("causal", False)
    key_padding = None if lengths is None else ~padding_mask(lengths, length)[:, 0, 0]
    attn_mask = None if not causal else ~causal_mask(length)
    if lengths is not None and causal:
        # torch merges the masks itself; a fully masked row is where it and we differ (NaN vs 0)
        keep = ~key_padding[:, None, :] & ~attn_mask[None]
        if not bool(keep.any(-1).all()):
            return
    bias_in = kw["in_proj_bias"] if kw["in_proj_bias"] is not None else torch.zeros(3 * d, dtype=x.dtype)
    expected, _ = F.multi_head_attention_forward(
        x.transpose(0, 1),
        x.transpose(0, 1),
        x.transpose(0, 1),
        d,
        h,
        kw["in_proj_weight"],
        bias_in,
        None,
        None,
        False,
        0.0,
        kw["out_proj_weight"],
        kw["out_proj_bias"],
        training=False,
        key_padding_mask=key_padding,
        need_weights=False,
        attn_mask=attn_mask,
    )
    if lengths is not None and not bool(lengths.min() > 0):
        return
    _close(result.detach(), expected.transpose(0, 1).detach())


def oracle_se_init(kw: dict, result: Any, data: Any) -> None:
    c = int(kw["channels"])
    assert result.fc1.in_features == c and result.fc2.out_features == c


def oracle_se(kw: dict, result: Any, data: Any) -> None:
    x = kw["x"]
    with torch.no_grad():
        w = torch.sigmoid(_SE.fc2(torch.relu(_SE.fc1(x.mean(dim=(2, 3))))))
        _close(result.detach(), x.detach() * w[:, :, None, None])


def oracle_compare(kw: dict, result: Any, data: Any) -> None:
    assert [r.name for r in result.rows] == list(kw["cases"])
    ref = kw.get("reference") or next(iter(kw["cases"]))
    assert result[ref].ratio == 1.0
    str(result), result._repr_html_()


BenchRow = public("BenchRow")
_bench_rows = st.builds(
    BenchRow,
    name=st.just("row"),
    median_s=st.floats(1e-9, 1.0),
    iqr_s=st.floats(0.0, 1.0),
    runs=st.integers(1, 12),
    ratio=st.just(1.0),
    bytes_moved=st.none(),
    gb_per_s=st.none(),
)
_bench_rows_bytes = _bench_rows.flatmap(  # with bytes moved (0 included) or without
    lambda r: st.sampled_from([None, 0, 1, 4096, 2**26]).map(lambda n: dataclasses.replace(r, bytes_moved=n))
)


def oracle_firm(kw: dict, result: Any, data: Any) -> None:
    rows = kw["*"]
    assert result is all(r.runs >= 3 and 4 * r.iqr_s <= r.median_s for r in rows)  # no rows: nothing against it


def oracle_apart(kw: dict, result: Any, data: Any) -> None:
    a, b = kw["a"], kw["b"]
    per_byte = bool(a.bytes_moved) and bool(b.bytes_moved)
    da, db = (a.bytes_moved, b.bytes_moved) if per_byte else (1, 1)
    gap, spread = abs(a.median_s / da - b.median_s / db), a.iqr_s / da + b.iqr_s / db
    firm = all(r.runs >= 3 and 4 * r.iqr_s <= r.median_s for r in (a, b))
    assert result is (firm and gap > spread)
    swapped = public("apart")(b, a)
    assert swapped is result  # symmetric


def oracle_copy(kw: dict, result: Any, data: Any) -> None:
    fn, nbytes = result
    like = kw["like"]
    assert nbytes == 2 * like.numel() * like.element_size()
    fn()


def oracle_tensors(kw: dict, result: Any, data: Any) -> None:
    t = data.draw(result)
    dtype = kw.get("dtype", torch.float32)
    assert t.dtype == dtype
    # Without values=, tensors() draws whole numbers in -9..9 that dtype stores exactly (0..1 for bool).
    lo, hi = kw.get("values") or ((0, 1) if dtype == torch.bool else (-9 if dtype.is_signed else 0, 9))
    if t.numel():
        values = t.to(torch.float64) if not t.is_complex() else t.real.to(torch.float64)
        assert lo <= float(values.min()) and float(values.max()) <= hi, (lo, hi, t)
    if "shape" not in kw:
        d_lo, d_hi = kw.get("dims", (1, 3))
        assert d_lo <= t.dim() <= d_hi


def oracle_shapes(kw: dict, result: Any, data: Any) -> None:
    shape = data.draw(result)
    d_lo, d_hi = kw.get("dims", (1, 3))
    s_lo, s_hi = kw.get("side", (1, 4))
    assert d_lo <= len(shape) <= d_hi and all(s_lo <= n <= s_hi for n in shape)


def oracle_get(kw: dict, result: Any, data: Any) -> None:
    assert result.id == kw["exercise_id"]


def oracle_ids(kw: dict, result: Any, data: Any) -> None:
    assert all(i.startswith(kw.get("prefix", "")) for i in result) and result == sorted(result)


def oracle_explore(kw: dict, result: Any, data: Any) -> None:
    t = kw["t"]  # the explorer starts from t's real layout, and gives t's own view back
    if t is None:  # no tensor: the default layout, a contiguous (2, 3) over the 6 elements it needs
        assert (result.shape, result.stride, result.offset, result.size) == ([2, 3], [3, 1], 0, 6)
        return
    assert (result.shape, result.stride, result.offset) == (list(t.shape), list(t.stride()), t.storage_offset())
    back = result.tensor()
    assert back.data_ptr() == t.data_ptr() and back.stride() == t.stride() and back.shape == t.shape
    assert repr(result).startswith(f"Explorer(shape={tuple(t.shape)}, stride={tuple(t.stride())}")


def oracle_solution_source(kw: dict, result: Any, data: Any) -> None:
    stub = kw["ex"].signature[4:].split("(")[0]  # the printed answer is a def with the stub's own name
    assert isinstance(result, str) and f"def {stub}(" in result, result


def oracle_none(kw: dict, result: Any, data: Any) -> None:
    assert result is None


def oracle_check(kw: dict, result: Any, data: Any) -> None:
    assert isinstance(result, CheckResult)
    if MODE[0] == "good":  # the learner's function is the reference (or its equal): it must pass
        assert result.status == PASSED, str(result)


def oracle_guess(kw: dict, result: Any, data: Any) -> None:
    if kw["guess"] is None:
        assert result == "no guess"
    else:
        same = kw["guess"] is kw["actual"] if isinstance(kw["guess"], bool) else kw["guess"] == kw["actual"]
        assert result == ("right" if same else "wrong")


def oracle_named_rule(kw: dict, result: Any, data: Any) -> None:
    assert result.rule == kw["label"] and result((), None) is None


def oracle_rules(kw: dict, result: Any, data: Any) -> None:
    assert result.forbid == kw["forbid"] and result.must_view is kw["must_view"]
    labels = result.labels()
    assert labels[: len(kw["forbid"])] == [f"forbid {n}" for n in kw["forbid"]]
    assert ("must_view" in labels) == kw["must_view"]


def oracle_register(kw: dict, result: Any, data: Any) -> None:
    assert result is kw["exercise"]


def _call_se(x: Any = None, use_expand_as: Any = False) -> Any:
    return _SE(x, use_expand_as=use_expand_as)


def _se_weights_unchanged() -> None:
    assert all(torch.equal(v, _SE_STATE[k]) for k, v in _SE.state_dict().items()), "the module's weights changed"


_cheap = st.sampled_from([lambda: None, lambda: 1 + 1, torch.zeros(4).clone])
_compare_good = _merge(
    _fixed(cases=st.dictionaries(st.sampled_from(["a", "b", "c"]), _cheap, min_size=1, max_size=2)),
    _fixed(min_run_time=st.sampled_from([1e-4, 5e-4]), rounds=st.integers(1, 2)),
    _optional(num_threads=st.integers(1, 2)),
).map(lambda kw: {**kw, **({"bytes_moved": {next(iter(kw["cases"])): 64}} if len(kw["cases"]) == 1 else {})})

_check_good = _merge(
    _fixed(
        learner_fn=st.just(lambda x: x.t()),
        reference_fn=st.just(lambda x: x.transpose(0, 1)),
        inputs=st.sampled_from(
            [
                st.tuples(public("tensors")(dims=(2, 2), side=(1, 3))),
                [(torch.zeros(2, 3),), (torch.arange(4.0).view(2, 2),)],
            ]
        ),
        max_examples=st.integers(1, 3),
    ),
    _optional(
        memory=st.sampled_from([None, "view"]),
        rtol=st.just(1e-5),
        atol=st.just(0.0),
        hint=st.just("a hint"),
        title=st.just("fuzz"),
        examples=st.just([(torch.ones(2, 2),)]),
        extra=st.just([lambda a, r: None]),
    ),
)

TARGETS: list[Target] = [
    Target("layout", public("layout"), _fixed(t=any_strided()), oracle_layout, tensor_args=("t",)),
    Target(
        "explore",
        public("explore"),
        _fixed(t=any_strided().filter(lambda t: t.device.type != "meta")),
        oracle_explore,
        examples=40,
        tensor_args=("t",),
    ),
    Target(
        "storage_indices",
        public("storage_indices"),
        _fixed(t=any_strided()),
        oracle_storage_indices,
        tensor_args=("t",),
    ),
    Target(
        "draw_layout",
        public("draw_layout"),
        _merge(_fixed(t=drawable()), _optional(title=st.just("a title"))),
        oracle_draw_layout,
        examples=40,
        tensor_args=("t",),
    ),
    Target(
        "describe_layout",
        public("describe_layout"),
        _fixed(t=drawable()),
        oracle_describe_layout,
        examples=30,
        tensor_args=("t",),
    ),
    Target(
        "draw_broadcast",
        public("draw_broadcast"),
        _merge(
            _fixed(**{"*": _broadcastable(2)}), _optional(op=st.sampled_from(["+", "*", "==", "<"]), title=st.just("t"))
        ),
        oracle_draw_broadcast,
        examples=30,
        tensor_args=("*",),
    ),
    Target(
        "explain_broadcast",
        public("explain_broadcast"),
        _merge(_fixed(**{"*": broadcastable}), _optional(dtype=st.sampled_from([torch.float16, torch.int64]))),
        oracle_explain,
        tensor_args=("*",),
    ),
    Target(
        "shares_storage",
        public("shares_storage"),
        any_strided()
        .filter(lambda t: t.device.type != "meta")
        .flatmap(
            lambda t: st.sampled_from(
                [{"a": t, "b": t[...]}, {"a": t, "b": t.clone()}, {"a": t.reshape(-1)[:1], "b": t}]
            )
        ),
        oracle_shares,
        tensor_args=("a", "b"),
    ),
    Target(
        "observe",
        public("observe"),
        _fixed(case=st.sampled_from(list(OP_CASES) + _UNIQUE_OPS)),
        oracle_observe,
        examples=60,
    ),
    Target(
        "view_op_table",
        public("view_op_table"),
        _optional(documented=st.sampled_from([None, "view", "copy", "view or copy", "self or copy"])),
        oracle_table,
        examples=20,
    ),
    Target(
        "padding_mask",
        public("padding_mask"),
        st.lists(st.integers(0, 5), min_size=0, max_size=4).flatmap(
            lambda ls: _merge(
                _fixed(lengths=st.just(torch.tensor(ls, dtype=torch.int64))),
                _optional(max_len=st.integers(max(ls, default=0), 7)),
            )
        ),
        oracle_padding,
        tensor_args=("lengths",),
    ),
    Target(
        "causal_mask",
        public("causal_mask"),
        _merge(
            _fixed(q_len=st.integers(0, 6)), _optional(k_len=st.integers(0, 6), device=st.sampled_from(["cpu", "meta"]))
        ),
        oracle_causal,
    ),
    Target(
        "combine_masks",
        public("combine_masks"),
        broadcastable.map(lambda ts: {"*": [t.long() % 2 == 0 for t in ts]}),
        oracle_combine,
        tensor_args=("*",),
    ),
    Target(
        "scaled_dot_product_attention",
        public("scaled_dot_product_attention"),
        qkv(),
        oracle_sdpa,
        examples=100,
        tensor_args=("q", "k", "v", "mask"),
    ),
    Target(
        "split_heads",
        public("split_heads"),
        st.tuples(st.integers(1, 3), small, st.integers(1, 3), st.integers(0, 3)).map(
            lambda s: {
                "x": torch.arange(float(s[0] * s[1] * s[2] * s[3])).reshape(s[0], s[1], s[2] * s[3]),
                "num_heads": s[2],
            }
        ),
        oracle_split,
        tensor_args=("x",),
    ),
    Target(
        "merge_heads",
        public("merge_heads"),
        st.lists(st.integers(0, 3), min_size=4, max_size=4).map(
            lambda s: {"x": torch.arange(float(math.prod(s))).reshape(s)}
        ),
        oracle_merge,
        tensor_args=("x",),
    ),
    Target(
        "multi_head_self_attention",
        public("multi_head_self_attention"),
        mhsa_args(),
        oracle_mhsa,
        examples=80,
        tensor_args=("x", "in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias", "lengths"),
    ),
    Target(
        "SqueezeExcitation",
        public("SqueezeExcitation"),
        st.integers(1, 20).flatmap(
            lambda c: (
                _fixed(channels=st.just(c), reduction=st.integers(1, c))
                if c < 16
                else _merge(_fixed(channels=st.just(c)), _optional(reduction=st.integers(1, c)))
            )
        ),
        oracle_se_init,
        examples=60,
    ),
    Target(
        "SqueezeExcitation.forward",
        _call_se,
        st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(1, 3), seeds)
        .map(lambda s: {"x": _randn(s[3], s[0], 4, s[1], s[2])})
        .flatmap(lambda kw: _merge(st.just(kw), _optional(use_expand_as=st.booleans()))),
        oracle_se,
        tensor_args=("x",),
        after=_se_weights_unchanged,
    ),
    Target("compare", public("compare"), _compare_good, oracle_compare, examples=30),
    Target("firm", public("firm"), _fixed(**{"*": st.lists(_bench_rows, max_size=3)}), oracle_firm, examples=60),
    Target(
        "apart",
        public("apart"),
        _fixed(a=_bench_rows_bytes, b=_bench_rows_bytes),
        oracle_apart,
        examples=60,
    ),
    Target(
        "same_bytes_copy",
        public("same_bytes_copy"),
        _fixed(like=any_strided().filter(lambda t: t.device.type != "meta")),
        oracle_copy,
        examples=60,
        tensor_args=("like",),
    ),
    Target(
        "tensors",
        public("tensors"),
        _optional(
            dims=st.just((1, 2)),
            side=st.just((1, 3)),
            dtype=st.sampled_from([torch.uint8, torch.int8, torch.bool, torch.float16, torch.float64]),
            values=st.just((0, 1)),
            layouts=st.just(("contiguous", "expanded")),
            shape=st.just((2, 2)),
        ),
        oracle_tensors,
        examples=100,
    ),
    Target(
        "shapes", public("shapes"), _optional(dims=st.just((0, 2)), side=st.just((0, 3))), oracle_shapes, examples=60
    ),
    Target(
        "solution_source",
        public("solution_source"),
        _fixed(ex=st.sampled_from(_IDS).map(get_exercise)),
        oracle_solution_source,
        examples=30,
    ),
    Target("get", public("get", EXERCISES), _fixed(exercise_id=st.sampled_from(_IDS)), oracle_get, examples=40),
    Target(
        "exercise_ids",
        public("exercise_ids"),
        _optional(prefix=st.sampled_from(["", "05", "0", "x"])),
        oracle_ids,
        examples=30,
    ),
    Target(
        "show",
        public("show", EXERCISES),
        _fixed(exercise_id=st.sampled_from(_IDS)),
        oracle_none,
        examples=30,
        quiet=True,
    ),
    Target(
        "hint",
        public("hint"),
        _merge(_fixed(exercise_id=st.sampled_from(_IDS)), _optional(n=st.just(1))),
        oracle_none,
        examples=30,
        quiet=True,
    ),
    Target(
        "solution", public("solution"), _fixed(exercise_id=st.sampled_from(_IDS)), oracle_none, examples=30, quiet=True
    ),
    Target("check", public("check"), _check_good, oracle_check, examples=20, tensor_args=("examples",)),
    Target(
        "check_exercise",
        public("check_exercise"),
        st.sampled_from(_IDS).map(
            lambda i: {
                "exercise_id": i,  # answer: what passes where the reference measures
                "learner_fn": _pasted_solution(i),
                "max_examples": 30,  # the fewest check_exercise accepts (its edge cases need them)
            }
        ),
        oracle_check,
        examples=15,
    ),
    Target(
        "check_guess",
        public("check_guess"),
        _fixed(
            guess=st.one_of(st.none(), st.integers(0, 3), st.booleans()),
            actual=st.integers(0, 3),
            why=st.text(max_size=20),
        ),
        oracle_guess,
        examples=40,
        quiet=True,
    ),
    Target(
        "named_rule",
        public("named_rule"),
        _fixed(label=st.text(min_size=1, max_size=10), rule=st.just(lambda args, out: None)),
        oracle_named_rule,
        examples=20,
    ),
    Target(
        "Rules",
        public("Rules"),
        _fixed(
            forbid=st.lists(st.sampled_from(sorted(FAMILIES)), max_size=3, unique=True).map(tuple),
            must_view=st.booleans(),
        ),
        oracle_rules,
        examples=20,
    ),
    Target(
        "register",
        public("register"),
        _fixed(exercise=st.sampled_from([get_exercise(i) for i in _IDS])),
        oracle_register,
        examples=20,
    ),
]


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_fuzz(target: Target) -> None:
    fuzz(target)
