"""Notebook 03 (teaching pass): the write and follow-up rules its exercises teach."""

from __future__ import annotations

import torch

from viewlab.course import exercises as ex
from viewlab.course.exercises.bank import nb03_expand


def test_predicted_write_outcome_matches_torch_on_every_listed_write():
    for write in nb03_expand._WRITES:
        assert nb03_expand._predicted_write(write) == nb03_expand._measured_write(write), write


def test_writes_cover_both_outcomes_for_one_value_and_for_fill():
    outcome = {w: nb03_expand._measured_write(w) for w in nb03_expand._WRITES}
    # one value written, yet refused (a column is four indices on one element) or allowed (a row is distinct)
    assert outcome["e[:, 1] = 5"] == "raises" and outcome["e[0] = 5"] == "goes through"
    # fill_ with a Python number skips the overlap check, fill_ with a tensor keeps it
    assert outcome["e.fill_(7)"] == "goes through" and outcome["e.fill_(torch.tensor(7.0))"] == "raises"


def test_the_rule_by_values_fails_the_exercise():
    def by_values(write: str) -> str:  # the old wording: refused only when different values would be written
        return "raises" if ("add_" in write or "mul_" in write or "+=" in write) else "goes through"

    assert not ex.check_exercise("03-writes-into-expand", by_values).passed
    # the bank's own answer is refused by check_exercise (write your own); _check_answer checks it as such
    assert ex._check_answer(ex.get("03-writes-into-expand"), nb03_expand._predicted_write).passed


def test_scalar_fill_skips_the_check_where_indexed_assignment_of_the_same_number_raises():
    base = torch.zeros(3, 1)
    base.expand(3, 4)[0].fill_(7)
    assert base.flatten().tolist() == [7.0, 0.0, 0.0]
    try:
        base.expand(3, 4)[0] = 5
    except RuntimeError as err:
        assert "single memory location" in str(err)
    else:
        raise AssertionError("e[0] = 5 on a stride-0 row went through; notebook 03 section 5 says it raises")


def test_the_follow_up_rule_the_exercise_teaches_matches_measure_at_every_size():
    # every follow-up at every size the generator draws (0 to 4 rows and columns): the bank's rule, measured
    for R in range(5):
        for C in range(5):
            for follow_up in nb03_expand._FOLLOW_UPS:
                predicted = nb03_expand._predicted_follow_up(R, C, follow_up)
                assert predicted == nb03_expand._measured_follow_up(R, C, follow_up), (R, C, follow_up)
    assert ex._check_answer(ex.get("03-follow-up-bytes"), nb03_expand._predicted_follow_up).passed
