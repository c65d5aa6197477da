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


@pytest.mark.parametrize("extra", [(), ("--intervals", "anytime")])
def test_judge_strata_round_without_its_judge_is_the_loaders_error(tmp_path, extra):
    """A by-judge round whose judge table is gone: the same one-line error on both paths
    (with anytime intervals too)."""
    root = judge_bundle(tmp_path / "b", {})
    (root / "judge.tsv").unlink()
    memory = _score(root, tmp_path / "memory", *extra, path="--in-memory")
    engine = _score(root, tmp_path / "engine", *extra)
    assert memory.exit_code == engine.exit_code == 2
    assert "needs judge" in memory.output and engine.output == memory.output


ANYTIME_CASES = [
    ({}, ("--intervals", "anytime")),
    ({"classes": True, "graded": True, "teams": True}, ("--intervals", "anytime", "--target", "macro")),
    ({"judges": ("a", "b"), "layout": "one-file"},
     ("--intervals", "anytime-asymptotic", "--rank-by", "recall")),
]  # fmt: skip


@pytest.mark.parametrize(("options", "extra"), ANYTIME_CASES)
def test_anytime_intervals_with_by_judge_rounds_write_the_in_memory_output_set(
    tmp_path, options, extra
):
    """The popularity scan split by the judge's level (in the engine judge's session) gives
    the judge-strata designs' κ_ib and floors: the in-memory output set, byte for byte
    (classes, the macro target, graded and several judges)."""
    root = judge_bundle(tmp_path / "b", options)
    memory = _score(root, tmp_path / "memory", *extra, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *extra)
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")


def test_anytime_intervals_with_two_judges_strata_are_refused(tmp_path):
    """Rounds drawn --by-judge by two judges: the scan splits by one judge's levels, so
    --out-of-core with anytime intervals is one usage line (the bootstrap is scored)."""
    root = judge_bundle(tmp_path / "b", {"judges": ("a", "b")})
    samples = pd.read_csv(root / "samples.tsv", sep="\t", dtype=str, keep_default_na=False)
    first = samples.index[samples["design"].str.startswith("judge-strata:")][0]
    name = samples.loc[first, "design"].split(":")[1]
    other = samples.loc[first, "design"].replace(f":{name}:", f":{'b' if name == 'a' else 'a'}:")
    samples.loc[first, "design"] = other  # one draw of another judge's strata
    samples.to_csv(root / "samples.tsv", sep="\t", index=False)
    refused = _score(root, tmp_path / "o1", "--intervals", "anytime")
    assert refused.exit_code == 2, refused.output
    assert "rounds drawn --by-judge by several judges with anytime intervals" in refused.output


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
    any_duck = _score(root, tmp_path / "any-duck", "--intervals", "anytime")
    assert any_duck.exit_code == 0, any_duck.output
    any_spark = _score(root, tmp_path / "any-spark", "--intervals", "anytime", "--engine", "spark")
    assert any_spark.exit_code == 0, any_spark.output
    for name in CSVS:  # the level-split popularity scan on Spark too
        want = (tmp_path / "any-duck" / name).read_bytes()
        assert (tmp_path / "any-spark" / name).read_bytes() == want


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


@pytest.mark.parametrize("options", [{}, {"graded": True}, {"classes": True}], ids=str)
@pytest.mark.parametrize("rank_by", ["precision", "pooled_recall"])
def test_engine_look_with_by_judge_rounds_draws_the_in_memory_round(tmp_path, options, rank_by):
    """``sample --until-decided`` out of core after a round drawn ``--by-judge``: the looks'
    anytime intervals score the judge-strata rounds on the engine path, so the open pairs,
    weights and the whole drawn round (floor draws' q₀ included) are the in-memory loop's."""
    import receval
    from receval.engine.until_decided import until_decided_round as engine_round
    from receval.until_decided import until_decided_round

    root = judge_bundle(tmp_path / "b", options)
    assert any(d.startswith("judge") for d in _designs(root))
    memory = until_decided_round(receval.load_task(root), 40, seed=2, rank_by=rank_by)
    engine = engine_round(Bundle(root), 40, seed=2, rank_by=rank_by)
    assert engine.decisions.open_pairs == memory.decisions.open_pairs
    np.testing.assert_allclose(engine.decisions.weights, memory.decisions.weights, rtol=1e-9)
    pd.testing.assert_frame_equal(engine.samples, memory.samples)
    pd.testing.assert_frame_equal(engine.to_annotate, memory.to_annotate)
