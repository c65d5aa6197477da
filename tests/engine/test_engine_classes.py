"""``score`` on the engine path with equivalence classes in the judgments, a ``truth.tsv`` and
non-uniform rounds: the in-memory output set, from SQL aggregates (receval.engine.score)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_spark
from test_engine_score import CSVS, _same_output_sets, _score, make_bundle

from receval.engine.sampled import python_key


def with_classes(root: Path, *, classes: int = 2) -> Path:
    """``root``'s judgments with an ``equivalence_class`` on every correct annotation: the
    judged facts of a query fall into ``classes`` classes by a hash of the answer (so a class
    holds aliases several systems output, some output by one system twice)."""
    judgments = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str)
    key = np.array([python_key(f"{a}") for a in judgments["answer"]])
    judgments["equivalence_class"] = np.where(
        judgments["label"] == "C", [f"e{k % classes}" for k in key], ""
    )
    judgments.to_csv(root / "judgments.tsv", sep="\t", index=False)
    return root


def with_entity_relation_round(root: Path, n: int = 5) -> Path:
    """``root`` with entities and slots on its queries and one more round drawn by the
    entity-relation design (:func:`receval.engine.sampled.sample_round`), labelled."""
    from receval.bundle import Bundle
    from receval.engine.sampled import sample_round

    queries = pd.read_csv(root / "queries.tsv", sep="\t", dtype=str)
    queries["entity"] = [f"e{i // 2}" for i in range(len(queries))]
    queries["slot"] = [("per:title", "org:members")[i % 2] for i in range(len(queries))]
    queries.to_csv(root / "queries.tsv", sep="\t", index=False)
    bundle = Bundle(root)
    bundle.record_round(sample_round(bundle, n, seed=7, distribution="entity-relation"))
    todo = pd.read_csv(root / "to_annotate.tsv", sep="\t", dtype=str)
    judgments = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str)
    known = set(zip(judgments["query_id"], judgments["answer"], strict=True))
    todo = todo[
        [(q, a) not in known for q, a in zip(todo["query_id"], todo["answer"], strict=True)]
    ]
    key = np.array(
        [python_key(f"{q}{a}") for q, a in zip(todo["query_id"], todo["answer"], strict=True)]
    )
    new = todo.assign(label=np.where(key % 3 == 0, "W", "C"), annotator="a1")
    judgments = pd.concat([judgments, new[["query_id", "answer", "label", "annotator"]]])
    judgments.to_csv(root / "judgments.tsv", sep="\t", index=False)
    return root


CASES = [
    ({}, ()),
    ({"teams": True, "duplicates": True, "layout": "one-file"}, ()),
    ({"pending": 3}, ("--allow-pending", "--target", "macro")),
    ({}, ("--cluster-queries", "--method", "basic", "--estimator", "simple")),
    ({"toml": '[official]\nunjudged = "wrong"\n'}, ("--rank-by", "precision")),
    (
        {"duplicates": True, "teams": True, "toml": '[official]\nunjudged = "wrong"\n'},
        ("--method", "BCa"),
    ),
    ({"units": "documents", "teams": True}, ("--rank-by", "recall")),
    ({"units": "prob", "pending": 2}, ("--allow-pending", "--target", "macro")),
    ({"entity_relation": True}, ()),
    ({"entity_relation": True, "duplicates": True, "teams": True}, ("--target", "macro")),
    ({"entity_relation": True, "plain": True, "units": "uniform"}, ("--cluster-queries",)),
    ({"entity_relation": True, "plain": True, "layout": "one-file"}, ("--method", "BCa")),
]


def _bundle(root: Path, options: dict) -> Path:
    options = dict(options)
    er, plain = options.pop("entity_relation", False), options.pop("plain", False)
    root = make_bundle(root, **options)
    if er:
        with_entity_relation_round(root)
    return root if plain else with_classes(root)


@pytest.mark.parametrize(("options", "extra"), CASES)
def test_engine_score_with_classes_writes_the_in_memory_output_set(tmp_path, options, extra):
    """Classes counted once, entity-relation rounds (with classes unless ``plain``): the
    in-memory output set, byte for byte."""
    root = _bundle(tmp_path / "b", options)
    memory = _score(root, tmp_path / "memory", *extra, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *extra)
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")


@pytest.mark.parametrize("target", ["micro", "macro"])
@pytest.mark.parametrize(("units", "er"), [("", False), ("documents", False), ("", True)])
def test_engine_sample_data_counts_each_class_once_as_in_memory(tmp_path, target, units, er):
    """Every array of the estimators' SampleData (sizes, draws, proposals summed over a class,
    targets, census, units, per-query cells, classes and unresolved outputs) equals the
    in-memory build_sample_data's on a bundle whose classes hold several facts."""
    import dataclasses

    from receval.bundle import Bundle
    from receval.engine.score import bundle_sample_data
    from receval.estimators.sample_data import build_sample_data
    from receval.task import load_task

    root = _bundle(tmp_path / "b", {"teams": True, "units": units, "entity_relation": er})
    want = build_sample_data(load_task(root), target)
    got = bundle_sample_data(Bundle(root), target=target)
    assert want.aliased_classes > 0 and want.unresolved_outputs > 0
    for f in dataclasses.fields(want):
        a, b = getattr(want, f.name), getattr(got, f.name)
        if f.name in ("overlap", "facts"):  # overlap: not on the engine path; ids differ
            continue
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(b, a, err_msg=f.name)
        else:
            assert b == a, f.name


ANYTIME_CASES = [
    ({}, ("--intervals", "anytime")),
    ({"teams": True, "duplicates": True}, ("--intervals", "anytime", "--target", "macro")),
    ({"entity_relation": True, "plain": True}, ("--intervals", "anytime")),
    ({"entity_relation": True}, ("--intervals", "anytime-asymptotic", "--target", "macro")),
    ({"entity_relation": True, "units": "documents"}, ("--intervals", "anytime")),
    ({"topup": True, "teams": True}, ("--rank-by", "f1")),  # auto: anytime after a top-up
    ({"floor": True}, ("--intervals", "anytime", "--rank-by", "precision")),
]


@pytest.mark.parametrize(("options", "extra"), ANYTIME_CASES)
def test_anytime_intervals_with_classes_or_other_designs_write_the_in_memory_output_set(
    tmp_path, options, extra
):
    """The anytime streams' designs from the aggregates with equivalence classes (the members
    of a class leave their popularity cells, the class joins with its members' summed
    probability) and entity-relation rounds (p constant per (system, query) cell; the floor
    min_x Σ_j p_j(x) from one more column of the popularity scan): the in-memory output set."""
    root = _bundle(tmp_path / "b", options)
    memory = _score(root, tmp_path / "memory", *extra, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *extra)
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")


def with_truth(root: Path, *, classes: bool = True, complete: bool = True) -> Path:
    """``truth.tsv`` for ``root``: every output fact (``complete``; else one left out) and a
    few facts no system output, correct by a hash of the answer, the correct ones of a query
    in two classes (``classes``)."""
    runs = pd.concat(
        [pd.read_parquet(p) for p in sorted(root.glob("runs*/**/*.parquet"))]
        + ([pd.read_parquet(root / "runs.parquet")] if (root / "runs.parquet").is_file() else [])
    )
    from receval.config import load_config
    from receval.task import normalize_answers

    matching = load_config(root / "task.toml", default_name="b").matching
    facts = runs.assign(answer=normalize_answers(runs["answer"].astype(str), matching))
    facts = facts[["query_id", "answer"]].drop_duplicates()
    extra = pd.DataFrame({"query_id": ["q0", "q1", "q6"], "answer": ["unseen 1", "unseen 2", "x"]})
    truth = pd.concat([facts, extra], ignore_index=True)
    if not complete:
        truth = truth.iloc[1:]
    key = np.array([python_key(f"{a}") for a in truth["answer"]])
    truth["label"] = np.where(key % 3 == 0, "W", "C")
    if classes:
        truth["equivalence_class"] = np.where(truth["label"] == "C", [f"t{k % 2}" for k in key], "")
    truth.to_csv(root / "truth.tsv", sep="\t", index=False)
    return root


@pytest.mark.parametrize(
    ("options", "truth"),
    [
        ({}, {}),
        ({"teams": True, "layout": "one-file", "units": "uniform"}, {"classes": False}),
        ({"classes": True}, {}),
        ({}, {"complete": False}),
    ],
)
def test_engine_score_with_truth_writes_the_in_memory_truth_check(tmp_path, options, truth):
    """truth.tsv on the engine path: truth_check.csv (true precision, pooled recall, recall,
    F1 and pool coverage, truth classes counted once) byte for byte; none when some output is
    not in the truth."""
    options = dict(options)
    classes = options.pop("classes", False)
    root = with_truth(make_bundle(tmp_path / "b", **options), **truth)
    if classes:
        with_classes(root)
    memory = _score(root, tmp_path / "memory", path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine")
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    check = [(d / "truth_check.csv") for d in (tmp_path / "memory", tmp_path / "engine")]
    assert check[0].is_file() == truth.get("complete", True)
    assert check[1].is_file() == check[0].is_file()
    if check[0].is_file():
        assert check[1].read_bytes() == check[0].read_bytes()


def with_conflicts(root: Path) -> Path:
    """``root``'s judgments with a third annotator contradicting the first on every fifth
    judged answer (and naming another class on correct ones): conflicts in many queries."""
    judgments = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str, keep_default_na=False)
    first = judgments[judgments["annotator"] == "a1"].iloc[::5]
    third = first.assign(annotator="a3", label=np.where(first["label"] == "C", "W", "C"))
    third2 = first.iloc[::2].assign(annotator="a4")
    if "equivalence_class" in third2:
        third2["equivalence_class"] = np.where(third2["label"] == "C", "other", "")
    pd.concat([judgments, third, third2]).to_csv(root / "judgments.tsv", sep="\t", index=False)
    return root


@pytest.mark.parametrize(
    "options",
    [{}, {"layout": "one-file", "teams": True}, {"classes": True, "units": "uniform"}],
)
def test_conflicts_are_numbered_as_the_loader_numbers_facts(tmp_path, monkeypatch, options):
    """conflicts.csv on the engine path: the same fact ids as in memory (the loader's ranks of
    (query, answer) among the runs' and the tables' facts), with runs read in batches of one
    system or as one file, and with classes."""
    import receval.engine.summary as summary

    options = dict(options)
    classes = options.pop("classes", False)
    root = make_bundle(tmp_path / "b", **options)
    if classes:
        with_classes(root)
    with_conflicts(root)
    monkeypatch.setattr(summary, "BATCH_SYSTEMS", 1)
    memory = _score(root, tmp_path / "memory", path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine")
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    conflicts = pd.read_csv(tmp_path / "engine" / "conflicts.csv")
    assert len(conflicts) >= 5 and conflicts["query_id"].nunique() >= 3


def _kbp_parquet(root: Path) -> Path:
    """data/kbp-sim with per-system Parquet runs, its queries without slots (single-valued
    slots are official matching beyond facts), truth.tsv kept."""
    import shutil

    shutil.copytree(Path(__file__).parents[2] / "data" / "kbp-sim", root)
    queries = pd.read_csv(root / "queries.tsv", sep="\t", dtype=str)
    queries[["query_id"]].to_csv(root / "queries.tsv", sep="\t", index=False)
    runs = pd.read_csv(root / "runs.tsv", sep="\t", dtype=str, keep_default_na=False)
    (root / "runs.tsv").unlink()
    (root / "runs").mkdir()
    for system, part in runs.groupby("system"):
        part.drop(columns="system").to_parquet(root / "runs" / f"{system}.parquet", index=False)
    return root


@pytest.mark.slow
def test_engine_score_of_kbp_sim_with_truth_and_classes_is_the_in_memory_output_set(tmp_path):
    """data/kbp-sim as Parquet (140,985 run rows, 50 exhaustive units, truth.tsv) with classes
    added to its judgments and conflicting annotations: the same output set, truth_check.csv
    and conflicts.csv included."""
    root = with_conflicts(with_classes(_kbp_parquet(tmp_path / "kbp")))
    memory = _score(root, tmp_path / "memory", path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine")
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    for name in ("truth_check.csv",):
        assert (tmp_path / "engine" / name).read_bytes() == (
            tmp_path / "memory" / name
        ).read_bytes()


@pytest.mark.slow
@needs_spark
def test_spark_engine_score_with_classes_truth_and_entity_relation_is_duckdbs(
    tmp_path, monkeypatch
):
    """``--engine spark``: the classes' query facts, the conflicts' ranks, the truth's
    memberships and the entity-relation cells from Spark give DuckDB's output set."""
    import os

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = make_bundle(tmp_path / "b", teams=True)
    with_entity_relation_round(root)
    with_conflicts(with_classes(with_truth(root)))
    duck = _score(root, tmp_path / "duck")
    assert duck.exit_code == 0, duck.output
    spark = _score(root, tmp_path / "spark", "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    for name in (*CSVS, "truth_check.csv"):
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes()
