"""Merging annotator votes into one label per fact: rules, tie policies, conflicts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from receval.config import MERGE_RULES, TIE_POLICIES
from receval.merge import CONFLICT_COLUMNS, merge_labels

C, W, I = 1.0, 0.0, float("nan")  # noqa: E741 - correct, wrong, ignored


def votes(
    spec: dict[int, list[float]], classes: dict[int, list[str]] | None = None
) -> pd.DataFrame:
    """A judgments frame: fact id -> list of vote values (and optional equivalence classes)."""
    rows = []
    for fact, values in spec.items():
        names = (classes or {}).get(fact, [""] * len(values))
        for value, cls in zip(values, names, strict=True):
            rows.append(
                {
                    "fact": fact,
                    "query_id": f"q{fact}",
                    "answer": f"a{fact}",
                    "value": value,
                    "equivalence_class": cls,
                }
            )
    return pd.DataFrame(rows)


def label_of(result, fact: int) -> float | None:
    return float(result.labels[fact]) if fact in result.labels.index else None


def kinds(result) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for fact, kind in zip(result.conflicts["fact"], result.conflicts["kind"], strict=True):
        out.setdefault(int(fact), []).append(kind)
    return out


# --------------------------------------------------------------------------------------------
# the rules, fact by fact

SPEC = {
    0: [C],  # one vote
    1: [C, C, W],  # majority correct, a disagreement
    2: [W, W, C],  # majority wrong, a disagreement
    3: [C, W],  # a tie
    4: [C, W, I, I],  # a tie; ignored votes do not count
    5: [I, I],  # every vote ignored
    6: [W],
    7: [C, C, C],
    8: [C, I],  # one usable vote: not a conflict
}

EXPECTED = {
    # rule: fact -> label (None: no label)
    "majority": {0: 1, 1: 1, 2: 0, 6: 0, 7: 1, 8: 1, 5: None},
    "any-correct": {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 6: 0, 7: 1, 8: 1, 5: None},
    "unanimous": {0: 1, 1: 0, 2: 0, 3: 0, 4: 0, 6: 0, 7: 1, 8: 1, 5: None},
}
TIES = {"half": 0.5, "wrong": 0.0, "correct": 1.0, "unjudged": None}


@pytest.mark.parametrize("tie", TIE_POLICIES)
@pytest.mark.parametrize("rule", MERGE_RULES)
def test_every_rule_and_tie_policy(rule: str, tie: str):
    result = merge_labels(votes(SPEC), rule, tie)
    expected = dict(EXPECTED[rule])
    if rule == "majority":
        expected[3] = expected[4] = TIES[tie]
    for fact, want in expected.items():
        assert label_of(result, fact) == want, (rule, tie, fact)
    assert set(result.labels.unique()) <= {0.0, 0.5, 1.0}
    # conflicts: ties (majority) or disagreements, and the all-ignored fact; never fact 8
    got = kinds(result)
    if rule == "majority":
        assert got == {
            1: ["disagreement"],
            2: ["disagreement"],
            3: ["tie"],
            4: ["tie"],
            5: ["all-ignored"],
        }
    else:
        assert got == {fact: ["disagreement"] for fact in (1, 2, 3, 4)} | {5: ["all-ignored"]}


def test_conflict_rows_say_votes_and_decision():
    result = merge_labels(votes(SPEC), "majority", "unjudged")
    assert list(result.conflicts.columns) == CONFLICT_COLUMNS
    table = result.conflicts.set_index("fact")
    assert table.loc[4, "votes"] == "correct=1 wrong=1 ignored=2"
    assert table.loc[4, "decision"] == "unjudged"
    assert table.loc[1, "decision"] == "correct"
    assert table.loc[2, "decision"] == "wrong"
    assert table.loc[5, "decision"] == "unjudged"
    assert table.loc[3, "query_id"] == "q3" and table.loc[3, "answer"] == "a3"
    half = merge_labels(votes(SPEC), "majority", "half").conflicts.set_index("fact")
    assert half.loc[3, "decision"] == "half (tie)"


def test_nothing_is_dropped_silently():
    """Every annotated fact either has a label or is listed in the conflicts table."""
    for rule in MERGE_RULES:
        for tie in TIE_POLICIES:
            result = merge_labels(votes(SPEC), rule, tie)
            listed = set(result.conflicts["fact"])
            for fact in SPEC:
                assert fact in result.labels.index or fact in listed, (rule, tie, fact)


def test_vote_table():
    result = merge_labels(votes(SPEC))
    table = result.votes.set_index("fact")
    assert table.loc[4, ["correct", "wrong", "ignored"]].tolist() == [1, 1, 2]
    assert table.loc[7, ["correct", "wrong", "ignored"]].tolist() == [3, 0, 0]
    assert len(table) == len(SPEC)
    assert math.isnan(table.loc[5, "decision"])


def test_matches_a_direct_count_on_random_votes():
    """Vectorised merging equals counting each fact's votes one by one (fixed seed)."""
    rng = np.random.default_rng(20240611)
    spec = {}
    for fact in range(400):
        n = int(rng.integers(1, 6))
        spec[fact] = rng.choice([C, W, I], size=n, p=[0.45, 0.4, 0.15]).tolist()
    frame = votes(spec).sample(frac=1.0, random_state=7)  # order must not matter
    for rule in MERGE_RULES:
        for tie in TIE_POLICIES:
            result = merge_labels(frame, rule, tie)
            conflicted = set(result.conflicts["fact"])
            for fact, values in spec.items():
                c = sum(v == 1.0 for v in values)
                w = sum(v == 0.0 for v in values)
                if c + w == 0:
                    want = None
                elif rule == "majority":
                    want = 1.0 if c > w else 0.0 if w > c else TIES[tie]
                elif rule == "any-correct":
                    want = 1.0 if c > 0 else 0.0
                else:
                    want = 1.0 if w == 0 else 0.0
                assert label_of(result, fact) == want, (rule, tie, fact, values)
                assert (fact in conflicted) == ((c > 0 and w > 0) or c + w == 0), (rule, tie, fact)


# --------------------------------------------------------------------------------------------
# equivalence classes


def test_equivalence_class_conflicts():
    frame = votes(
        {0: [C, C], 1: [C, C], 2: [W, C, W], 3: [C, W]},
        classes={
            0: ["q0:1", "q0:1"],
            1: ["q1:2", "q1:1"],
            2: ["0", "q2:5", ""],
            3: ["q3:1", "q3:2"],
        },
    )
    result = merge_labels(frame)
    got = kinds(result)
    assert got[1] == ["equivalence-class"]
    assert 0 not in got  # the same class twice is agreement
    assert got[2] == ["disagreement"]  # "0" and "" name no class (TAC writes 0 for wrong)
    assert sorted(got[3]) == ["equivalence-class", "tie"]  # both problems listed
    table = result.conflicts[result.conflicts["kind"] == "equivalence-class"].set_index("fact")
    assert table.loc[1, "votes"] == "classes=q1:1,q1:2"
    assert table.loc[1, "decision"].startswith("class q1:1")
    assert result.equivalence_class.to_dict() == {0: "q0:1", 1: "q1:1", 2: "q2:5", 3: "q3:1"}
    assert label_of(result, 1) == 1.0  # a class conflict does not change the label


def test_equivalence_class_column_is_optional():
    frame = votes({0: [C, W, W]}).drop(columns=["equivalence_class"])
    result = merge_labels(frame)
    assert label_of(result, 0) == 0.0
    assert result.equivalence_class.to_dict() == {0: ""}


# --------------------------------------------------------------------------------------------
# edges


def test_empty_judgments():
    empty = pd.DataFrame(columns=["fact", "query_id", "answer", "value", "equivalence_class"])
    result = merge_labels(empty)
    assert result.labels.empty and result.conflicts.empty and result.votes.empty
    assert list(result.conflicts.columns) == CONFLICT_COLUMNS
    assert result.labels.dtype == float


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [({"rule": "plurality"}, "merge rule"), ({"tie": "coin"}, "tie policy")],
)
def test_unknown_rule_or_tie(kwargs, words):
    with pytest.raises(ValueError, match=words):
        merge_labels(votes({0: [C]}), **kwargs)


def test_values_other_than_votes_are_refused():
    with pytest.raises(ValueError, match=r"0\.5"):
        merge_labels(votes({0: [C, 0.5]}))


def test_result_is_frozen():
    result = merge_labels(votes({0: [C]}))
    with pytest.raises(AttributeError):
        result.labels = pd.Series([], dtype=float)  # type: ignore[misc]


def test_one_vote_per_annotator_and_fact():
    # ann1 says correct twice (a pasted duplicate), ann2 wrong once: a 1:1 tie, not 2:1 correct
    frame = votes({0: [C, C, W], 1: [W, C]})
    frame["annotator"] = ["ann1", "ann1", "ann2", "ann3", "ann3"]
    result = merge_labels(frame, "majority", "half")
    assert label_of(result, 0) == 0.5
    # ann3 corrected itself: the last row is its vote
    assert label_of(result, 1) == 1.0
    dup = result.conflicts[result.conflicts["kind"] == "duplicate-vote"]
    assert sorted(dup["fact"]) == [0, 1]
    assert dup.set_index("fact").loc[0, "votes"] == "annotator=ann1 rows=2 values=correct,correct"
    # rows without an annotator name stay separate votes
    anonymous = votes({0: [C, C, W]})
    anonymous["annotator"] = ["", "", "ann2"]
    assert label_of(merge_labels(anonymous, "majority", "half"), 0) == 1.0
