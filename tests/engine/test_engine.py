"""The engine aggregations: DuckDB equals the pandas scorer; Spark (local mode) equals DuckDB."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import SPARK_MISSING, needs_spark

from receval.cli import cli
from receval.diagnostics import leave_team_out_rescore, pooling_bias, unique_facts
from receval.engine import connect, items_at_ranks, write_ranked_list
from receval.official.census import leave_team_out, official_census
from receval.official.rules import CS_SCORE_SF_DEFAULT, OfficialPolicy, fact_matched
from receval.official.scores import official_scores
from receval.task import Task, load_task

EMBEDDED = Path(__file__).resolve().parents[2] / "data" / "kbp-sim"


def random_task(seed: int, *, single_valued: bool = True) -> Task:
    """Eight systems of three teams, duplicate rows, all label categories, single-valued slots."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(8):
        for q in range(6):
            picks = rng.choice(12, size=rng.integers(1, 8), replace=False)
            rows += [(f"S{i}", f"T{i % 3}", f"q{q}", f"a{p}") for p in picks]
            if rng.random() < 0.5:
                rows.append((f"S{i}", f"T{i % 3}", f"q{q}", f"A{picks[0]} "))
    runs = pd.DataFrame(rows, columns=["system", "team", "query_id", "answer"])
    judged = runs.drop_duplicates(["query_id", "answer"]).sample(frac=0.7, random_state=seed)
    labels = rng.choice(["C", "W", "X", "I"], size=len(judged), p=[0.5, 0.3, 0.1, 0.1])
    judgments = pd.DataFrame(
        {"query_id": judged["query_id"], "answer": judged["answer"], "label": labels}
    )
    slots = ["per:date_of_birth" if single_valued and q % 2 else "per:title" for q in range(6)]
    queries = pd.DataFrame({"query_id": [f"q{q}" for q in range(6)], "slot": slots})
    return Task.from_frames(runs=runs, judgments=judgments, queries=queries)


@pytest.fixture(scope="module")
def duck():
    with connect("duckdb") as engine:
        yield engine


@pytest.fixture(scope="module")
def spark():
    if SPARK_MISSING:
        pytest.skip(SPARK_MISSING)
    engine = connect("spark", master="local[1]")
    yield engine


@pytest.fixture(scope="module")
def embedded() -> Task:
    if not EMBEDDED.is_dir():
        pytest.skip("the embedded task data/kbp-sim is absent")
    return load_task(EMBEDDED)


POLICIES = [
    None,
    CS_SCORE_SF_DEFAULT,
    OfficialPolicy(inexact="right", duplicate="right", unassessed="wrong"),
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("policy", POLICIES)
def test_duckdb_census_equals_the_pandas_scorer(duck, seed, policy):
    task = random_task(seed)
    expected = official_scores(task, policy or OfficialPolicy())
    got = official_census(task, duck, policy)
    # the engine's census is the micro census; `queries` (answered queries, for macro averages)
    # is the pandas scorer's alone
    pd.testing.assert_frame_equal(got, expected[got.columns], check_dtype=False)


def test_duckdb_census_on_the_embedded_task(duck, embedded):
    assert fact_matched(embedded)
    got = official_census(embedded, duck)
    pd.testing.assert_frame_equal(got, official_scores(embedded)[got.columns], check_dtype=False)


@pytest.mark.parametrize("seed", range(4))
def test_duckdb_leave_team_out_equals_rescoring(duck, seed):
    task = random_task(seed)
    unique, owner = unique_facts(task)
    slow = leave_team_out_rescore(task, unique, owner)
    fast = leave_team_out(task, duck)[["precision", "recall", "f1"]]
    np.testing.assert_allclose(fast.to_numpy(), slow.loc[fast.index].to_numpy(), atol=1e-15)


def test_pooling_bias_is_the_same_with_and_without_an_engine(duck, embedded):
    pd.testing.assert_frame_equal(pooling_bias(embedded, engine=duck), pooling_bias(embedded))


def test_a_given_engine_counts_both_the_census_and_the_diagnostic(embedded):
    """score(engine=...) runs the official census and the leave-one-team-out diagnostic in the
    engine given (one registration), then leaves the task's own engine as it was."""
    from receval.api import score
    from receval.engine.base import DuckDBEngine
    from receval.official.sql import LEAVE_TEAM_OUT_COUNTS, OFFICIAL_COUNTS
    from receval.scoring import ScoreOptions

    class Spy(DuckDBEngine):
        def __init__(self):
            super().__init__()
            self.sql: list[str] = []

        def query(self, sql):
            self.sql.append(sql)
            return super().query(sql)

    spy = Spy()
    task = random_task(7, single_valued=False)
    before = task.__dict__.get("_default_engine")
    score(task, ScoreOptions(estimator="official"), engine=spy)
    # the census alone asks which queries are judged; leave-one-team-out alone counts teams
    assert "judged_query" in OFFICIAL_COUNTS and "judged_query" not in LEAVE_TEAM_OUT_COUNTS
    assert "fact_teams AS" in LEAVE_TEAM_OUT_COUNTS and "fact_teams" not in OFFICIAL_COUNTS
    assert any("judged_query" in q for q in spy.sql)
    assert any("fact_teams AS" in q and "COUNT(*) AS outputs" in q for q in spy.sql)
    assert task.__dict__.get("_default_engine") is before


def test_census_refuses_bundles_with_equivalence_classes(duck):
    import dataclasses

    task = random_task(0)
    judgments = task.judgments.assign(equivalence_class="q1:1")
    with pytest.raises(ValueError, match="fact-matched"):
        official_census(dataclasses.replace(task, judgments=judgments), duck)


def ranked_list(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    # scores with ties (rounded), broken by the unique id
    return pd.DataFrame({"id": np.arange(n), "score": np.round(rng.random(n), 2)})


def expected_at(items: pd.DataFrame, ranks) -> np.ndarray:
    order = np.lexsort((items["id"].to_numpy(), -items["score"].to_numpy()))
    ranks = np.unique(ranks)
    ranks = ranks[ranks <= len(items)]
    return items["id"].to_numpy()[order[ranks - 1]]


def test_items_at_ranks_from_a_frame_and_an_unsorted_parquet_file(duck, tmp_path):
    items = ranked_list(5000, 1)
    ranks = [1, 2, 17, 17, 4999, 5000, 7000]
    got = items_at_ranks(items, ranks, duck, tiebreak=("id",))
    assert got["rank"].tolist() == [1, 2, 17, 4999, 5000]
    np.testing.assert_array_equal(got["id"], expected_at(items, np.array(ranks)))
    path = tmp_path / "list.parquet"
    items.to_parquet(path, index=False)
    from_file = items_at_ranks(path, ranks, duck, tiebreak=("id",))
    pd.testing.assert_frame_equal(from_file, got, check_dtype=False)
    with pytest.raises(ValueError, match="1-based"):
        items_at_ranks(items, [0], duck)
    # sorted once, then read by rank
    ranked = write_ranked_list(path, tmp_path / "ranked.parquet", duck, tiebreak=("id",))
    again = items_at_ranks(ranked, ranks, duck, ranked=True)
    pd.testing.assert_frame_equal(again, got, check_dtype=False)


@needs_spark
@pytest.mark.slow  # Spark in local mode starts a JVM: minutes on two cores
def test_spark_equals_duckdb(spark, duck, embedded, tmp_path):
    for task in (embedded, random_task(3)):
        pd.testing.assert_frame_equal(official_census(task, spark), official_census(task, duck))
        pd.testing.assert_frame_equal(leave_team_out(task, spark), leave_team_out(task, duck))
    items = ranked_list(2000, 2)
    path = tmp_path / "list.parquet"
    items.to_parquet(path, index=False)
    ranks = [1, 5, 100, 1999, 2000, 2500]
    expected = items_at_ranks(path, ranks, duck, tiebreak=("id",))
    got = items_at_ranks(path, ranks, spark, tiebreak=("id",))
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    ranked = write_ranked_list(path, tmp_path / "spark-ranked", spark, tiebreak=("id",))
    got = items_at_ranks(ranked, ranks, spark, ranked=True)
    pd.testing.assert_frame_equal(got[expected.columns], expected, check_dtype=False)


@needs_spark
@pytest.mark.slow  # Spark in local mode starts a JVM: minutes on two cores
def test_score_with_spark_and_duckdb_gives_identical_outputs(embedded, tmp_path):
    runner = CliRunner()
    outs = {}
    for engine in ("duckdb", "spark"):
        out = tmp_path / engine
        args = ["score", str(EMBEDDED), "--estimator", "official", "--out", str(out), "--quiet"]
        args += ["--engine", engine] + (["--spark-master", "local[1]"] if engine == "spark" else [])
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        outs[engine] = out
    for name in ("leaderboard.csv", "pooling_bias.csv", "per_query.csv"):
        assert (outs["duckdb"] / name).read_text() == (outs["spark"] / name).read_text(), name


def test_create_table_replaces_a_table_or_a_view_of_that_name():
    """DuckDB's ``DROP VIEW IF EXISTS`` of a table is an error: ``create_table`` replaces a
    table, a view or a registered frame of the same name alike."""
    from receval.engine.base import connect

    engine = connect("duckdb")
    try:
        engine.create_table("t", "SELECT 1 AS x")
        engine.create_table("t", "SELECT 2 AS x")  # over a table
        engine.con.execute("DROP TABLE t")
        engine.con.execute("CREATE VIEW t AS SELECT 3 AS x")
        engine.create_table("t", "SELECT 4 AS x")  # over a view
        assert engine.query("SELECT x FROM t")["x"].tolist() == [4]
    finally:
        engine.close()
