"""The judge's known totals of ``--estimator ppi`` in SQL (receval.engine.judge_totals): the
in-memory :func:`receval.estimators.ppi.judge_totals`, from the runs' aggregates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_spark
from test_engine_score import make_bundle

from receval.bundle import Bundle
from receval.engine.sampled import python_key


def with_judge(root: Path, share: float = 0.8) -> Path:
    """A judge scoring about ``share`` of the pool facts (the others imputed), spelled as the
    runs spell them or not, plus a fact no system output."""
    runs = pd.concat(
        [pd.read_parquet(p) for p in sorted((root / "runs").glob("*.parquet"))]
        if (root / "runs").is_dir()
        else [pd.read_parquet(root / "runs.parquet")]
    )
    facts = runs[["query_id", "answer"]].drop_duplicates()
    pairs = zip(facts["query_id"], facts["answer"], strict=True)
    key = np.array([python_key(f"{q}|{a}") for q, a in pairs])
    kept = facts[(key % 100) < share * 100].copy()
    kept["answer"] = np.where(key[(key % 100) < share * 100] % 2, kept["answer"].str.upper(),
                              kept["answer"])  # fmt: skip
    kept["judge_score"] = ((key[(key % 100) < share * 100] % 997) / 996.0).round(4)
    extra = pd.DataFrame({"query_id": ["q1"], "answer": ["nobody's"], "judge_score": [0.3]})
    pd.concat([kept, extra]).to_csv(root / "judge.tsv", sep="\t", index=False)
    return root


@pytest.mark.parametrize(
    ("options", "target"),
    [
        ({}, "micro"),
        ({"teams": True, "layout": "one-file", "topup": True}, "macro"),
        ({"units": "uniform", "pending": 3}, "micro"),
    ],
)
def test_engine_judge_totals_equal_the_in_memory_ones(tmp_path, options, target):
    from receval.engine.judge_totals import bundle_judge_totals
    from receval.estimators.ppi import judge_totals
    from receval.estimators.sample_data import build_sample_data

    root = with_judge(make_bundle(tmp_path / "b", **options))
    task = Bundle(root).load()
    want = judge_totals(task, build_sample_data(task, target), target, "size", False)
    got = bundle_judge_totals(Bundle(root), target=target)
    for name in ("score_drawn", "scored_drawn", "expected_score", "expected_mass",
                 "scored_share", "judge_precision"):  # fmt: skip
        a, b = getattr(got, name), getattr(want, name)
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=name)
    assert not want.scored_drawn.all() and want.scored_drawn.any()


def test_several_judges_are_refused(tmp_path):
    from receval.engine.judge_totals import bundle_judge_totals

    root = with_judge(make_bundle(tmp_path / "b", rounds=1))
    judge = pd.read_csv(root / "judge.tsv", sep="\t", dtype=str)
    pd.concat([judge.assign(judge="a"), judge.assign(judge="b")]).to_csv(
        root / "judge.tsv", sep="\t", index=False
    )
    with pytest.raises(ValueError, match="several judges"):
        bundle_judge_totals(Bundle(root))


def _sums_both_ways(root: Path, target: str):
    """(streamed, self-joined) (fill, PoolSums) of the bundle's judge, in one engine session."""
    from receval.engine.judge import mixture_c
    from receval.engine.judge_totals import joined_sums, read_judge, streamed_sums
    from receval.engine.sampled_data import engine_sample_data, read_small_tables
    from receval.engine.score import parquet_engine, summarise_bundle
    from receval.engine.summary import register_normed

    bundle = Bundle(root)
    small = read_small_tables(bundle)
    judge = read_judge(bundle, small)
    summary = summarise_bundle(bundle, small, "duckdb")
    data = engine_sample_data(small, summary, target)
    c = mixture_c(data, np.asarray(summary.sizes, float))
    with parquet_engine(bundle, "duckdb") as con:
        register_normed(con, small.config.matching)
        streamed = streamed_sums(con, summary, target, judge, c)
        joined = joined_sums(con, summary, target, judge, c)
    return streamed, joined


@pytest.mark.parametrize("sliced", [False, True])
@pytest.mark.parametrize("target", ["micro", "macro"])
def test_streamed_sums_equal_the_self_join(tmp_path, monkeypatch, sliced, target):
    """The streamed pool sums (DuckDB) equal the self-join's (Spark's path) to 1e-12, whole
    or in slices of a few pairs (and the pairs built in batches of systems), with a judge
    that leaves some facts unscored (the fill)."""
    import receval.engine.judge as judge_module
    import receval.engine.judge_stream as stream

    if sliced:
        monkeypatch.setattr(stream, "PAIRS_PER_SLICE", 17)
        monkeypatch.setattr(stream, "CHUNK_CELLS", 64)
        monkeypatch.setattr(judge_module, "PAIRS_PER_SLICE", 40)
    root = with_judge(make_bundle(tmp_path / "b", teams=True), share=0.6)
    (fill, got), (want_fill, want) = _sums_both_ways(root, target)
    assert fill == pytest.approx(want_fill, rel=1e-12) and 0 < fill < 1
    for name in ("g1", "pm", "gs", "ps", "jp", "scored"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=name)
    assert want.g1.any() and (want.scored > 0).all()


@pytest.mark.slow
@needs_spark
def test_spark_judge_totals_equal_duckdbs(tmp_path, monkeypatch):
    """Spark keeps the self-join (:func:`receval.engine.judge_totals.joined_sums`): the same
    totals as DuckDB's streamed sums, to 1e-12."""
    import os

    from receval.engine.judge_totals import bundle_judge_totals

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = with_judge(make_bundle(tmp_path / "b", teams=True), share=0.6)
    duck = bundle_judge_totals(Bundle(root))
    spark = bundle_judge_totals(Bundle(root), engine="spark")
    for name in ("score_drawn", "scored_drawn", "expected_score", "expected_mass",
                 "scored_share", "judge_precision"):  # fmt: skip
        a, b = getattr(spark, name), getattr(duck, name)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=name)
