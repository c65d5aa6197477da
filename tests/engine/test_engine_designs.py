"""``score`` on the engine path with rounds drawn ``--by-judge`` (the ``judge-strata`` designs):
their probabilities from the judge's levels and per-level counts in SQL
(:mod:`receval.engine.strata`), the in-memory output set byte for byte."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_spark
from test_engine_classes import with_classes
from test_engine_score import CSVS, _same_output_sets, _score, make_bundle

from receval.bundle import Bundle
from receval.engine.sampled import python_key, sample_round


def _run_facts(root: Path) -> pd.DataFrame:
    files = sorted((root / "runs").glob("*.parquet")) or [root / "runs.parquet"]
    runs = pd.concat(pd.read_parquet(f) for f in files)
    runs["key"] = runs["answer"].str.lower().str.split().str.join(" ")  # one row per fact
    return runs.drop_duplicates(["query_id", "key"])[["query_id", "answer"]].reset_index(drop=True)


def with_judge(root: Path, *, graded: bool = False, judges: tuple[str, ...] = ("",)) -> Path:
    """``root`` with a judge table over 80 % of the runs' facts (continuous scores: equal-count
    bins; ``graded``: five grades, one level each), one row per judge of ``judges``."""
    facts = _run_facts(root)
    rng = np.random.default_rng(3)
    parts = []
    for name in judges:
        score = rng.random(len(facts))
        score = np.round(score * 4) / 4 if graded else np.round(score, 3)
        part = facts.assign(judge_score=score).iloc[: int(0.8 * len(facts))]
        parts.append(part.assign(judge=name) if name else part)
    pd.concat(parts).to_csv(root / "judge.tsv", sep="\t", index=False)
    return root


def with_judge_round(root: Path, n: int = 5, seed: int = 21) -> Path:
    """One more round drawn ``--by-judge`` on the engine, its new facts labelled."""
    bundle = Bundle(root)
    bundle.record_round(sample_round(bundle, n, seed=seed, by_judge=True))
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


def judge_bundle(root: Path, options: dict) -> Path:
    options = dict(options)
    judge = {k: options.pop(k) for k in ("graded", "judges") if k in options}
    classes = options.pop("classes", False)
    root = with_judge_round(with_judge(make_bundle(root, **options), **judge))
    return with_classes(root) if classes else root


def _designs(root: Path) -> set[str]:
    return set(pd.read_csv(root / "samples.tsv", sep="\t", dtype=str)["design"])


CASES = [
    ({}, ()),
    ({"graded": True, "teams": True, "duplicates": True}, ("--target", "macro")),
    ({"judges": ("a", "b"), "layout": "one-file"}, ("--method", "BCa")),
    ({"classes": True, "teams": True}, ()),
    ({"classes": True, "graded": True, "units": "documents"}, ("--rank-by", "recall")),
    ({"pending": 2}, ("--allow-pending", "--cluster-queries")),
    ({}, ("--estimator", "simple")),
]


@pytest.mark.parametrize(("options", "extra"), CASES)
def test_engine_score_with_by_judge_rounds_writes_the_in_memory_output_set(
    tmp_path, options, extra
):
    root = judge_bundle(tmp_path / "b", options)
    assert any(d.startswith("judge-strata:") for d in _designs(root))
    memory = _score(root, tmp_path / "memory", *extra, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *extra)
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")


@pytest.mark.parametrize("target", ["micro", "macro"])
@pytest.mark.parametrize("options", [{}, {"classes": True, "graded": True}])
def test_engine_sample_data_has_the_judge_strata_proposals(tmp_path, target, options):
    """Every SampleData array (proposals at the judge's levels included, summed over a class's
    members) equals the in-memory build_sample_data's, bit for bit."""
    from receval.engine.score import bundle_sample_data
    from receval.estimators.sample_data import build_sample_data
    from receval.task import load_task

    root = judge_bundle(tmp_path / "b", {"teams": True, **options})
    want = build_sample_data(load_task(root), target)
    got = bundle_sample_data(Bundle(root), target=target)
    assert any(d.startswith("judge-strata:") for d in want.sampler_design)
    for f in dataclasses.fields(want):
        a, b = getattr(want, f.name), getattr(got, f.name)
        if f.name in ("overlap", "facts"):  # overlap: not on the engine path; ids differ
            continue
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(b, a, err_msg=f.name)
        else:
            assert b == a, f.name


def test_judge_strata_round_without_its_judge_is_the_loaders_error(tmp_path):
    """A by-judge round whose judge table is gone: the same one-line error on both paths."""
    root = judge_bundle(tmp_path / "b", {})
    (root / "judge.tsv").unlink()
    memory = _score(root, tmp_path / "memory", path="--in-memory")
    engine = _score(root, tmp_path / "engine")
    assert memory.exit_code == engine.exit_code == 2
    assert "needs judge" in memory.output and engine.output == memory.output


def test_anytime_intervals_with_a_by_judge_round_are_scored_in_memory(tmp_path, monkeypatch):
    """The anytime streams would need the judge's levels per popularity stratum: with a
    by-judge round --out-of-core is a usage error naming it, and at size the in-memory path
    scores with the warning."""
    import json

    import receval.engine.score as engine_score

    monkeypatch.setattr(engine_score, "ENGINE_PATH_ROWS", 10)
    root = judge_bundle(tmp_path / "b", {})
    refused = _score(root, tmp_path / "o1", "--intervals", "anytime")
    named = "rounds drawn --by-judge with anytime intervals"
    assert refused.exit_code == 2 and named in refused.output, refused.output
    result = _score(root, tmp_path / "o2", "--intervals", "anytime", path="--quiet")
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "o2" / "run.json").read_text())
    assert "engine_path" not in record
    assert any(named in w for w in record["warnings"])


@pytest.mark.slow
@needs_spark
def test_spark_engine_score_with_by_judge_rounds_is_duckdbs(tmp_path, monkeypatch):
    """``--engine spark``: the judge's levels and per-level counts from Spark give DuckDB's
    output set (classes too)."""
    import os

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = judge_bundle(tmp_path / "b", {"classes": True, "teams": True})
    duck = _score(root, tmp_path / "duck")
    assert duck.exit_code == 0, duck.output
    spark = _score(root, tmp_path / "spark", "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    for name in CSVS:
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes()


@pytest.mark.parametrize("round_kind", ["by-judge", "entity-relation", "undeclared"])
def test_ppi_with_rounds_of_another_design_is_the_in_memory_output_set(tmp_path, round_kind):
    """ppi with a by-judge or an entity-relation round (declared, or inferred from its
    probabilities): the engine judge's sums over the samplers' kinds
    (receval.engine.judge_designs) give the in-memory output set (they were refused)."""
    from test_engine_classes import with_entity_relation_round

    if round_kind == "by-judge":
        root = judge_bundle(tmp_path / "b", {})
    else:
        root = with_judge(with_entity_relation_round(make_bundle(tmp_path / "b")))
    if round_kind == "undeclared":
        samples = pd.read_csv(root / "samples.tsv", sep="\t", dtype=str, keep_default_na=False)
        samples.drop(columns="design").to_csv(root / "samples.tsv", sep="\t", index=False)
    memory = _score(root, tmp_path / "m", "--estimator", "ppi", path="--in-memory")
    assert memory.exit_code == 0, memory.output
    result = _score(root, tmp_path / "o", "--estimator", "ppi")
    assert result.exit_code == 0, result.output
    _same_output_sets(tmp_path / "m", tmp_path / "o")


@pytest.mark.slow
@needs_spark
def test_spark_anytime_intervals_with_classes_and_entity_relation_are_duckdbs(
    tmp_path, monkeypatch
):
    """``--engine spark --intervals anytime``: the popularity scan's per-design floors and the
    classes' members left out of it give DuckDB's output set."""
    import os

    from test_engine_classes import _bundle

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = _bundle(tmp_path / "b", {"entity_relation": True, "teams": True})
    duck = _score(root, tmp_path / "duck", "--intervals", "anytime")
    assert duck.exit_code == 0, duck.output
    spark = _score(root, tmp_path / "spark", "--intervals", "anytime", "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    for name in CSVS:
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes()
