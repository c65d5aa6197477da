"""The engine's uniform draws (receval.engine.draws) are the documented function of (seed,
round, system) and the system's facts: the k-th fact in (query, last character, answer) order,
computed here in Python from the loaded runs, on every Parquet layout and (slow) on Spark."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_spark

from receval.bundle import Bundle
from receval.config import Matching
from receval.engine.sampled import draw_uniform, sample_round
from receval.task import normalize_answers

#: answers whose normal forms collide (case, full case folding, whitespace), non-ASCII last
#: characters, duplicates within a run, and plain ASCII ones (normalised by ``lower`` alone)
MESSY = [
    "Doc 1",
    "DOC 1",
    "doc  1",
    "Straße",
    "STRASSE",
    "café",
    "CAFÉ",
    "a\tb",
    "A b",
    "ﬁsh",
    "fish",
    "ΣΑΣ",
    "σας",
    "x\u2003y",
    "zeta",
    "Zeta ",
    "q-9",
    "q-10",
    "ǅ",
]


def messy_runs(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for system in ("A", "B", "C"):
        for q in ("q1", "q10", "q2", "é"):
            picked = rng.choice(len(MESSY), size=9 + int(rng.integers(0, 6)), replace=True)
            rows += [(system, q, MESSY[i]) for i in picked]
    return pd.DataFrame(rows, columns=["system", "query_id", "answer"])


def write(root: Path, runs: pd.DataFrame, layout: str) -> Bundle:
    root.mkdir(parents=True)
    queries = sorted(set(runs["query_id"]))
    pd.DataFrame({"query_id": queries}).to_csv(root / "queries.tsv", sep="\t", index=False)
    if layout == "parquet":
        runs.to_parquet(root / "runs.parquet", index=False)
    elif layout == "dataset":
        (root / "runs.parquet").mkdir()
        shuffled = runs.sample(frac=1, random_state=2)
        for i in range(3):
            shuffled.iloc[i::3].to_parquet(root / "runs.parquet" / f"part-{i}.parquet", index=False)
    else:  # runs/system=<name>/ partitions
        for system, rows in runs.groupby("system"):
            folder = root / "runs" / f"system={system}"
            folder.mkdir(parents=True)
            rows.drop(columns="system").to_parquet(folder / "part-0.parquet", index=False)
    return Bundle(root)


def reference_round(runs: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """The module docstring's draws, in Python: ``system, draw, query_id, answer, prob``."""
    frame = runs.assign(raw=runs["answer"].str.strip(" "))
    frame["fact"] = normalize_answers(frame["raw"], Matching()).astype(str)
    rows = []
    for system, own in frame.groupby("system"):
        spelling = own.groupby(["query_id", "fact"])["raw"].min()
        facts = sorted(spelling.index, key=lambda x: (x[0], x[1][-1:], x[1]))
        u = draw_uniform(seed, 1, str(system), n)
        for d, k in enumerate(np.minimum(np.floor(u * len(facts)), len(facts) - 1).astype(int)):
            query, fact = facts[k]
            rows.append((system, d + 1, query, spelling[(query, fact)], 1.0 / len(facts)))
    return pd.DataFrame(rows, columns=["system", "draw", "query_id", "answer", "prob"])


@pytest.mark.parametrize("layout", ["parquet", "dataset", "partitioned"])
def test_engine_draws_are_the_documented_function_of_the_facts(tmp_path, layout):
    """Messy answers (case, ß, ligatures, tabs, non-ASCII last characters, duplicates): the
    engine draws the k-th fact of the documented order with the system's first spelling, and
    to_annotate counts the systems that output each drawn fact."""
    runs = messy_runs()
    drawn = sample_round(write(tmp_path / layout, runs, layout), 25, seed=11)
    got = drawn.samples.sort_values(["system", "draw"], ignore_index=True)
    want = reference_round(runs, 25, seed=11)
    pd.testing.assert_frame_equal(
        got[["system", "draw", "query_id", "answer", "prob"]], want, check_dtype=False
    )
    norm = normalize_answers(runs["answer"].str.strip(" "), Matching()).astype(str)
    owners = runs.assign(fact=norm).groupby(["query_id", "fact"])["system"].nunique()
    todo = drawn.to_annotate
    facts = normalize_answers(todo["answer"], Matching()).astype(str)
    expected = [owners[(q, f)] for q, f in zip(todo["query_id"], facts, strict=True)]
    assert todo["systems"].tolist() == expected
    drawn_facts = zip(want["query_id"], normalize_answers(want["answer"], Matching()), strict=True)
    assert len(todo) == len(set(drawn_facts))


def test_every_fact_is_drawn_equally_often():
    """k = ⌊u·N⌋ over the cells' ranks reaches every fact with probability 1/N: 6,000 draws
    from one run of 24 distinct facts (60 rows, duplicates and case variants), each fact's
    count within 5 binomial SDs of 250."""
    import tempfile

    runs = messy_runs(3)
    runs = runs[runs["system"] == "A"]
    with tempfile.TemporaryDirectory() as tmp:
        drawn = sample_round(write(Path(tmp) / "b", runs, "parquet"), 6000, seed=5)
    facts = normalize_answers(drawn.samples["answer"], Matching()).astype(str)
    counts = pd.Series(list(zip(drawn.samples["query_id"], facts, strict=True))).value_counts()
    norm = normalize_answers(runs["answer"].str.strip(" "), Matching())
    n = len(set(zip(runs["query_id"], norm, strict=True)))
    assert len(counts) == n
    mean, sd = 6000 / n, np.sqrt(6000 * (1 / n) * (1 - 1 / n))
    assert (np.abs(counts.to_numpy() - mean) < 5 * sd).all()
    np.testing.assert_allclose(drawn.samples["prob"], 1 / n)


@pytest.mark.slow
@needs_spark
def test_spark_draws_the_messy_facts_duckdb_draws(tmp_path, monkeypatch):
    """The same SQL texts in Spark: the same draws and facts to annotate, messy answers."""
    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    bundle = write(tmp_path / "b", messy_runs(), "partitioned")
    duck = sample_round(bundle, 25, seed=11)
    spark = sample_round(bundle, 25, seed=11, engine="spark")
    pd.testing.assert_frame_equal(spark.samples, duck.samples)
    pd.testing.assert_frame_equal(spark.to_annotate, duck.to_annotate)


def test_draws_in_batches_of_run_files_are_the_same(tmp_path, monkeypatch):
    """One run file per batch (each aggregation one query per system): the round of one query
    over every run file, to_annotate's system counts included."""
    import receval.engine.sampled as sampled

    runs = messy_runs(seed=4)
    bundle = write(tmp_path / "b", runs, "partitioned")
    whole = sample_round(bundle, 25, seed=3)
    monkeypatch.setattr(sampled, "BATCH_FILES", 1)
    batched = sample_round(bundle, 25, seed=3)
    pd.testing.assert_frame_equal(batched.samples, whole.samples)
    pd.testing.assert_frame_equal(batched.to_annotate, whole.to_annotate)


def test_run_batches_cut_by_files_and_rows(tmp_path, monkeypatch):
    """Batches keep the systems' order, hold at most BATCH_FILES files and BATCH_ROWS rows
    (a larger system alone); a single runs table or a dataset is one query (None)."""
    import receval.engine.sampled as sampled
    from receval.engine.base import connect

    sizes = {"A": 5, "B": 2, "C": 2, "D": 9, "E": 1}
    runs = pd.DataFrame(
        [(s, "q1", f"d{i}") for s, n in sizes.items() for i in range(n)],
        columns=["system", "query_id", "answer"],
    )
    bundle = write(tmp_path / "b", runs, "partitioned")
    monkeypatch.setattr(sampled, "BATCH_ROWS", 5)
    monkeypatch.setattr(sampled, "BATCH_FILES", 2)
    with connect("duckdb") as con:
        got = sampled.run_batches(con, bundle.parquet_runs())
        single = write(tmp_path / "one", runs, "parquet")
        assert sampled.run_batches(con, single.parquet_runs()) is None
    assert got == [["A"], ["B", "C"], ["D"], ["E"]]
