"""The in-process official census over integer codes equals the pandas scorer and the SQL
engine count for count (every policy, cutoffs, single-valued slots, unjudged queries)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from receval.engine import connect
from receval.official import coded as official_coded
from receval.official.census import leave_team_out, official_census
from receval.official.coded import (
    cached_responses,
    leave_team_out_coded,
    per_query_counts,
    trec_eval_rank_codes,
)
from receval.official.responses import per_query_counts_pandas, trec_eval_rank
from receval.official.rules import CS_SCORE_SF_DEFAULT, OfficialPolicy
from receval.official.scores import official_scores
from receval.task import Task


def scored_task(seed: int, *, unjudged: str | None = None) -> Task:
    """Eight systems of three teams; duplicate rows, every label category, single-valued
    slots, a query nobody judged, scores with float32 ties and missing scores."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(8):
        for q in range(7):
            picks = rng.choice(12, size=rng.integers(1, 9), replace=False)
            scores = rng.choice([1.0, 1.00000001, 2.5, 0.5, np.nan, 3.0], size=len(picks))
            rows += [
                (f"S{i}", f"T{i % 3}", f"q{q}", f"a{p}", s)
                for p, s in zip(picks, scores, strict=True)
            ]
            if rng.random() < 0.5:
                rows.append((f"S{i}", f"T{i % 3}", f"q{q}", f"A{picks[0]} ", 1.0))
    runs = pd.DataFrame(rows, columns=["system", "team", "query_id", "answer", "score"])
    runs["score"] = runs["score"].map(lambda s: "" if np.isnan(s) else repr(s))
    pairs = runs[runs["query_id"] != "q6"].drop_duplicates(["query_id", "answer"])
    judged = pairs.sample(frac=0.7, random_state=seed)
    labels = rng.choice(["C", "W", "X", "I"], size=len(judged), p=[0.5, 0.3, 0.1, 0.1])
    judgments = pd.DataFrame(
        {"query_id": judged["query_id"], "answer": judged["answer"], "label": labels}
    )
    slots = ["per:date_of_birth" if q % 2 else "per:title" for q in range(7)]
    queries = pd.DataFrame({"query_id": [f"q{q}" for q in range(7)], "slot": slots})
    config = {"official": {"unjudged": unjudged}} if unjudged else None
    return Task.from_frames(runs=runs, judgments=judgments, queries=queries, config=config)


POLICIES = [
    OfficialPolicy(),
    CS_SCORE_SF_DEFAULT,
    OfficialPolicy(unassessed="wrong"),
    OfficialPolicy(inexact="right", duplicate="right", unassessed="wrong"),
    OfficialPolicy(inexact="ignore", duplicate="wrong"),
]


@pytest.fixture(scope="module")
def duck():
    with connect("duckdb") as engine:
        yield engine


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("cutoff", [None, 2])
def test_per_query_counts_equal_the_pandas_scorer(seed, policy, cutoff):
    task = scored_task(seed)
    pd.testing.assert_frame_equal(
        per_query_counts(task, policy, cutoff), per_query_counts_pandas(task, policy, cutoff)
    )


@pytest.mark.parametrize("seed", range(3))
def test_trec_eval_rank_over_codes(seed):
    task = scored_task(seed)
    np.testing.assert_array_equal(
        trec_eval_rank_codes(task, cached_responses(task)), trec_eval_rank(task.raw_outputs)
    )


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("policy", [None, *POLICIES])
def test_leave_team_out_equals_the_engine(duck, seed, policy):
    task = scored_task(seed, unjudged="wrong" if seed == 2 else None)
    pd.testing.assert_frame_equal(
        leave_team_out_coded(task, policy), leave_team_out(task, duck, policy)
    )


@pytest.mark.parametrize("average", ["micro", "macro"])
def test_scores_are_the_same_in_process_and_in_the_engine(duck, monkeypatch, average):
    task = scored_task(4, unjudged="wrong")
    here = official_scores(task, average=average)
    if average == "micro":
        pd.testing.assert_frame_equal(here, official_census(task, duck), check_dtype=False)
    monkeypatch.setattr(official_coded, "IN_PROCESS_ROWS", 0)  # large: the task's DuckDB
    pd.testing.assert_frame_equal(official_scores(task, average=average), here)


def test_score_counts_a_small_task_without_duckdb(monkeypatch):
    """The default engine of a small fact-matched task is no engine: the census and the
    pooling-bias diagnostic are counted in process; a large one uses the task's DuckDB."""
    from receval.api import score, task_engine
    from receval.official import census

    task = scored_task(5, unjudged="wrong")
    assert task_engine(task, "duckdb") is None
    small = score(task, estimator="official")
    monkeypatch.setattr(official_coded, "IN_PROCESS_ROWS", 0)
    assert task_engine(task, "duckdb") is census.default_engine(task)
    large = score(task, estimator="official")
    pd.testing.assert_frame_equal(small.leaderboard, large.leaderboard)
    pd.testing.assert_frame_equal(small.pooling_bias, large.pooling_bias)


@pytest.mark.parametrize("block", [1, 5, 64])
def test_counting_in_blocks_of_rows_gives_the_same_counts(duck, monkeypatch, block):
    """cell_counts counts the rows a block at a time (bounded temporaries): any block size
    gives the pandas scorer's per-query counts and the engine's leave-one-team-out."""
    monkeypatch.setattr(official_coded, "COUNT_BLOCK_ROWS", block)
    for seed, policy, cutoff in [
        (0, POLICIES[0], None),
        (1, POLICIES[3], 2),
        (2, POLICIES[2], None),
    ]:
        task = scored_task(seed, unjudged="wrong" if seed == 2 else None)
        pd.testing.assert_frame_equal(
            per_query_counts(task, policy, cutoff), per_query_counts_pandas(task, policy, cutoff)
        )
        pd.testing.assert_frame_equal(
            leave_team_out_coded(task, policy), leave_team_out(task, duck, policy)
        )
