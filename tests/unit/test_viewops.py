import pytest
import torch

from viewlab import OP_CASES, observe, view_op_table
from viewlab.viewops import OFFICIAL_VIEW_OPS  # the docs page's list: a submodule attribute, not on the face


def test_every_official_view_op_has_a_runnable_case():
    covered = {c.op for c in OP_CASES if c.documented == "view"}
    assert covered == set(OFFICIAL_VIEW_OPS)


@pytest.mark.parametrize("name", [n for n in OFFICIAL_VIEW_OPS if n != "basic indexing"])
def test_official_names_exist_in_this_torch(name):
    assert hasattr(torch.Tensor, name) or hasattr(torch, name), f"{name} is not in torch {torch.__version__}"


@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: f"{c.op}:{c.input}")
def test_documented_behaviour_holds(case):
    seen = observe(case)
    if case.documented == "view":
        assert seen == "view"
    elif case.documented == "copy":
        assert seen == "copy"
    elif case.documented == "view or copy":
        assert seen in ("view", "copy")
    else:
        assert case.documented == "self or copy"
        assert seen in ("same tensor", "copy")  # never a new view


def test_input_dependent_ops_show_both_outcomes():
    outcomes: dict[tuple[str, str], set[str]] = {}
    for case in OP_CASES:
        if case.documented in ("view or copy", "self or copy"):
            outcomes.setdefault((case.documented, case.op), set()).add(observe(case))
    assert outcomes == {
        ("view or copy", "reshape"): {"view", "copy"},
        ("view or copy", "reshape_as"): {"view", "copy"},
        ("view or copy", "flatten"): {"view", "copy"},
        ("self or copy", "contiguous"): {"same tensor", "copy"},
        ("self or copy", "to"): {"same tensor", "copy"},
    }


def test_writes_through_a_view_reach_the_base():
    for case in OP_CASES:
        if case.documented != "view" or case.op in ("indices", "values", "expand", "expand_as", "unfold"):
            continue  # sparse has no dense base; expanded/unfolded views overlap and refuse writes
        x = case.make_input()
        result = case.apply(x)
        first = result[0] if isinstance(result, (tuple, list)) else result
        before = x.clone()
        with torch.no_grad():
            first.zero_() if not first.is_conj() else first.conj().zero_()
        assert not torch.equal(before, x), f"{case.code} did not write through"


def test_table_renders_and_filters():
    table = view_op_table("self or copy")
    assert {r[3] for r in table.rows} == {"self or copy"}
    assert {r[4] for r in table.rows} == {"same tensor", "copy"}
    assert "observed" in str(table) and "<table>" in table._repr_html_()
    with pytest.raises(ValueError, match=r"view_op_table\(\): `documented` must be one of"):
        view_op_table("sometimes")


def test_observe_takes_an_op_name_regression():
    from viewlab import observe

    assert observe("expand") == observe(next(c for c in OP_CASES if c.op == "expand")) == "view"
    assert observe("clone") == "copy"
    with pytest.raises(ValueError, match=r"observe\(\): op 'reshape' has 2 cases"):
        observe("reshape")  # contiguous input: view; transposed input: copy
    with pytest.raises(ValueError, match=r"no case for op 'expnd'.*Did you mean 'expand'"):
        observe("expnd")
    with pytest.raises(TypeError, match=r"observe\(\): `case` must be an OpCase"):
        observe(None)


def test_view_op_table_rejects_an_array_for_documented():
    import numpy as np

    from viewlab import view_op_table

    # found by the fuzz suite: used to fail with numpy's "truth value of an array ... is ambiguous"
    with pytest.raises(
        ValueError,
        match=r"view_op_table\(\): `documented` must be one of 'view', 'copy', 'view or copy', 'self or copy'",
    ):
        view_op_table(np.array(["view"]))
