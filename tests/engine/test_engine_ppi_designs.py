"""``score --estimator ppi`` on the engine path with rounds drawn ``--by-judge`` and
``--entity-relation`` (receval.engine.judge_designs): the judge's sums over the samplers'
kinds, every pair's probability from its cell, the in-memory output set byte for byte."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import needs_spark
from test_engine_classes import with_classes, with_entity_relation_round
from test_engine_designs import judge_bundle, with_judge, with_judge_round
from test_engine_ppi import GRADED, SEVERAL, write_judge
from test_engine_score import CSVS, _same_output_sets, _score, make_bundle


def _design_bundle(root, options: dict):
    """A bundle with a judge table and a round of another design: ``by-judge`` (the
    :func:`test_engine_designs.judge_bundle` options), ``er`` (an entity-relation round and
    the ``judge`` kind of :func:`test_engine_ppi.write_judge`), ``both``."""
    options = dict(options)
    kind = options.pop("round")
    judge = options.pop("judge", "probability")
    classes = options.pop("classes", False)
    if kind == "by-judge":
        root = judge_bundle(root, options)
    else:
        root = with_entity_relation_round(make_bundle(root, **options))
        if kind == "both":
            root = with_judge_round(with_judge(root))
        else:
            write_judge(root, judge)
    return with_classes(root) if classes else root


CASES = [
    ({"round": "by-judge"}, ()),
    ({"round": "by-judge", "graded": True, "teams": True}, ("--target", "macro")),
    ({"round": "by-judge", "judges": ("a", "b")}, ("--method", "BCa")),
    ({"round": "by-judge", "classes": True, "teams": True}, ()),
    ({"round": "by-judge", "classes": True, "graded": True}, ("--precision-form", "ratio")),
    ({"round": "by-judge", "teams": True}, ("--cluster-queries",)),
    ({"round": "by-judge", "classes": True}, ("--cluster-queries",)),
    ({"round": "er"}, ()),
    ({"round": "er", "judge": "several", "toml": SEVERAL, "teams": True}, ("--target", "macro")),
    ({"round": "er", "judge": "graded", "toml": GRADED, "classes": True}, ()),
    ({"round": "er", "rounds": 3}, ("--cluster-queries",)),
    ({"round": "both", "classes": True}, ("--cluster-queries",)),
    ({"round": "both", "layout": "one-file"}, ()),
]


@pytest.mark.parametrize(("options", "extra"), CASES)
def test_engine_ppi_with_rounds_of_other_designs_writes_the_in_memory_output_set(
    tmp_path, options, extra
):
    root = _design_bundle(tmp_path / "b", options)
    designs = set(pd.read_csv(root / "samples.tsv", sep="\t", dtype=str)["design"])
    assert designs - {"uniform"}, designs
    args = ("--estimator", "ppi", *extra)
    memory = _score(root, tmp_path / "memory", *args, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *args, path="--out-of-core")
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    got, want = (d / "judge.csv" for d in (tmp_path / "engine", tmp_path / "memory"))
    assert got.read_bytes() == want.read_bytes()


@pytest.mark.parametrize("by_query", [False, True])
@pytest.mark.parametrize(
    "options",
    [{"round": "by-judge", "teams": True}, {"round": "both", "classes": True}],
)
def test_engine_judge_totals_over_other_designs_are_the_in_memory_ones(
    tmp_path, monkeypatch, options, by_query
):
    """Every array of the judge's totals (the controls' known expectations per sampler, per
    query too) equals the in-memory judge_totals' to 1e-12 relative, streamed in many slices."""
    import receval.engine.judge_stream as stream
    from receval.bundle import Bundle
    from receval.estimators.ppi import judge_totals
    from receval.estimators.sample_data import build_sample_data
    from receval.task import load_task

    root = _design_bundle(tmp_path / "b", options)
    task = load_task(root)
    data = build_sample_data(task, "micro")
    assert set(data.sampler_design) - {"uniform"}
    want = judge_totals(task, data, by_query=by_query)
    view = _engine_view(Bundle(root))
    monkeypatch.setattr(stream, "PAIRS_PER_SLICE", 30)  # many slices
    got = judge_totals(view, view.sample_data("micro"), by_query=by_query)
    names = ["expected_score", "expected_mass", "judge_precision", "scored_share"]
    if by_query:
        names += ["expected_score_q", "expected_mass_q"]
    for name in names:
        a, b = getattr(got, name), getattr(want, name)
        if name.endswith("_q"):  # in memory: up to the last query some output answers
            assert not a[:, b.shape[1] :].any(), name
            a = a[:, : b.shape[1]]
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=name)


def _engine_view(bundle):
    from types import SimpleNamespace

    from receval.engine.score import engine_view

    options = SimpleNamespace(
        estimator="ppi", weighting="size", target_recall=None, annotator_resampling=False,
        intervals="bootstrap", cluster_queries=False, method="percentile",
    )  # fmt: skip
    return engine_view(bundle.root, options, "duckdb", True)


@pytest.mark.slow
@needs_spark
def test_spark_engine_ppi_with_rounds_of_other_designs_is_duckdbs(tmp_path, monkeypatch):
    """``--engine spark --estimator ppi`` with a by-judge and an entity-relation round and
    classes: DuckDB's output set."""
    import os

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = _design_bundle(tmp_path / "b", {"round": "both", "classes": True, "teams": True})
    duck = _score(root, tmp_path / "duck", "--estimator", "ppi")
    assert duck.exit_code == 0, duck.output
    spark = _score(root, tmp_path / "spark", "--estimator", "ppi", "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    for name in (*CSVS, "judge.csv"):
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes()


def _uniform_bundle(root, options: dict):
    from test_engine_ppi import with_aliases

    root = make_bundle(root, rounds=3, teams=True)
    write_judge(root, "probability", missing=4)
    return with_aliases(root) if options.get("classes") else root


@pytest.mark.parametrize("by_query", [False, True])
@pytest.mark.parametrize(
    "options",
    [
        {"round": "both", "classes": True, "teams": True},
        {"round": "by-judge", "judges": ("a", "b")},
        {"round": "uniform", "classes": True},
    ],
)
def test_the_self_join_sums_equal_the_streamed_ones(tmp_path, options, by_query):
    """Spark's self-join (receval.engine.judge.pair_sums, over the samplers' kinds with each
    pair's probability in SQL, per query with ``--cluster-queries``) run on DuckDB: the
    streamed sums, every array (the per-query ones and Σ_{x∈q} s_j(x) included)."""
    from receval.bundle import Bundle
    from receval.engine.judge_designs import SamplerKinds, uniform_only

    if options["round"] == "uniform":
        root = _uniform_bundle(tmp_path / "b", options)
    else:
        root = _design_bundle(tmp_path / "b", options)
    view = _engine_view(Bundle(root))
    judge, data = view.engine_judge, view.sample_data("micro")
    kinds = None if uniform_only(data) else SamplerKinds.of(data)
    raw = judge.key_scores()
    values = np.vstack([raw, raw**2])
    streamed = judge.pool_sums(data, "micro", values, by_query, kinds)
    judge.numbered = -1  # the self-join, as on Spark
    joined = judge.pool_sums(data, "micro", values, by_query, kinds)
    pairs = [(streamed, joined)]
    if by_query:
        pairs.append((streamed.by_query, joined.by_query))
        assert (streamed.by_query.mass_q is None) == (kinds is None)
    for want, got in pairs:
        for name in ("g1", "pm", "gs", "ps", "jp", "scored", "mass_q"):
            a, b = getattr(got, name), getattr(want, name)
            if a is None and b is None:
                continue
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=name)
    assert streamed.g1.sum() > 0


@pytest.mark.parametrize(
    ("options", "extra"),
    [
        ({"round": "both", "classes": True, "teams": True}, ("--cluster-queries",)),
        ({"round": "er", "judge": "several", "toml": SEVERAL}, ()),
        ({"round": "uniform", "classes": True}, ("--cluster-queries",)),
    ],
)
def test_ppi_by_the_self_join_writes_the_in_memory_output_set(
    tmp_path, monkeypatch, options, extra
):
    """The whole output set with the judge's sums by the self-join (Spark's path, run on
    DuckDB here): rounds of other designs, classes and ``--cluster-queries``."""
    import receval.engine.judge_stream as stream

    if options["round"] == "uniform":
        root = _uniform_bundle(tmp_path / "b", options)
    else:
        root = _design_bundle(tmp_path / "b", options)
    args = ("--estimator", "ppi", *extra)
    memory = _score(root, tmp_path / "memory", *args, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    monkeypatch.setattr(stream, "number_pool", lambda engine: -1)
    engine = _score(root, tmp_path / "engine", *args, path="--out-of-core")
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    got, want = (d / "judge.csv" for d in (tmp_path / "engine", tmp_path / "memory"))
    assert got.read_bytes() == want.read_bytes()


@pytest.mark.slow
@needs_spark
def test_spark_engine_ppi_with_cluster_queries_is_duckdbs(tmp_path, monkeypatch):
    """``--engine spark --estimator ppi --cluster-queries`` (the self-join's sums per query)
    with classes: DuckDB's output set (it was refused)."""
    import os

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = _uniform_bundle(tmp_path / "b", {"classes": True})
    args = ("--estimator", "ppi", "--cluster-queries")
    duck = _score(root, tmp_path / "duck", *args)
    assert duck.exit_code == 0, duck.output
    spark = _score(root, tmp_path / "spark", *args, "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    for name in (*CSVS, "judge.csv"):
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes()
