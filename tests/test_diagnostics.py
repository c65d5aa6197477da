"""The leave-one-team-out pooling-bias diagnostic: the one-pass shortcut equals re-scoring."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from receval.diagnostics import (
    leave_team_out_one_pass,
    leave_team_out_rescore,
    pooling_bias,
    unique_facts,
)
from receval.official.rules import fact_matched
from receval.official.scores import official_scores
from receval.task import Task, load_task

EMBEDDED = Path(__file__).resolve().parents[1] / "data" / "kbp-sim"


def random_task(seed: int, *, single_valued: bool) -> Task:
    """Eight systems of three teams over a shared candidate set, with duplicate rows, all four
    label categories and (optionally) single-valued slots."""
    rng = np.random.default_rng(seed)
    systems = [f"S{i}" for i in range(8)]
    rows = []
    for i, s in enumerate(systems):
        for q in range(6):
            picks = rng.choice(12, size=rng.integers(1, 8), replace=False)
            rows += [(s, f"T{i % 3}", f"q{q}", f"a{p}") for p in picks]
            if rng.random() < 0.5:  # a duplicate row of the same answer
                rows.append((s, f"T{i % 3}", f"q{q}", f"A{picks[0]} "))
    runs = pd.DataFrame(rows, columns=["system", "team", "query_id", "answer"])
    judged = runs.drop_duplicates(["query_id", "answer"]).sample(frac=0.7, random_state=seed)
    labels = rng.choice(["C", "W", "X", "I"], size=len(judged), p=[0.5, 0.3, 0.1, 0.1])
    judgments = pd.DataFrame(
        {"query_id": judged["query_id"], "answer": judged["answer"], "label": labels}
    )
    slots = ["per:date_of_birth" if single_valued and q % 2 else "per:title" for q in range(6)]
    queries = pd.DataFrame({"query_id": [f"q{q}" for q in range(6)], "slot": slots})
    return Task.from_frames(runs=runs, judgments=judgments, queries=queries)


def assert_one_pass_equals_rescore(task: Task) -> None:
    assert fact_matched(task)
    unique, owner = unique_facts(task)
    base = official_scores(task).set_index("system")
    fast = leave_team_out_one_pass(task, base, unique, owner)
    assert fast is not None
    slow = leave_team_out_rescore(task, unique, owner).loc[fast.index]
    np.testing.assert_allclose(fast.to_numpy(), slow.to_numpy(), rtol=0, atol=1e-15)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("single_valued", [False, True])
def test_one_pass_leave_team_out_equals_rescoring(seed: int, single_valued: bool):
    assert_one_pass_equals_rescore(random_task(seed, single_valued=single_valued))


def test_one_pass_on_the_embedded_task():
    if not EMBEDDED.is_dir():
        pytest.skip("the embedded task data/kbp-sim is absent")
    assert_one_pass_equals_rescore(load_task(EMBEDDED))


def test_equivalence_classes_fall_back_to_rescoring():
    task = random_task(0, single_valued=False)
    judgments = task.judgments.copy()
    judgments["equivalence_class"] = np.where(judgments["category"] == "correct", "q:1", "")
    import dataclasses

    task = dataclasses.replace(task, judgments=judgments)
    assert not fact_matched(task)
    unique, owner = unique_facts(task)
    assert (
        leave_team_out_one_pass(task, official_scores(task).set_index("system"), unique, owner)
        is None
    )
    bias = pooling_bias(task)
    assert list(bias["team"]) == ["T0", "T1", "T2"]
    assert bias["official_f1_lto"].notna().all()


def test_unique_facts_counts_per_team():
    runs = pd.DataFrame(
        {
            "system": ["A", "A", "B", "C", "C"],
            "team": ["X", "X", "X", "Y", "Y"],
            "query_id": ["q", "q", "q", "q", "q"],
            "answer": ["a", "b", "a", "b", "c"],
        }
    )
    task = Task.from_frames(runs=runs)
    unique, owner = unique_facts(task)
    # facts a, b, c: a only team X (two systems), b both teams, c only Y
    assert unique.tolist() == [True, False, True]
    assert [owner[0], owner[2]] == ["X", "Y"]
    bias = pooling_bias(task)
    assert bias.set_index("team")["unique_facts"].to_dict() == {"X": 1, "Y": 1}


@pytest.mark.parametrize("chunk", [7, 1 << 22])
def test_per_query_counts_in_chunks_equal_a_groupby(monkeypatch, chunk):
    from receval import diagnostics

    rng = np.random.default_rng(5)
    n = 500
    frame = pd.DataFrame(
        {
            "query_id": pd.Categorical(rng.choice(["q1", "q2", "q3", "q4"], n)),
            "system": pd.Categorical(rng.choice(["A", "B", "C"], n, p=[0.7, 0.29, 0.01])),
        }
    )
    monkeypatch.setattr(diagnostics, "CHUNK_ROWS", chunk)
    outputs, systems = diagnostics._outputs_and_systems_per_query(frame)
    by = frame.groupby("query_id", observed=True)
    assert outputs.to_dict() == by.size().to_dict()
    assert systems.to_dict() == by["system"].nunique().to_dict()
