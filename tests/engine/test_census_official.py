"""``official_scores`` counts fact-matched bundles with the engine's census: it must equal the
response-by-response pandas scorer column for column, ``queries`` included, under every policy
and with queries nobody judged (ignored whatever the policy, as trec_eval skips them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from receval.official.rules import CS_SCORE_SF_DEFAULT, OfficialPolicy, fact_matched
from receval.official.scores import official_scores, official_scores_pandas
from receval.task import Task, load_task

EMBEDDED = Path(__file__).resolve().parents[2] / "data" / "kbp-sim"

POLICIES = [
    None,
    CS_SCORE_SF_DEFAULT,
    OfficialPolicy(inexact="right", duplicate="right", unassessed="wrong"),
    OfficialPolicy(unassessed="wrong"),
]


def task_with_unjudged_queries(seed: int) -> Task:
    """Six systems of three teams, duplicates, every label category; q4 and q5 have no
    judgment at all, q1 is single-valued."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(6):
        for q in range(6):
            picks = rng.choice(10, size=rng.integers(1, 6), replace=False)
            rows += [(f"S{i}", f"T{i % 3}", f"q{q}", f"a{p}") for p in picks]
            if rng.random() < 0.5:
                rows.append((f"S{i}", f"T{i % 3}", f"q{q}", f" A{picks[0]}"))
    runs = pd.DataFrame(rows, columns=["system", "team", "query_id", "answer"])
    facts = runs.drop_duplicates(["query_id", "answer"])
    judged = facts[~facts["query_id"].isin(["q4", "q5"])].sample(frac=0.6, random_state=seed)
    labels = rng.choice(["C", "W", "X", "I"], size=len(judged), p=[0.5, 0.3, 0.1, 0.1])
    judgments = pd.DataFrame(
        {"query_id": judged["query_id"], "answer": judged["answer"], "label": labels}
    )
    slots = ["per:date_of_birth" if q == 1 else "per:title" for q in range(6)]
    queries = pd.DataFrame({"query_id": [f"q{q}" for q in range(6)], "slot": slots})
    return Task.from_frames(runs=runs, judgments=judgments, queries=queries)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("policy", POLICIES)
def test_census_equals_the_pandas_scorer(seed, policy):
    task = task_with_unjudged_queries(seed)
    assert fact_matched(task)
    policy = policy or OfficialPolicy()
    got = official_scores(task, policy)
    expected = official_scores_pandas(task, policy)
    assert list(got.columns) == list(expected.columns)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    assert (got["queries"] <= 4).all()  # q4 and q5 are never evaluated


def test_census_equals_the_pandas_scorer_on_the_embedded_task():
    if not EMBEDDED.is_dir():
        pytest.skip("the embedded task data/kbp-sim is absent")
    task = load_task(EMBEDDED)
    for policy in POLICIES:
        policy = policy or OfficialPolicy()
        pd.testing.assert_frame_equal(
            official_scores(task, policy), official_scores_pandas(task, policy), check_dtype=False
        )
