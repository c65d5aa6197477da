"""``--estimator ppi`` with anytime intervals on the engine path (receval.engine.judge_anytime):
the streams' judge maps and their sums over every system's outputs from one aggregation per
(system, popularity stratum, key), the same output set as the in-memory path (with
equivalence classes too); and ``sample
--until-decided --estimator ppi`` out of core, the same round as in memory."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import needs_spark
from test_engine_ppi import GRADED, SEVERAL, write_judge
from test_engine_score import CSVS, _same_output_sets, _score, make_bundle

CASES = [
    ("probability", {}, {"rounds": 3}, ("--intervals", "anytime")),
    (
        "probability",
        {"missing": 7},
        {"rounds": 4, "teams": True},
        ("--intervals", "anytime", "--rank-by", "precision", "--target", "macro"),
    ),
    (
        "graded",
        {"missing": 5},
        {"toml": GRADED, "rounds": 4},
        ("--intervals", "anytime-asymptotic"),
    ),
    (
        "graded",
        {},
        {"toml": GRADED, "rounds": 4, "layout": "one-file"},
        ("--intervals", "anytime", "--rank-by", "precision", "--target", "macro"),
    ),
    (
        "several",
        {"missing": 4},
        {"toml": SEVERAL, "rounds": 4},
        ("--intervals", "anytime", "--rank-by", "pooled_recall"),
    ),
    ("several", {}, {"toml": SEVERAL, "topup": True, "units": "uniform"}, ()),  # auto: anytime
    (
        "probability",
        {"parquet": True},
        {"floor": True, "layout": "one-file"},
        ("--intervals", "anytime", "--target", "macro"),
    ),
]


@pytest.mark.parametrize(("kind", "judge", "bundle", "extra"), CASES)
def test_engine_ppi_anytime_writes_the_in_memory_output_set(tmp_path, kind, judge, bundle, extra):
    """Every CSV, judge.csv and run.json (its ``intervals`` block naming the judge's control)
    are the in-memory path's bytes: probability, graded and several judges, micro and macro,
    ranked by f1, precision and pooled recall (the judged paired tests), an --until-decided
    round's floor draws."""
    root = make_bundle(tmp_path / "b", **bundle)
    write_judge(root, kind, **judge)
    args = ("--estimator", "ppi", *extra)
    memory = _score(root, tmp_path / "memory", *args, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *args)
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    got, want = (d / "judge.csv" for d in (tmp_path / "engine", tmp_path / "memory"))
    assert got.read_bytes() == want.read_bytes()
    record = json.loads((tmp_path / "engine" / "run.json").read_text())
    assert record["intervals"]["method"].startswith("anytime")
    assert record["engine_path"]["engine"] == "duckdb"


@pytest.mark.parametrize(
    ("kind", "aliases", "path"),
    [("probability", False, "streamed"), ("probability", True, "sliced"),
     ("several", True, "cells"), ("probability", False, "cells")],
)  # fmt: skip
def test_the_stream_maps_are_fitted_and_read_per_key(tmp_path, monkeypatch, kind, aliases, path):
    """Calibrated segments (fitted on earlier rows' labels; a probability judge's level keys,
    several judges' (query, levels) keys; classes read at their canonical facts) and the raw
    segment (streamed over the numbered pool, in one or many slices, or read from the raw
    keys' cells as on Spark): each segment's sums and extremes equal those over the output rows
    of the in-memory path to 1e-12."""
    from test_engine_ppi import with_aliases

    import receval
    import receval.engine.judge_anytime as anytime
    import receval.engine.judge_stream as judge_stream
    from receval.estimators.anytime.control import STRATA
    from receval.estimators.anytime.stream import build_stream, output_arrays
    from receval.estimators.judge_stream import segment_controls, stream_judge
    from receval.estimators.sample_data import build_sample_data, design_probabilities

    root = make_bundle(tmp_path / "b", rounds=4, toml=SEVERAL if kind == "several" else "")
    if aliases:
        with_aliases(root)
    write_judge(root, kind, missing=7)
    if path == "sliced":
        monkeypatch.setattr(judge_stream, "PAIRS_PER_SLICE", 40)
    if path == "cells":  # no numbered pool (Spark's path): ppi's sums by the self-join too
        monkeypatch.setattr(judge_stream, "number_pool", lambda engine: -1)
    streamed = []
    real_raw = anytime.raw_sums
    monkeypatch.setattr(anytime, "raw_sums", lambda *a: streamed.append(1) or real_raw(*a))
    seen = []
    real = anytime.segment_sums
    monkeypatch.setattr(
        anytime, "segment_sums", lambda *a: seen.append(real(*a)) or seen[-1]
    )  # fmt: skip
    result = receval.score(root, estimator="ppi", intervals="anytime", out_of_core=True)
    assert result.run.extra["engine_path"]["engine"] == "duckdb"
    assert len(seen) == 2  # the bounds' controls (3 strata) and the paired terms' (one)
    assert bool(streamed) == (path != "cells")
    task = receval.load_task(root)
    data = build_sample_data(task)
    st = build_stream(task, data)
    sj = stream_judge(task, data, st)
    assert sj.tables.shape[0] >= 2 and not np.allclose(sj.tables[1], sj.tables[0])
    view = design_probabilities(task, True)[0]
    t_all, codes, facts, strata = output_arrays(view, data)
    want = segment_controls(sj, t_all, codes, facts, strata.of_fact[facts], data.m, STRATA)
    for got, expected in zip(seen[0], want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)


def test_engine_ppi_anytime_never_loads_the_task(tmp_path, monkeypatch):
    import receval.bundle.runs
    import receval.task
    from receval import api

    root = make_bundle(tmp_path / "b", toml=SEVERAL, rounds=3)
    write_judge(root, "several")

    def refuse(*args, **kwargs):
        raise AssertionError("the engine path loaded the task")

    monkeypatch.setattr(receval.task, "load_task", refuse)
    monkeypatch.setattr(receval.task.Task, "from_frames", refuse)
    monkeypatch.setattr(receval.bundle.runs, "_run_frame", refuse)
    result = api.score(root, estimator="ppi", intervals="anytime", seed=1, out_of_core=True)
    assert result.run.extra["engine_path"]["engine"] == "duckdb"
    assert len(result.leaderboard) == 4


CLASS_CASES = [
    ("probability", {"missing": 9}, {"rounds": 4}, ("--intervals", "anytime")),
    (
        "probability",
        {},
        {"rounds": 4, "teams": True},
        ("--intervals", "anytime", "--target", "macro", "--rank-by", "precision"),
    ),
    (
        "graded",
        {"missing": 5},
        {"toml": GRADED, "rounds": 4},
        ("--intervals", "anytime-asymptotic"),
    ),
    (
        "several",
        {"missing": 4},
        {"toml": SEVERAL, "rounds": 4},
        ("--intervals", "anytime", "--rank-by", "precision"),
    ),
    ("graded", {}, {"toml": GRADED, "rounds": 4, "teams": True}, ("--intervals", "anytime")),
]


@pytest.mark.parametrize(("kind", "judge", "bundle", "extra"), CLASS_CASES)
def test_engine_ppi_anytime_with_classes_writes_the_in_memory_output_set(
    tmp_path, kind, judge, bundle, extra
):
    """Classes of aliases (a spelling no system output among them): each class one row per
    system that output a member, scored at its canonical fact (a probability judge's levels
    over the members' highest grades); the in-memory output set."""
    from test_engine_ppi import with_aliases

    root = with_aliases(make_bundle(tmp_path / "b", **bundle))
    write_judge(root, kind, **judge)
    args = ("--estimator", "ppi", *extra)
    memory = _score(root, tmp_path / "memory", *args, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *args)
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    got, want = (d / "judge.csv" for d in (tmp_path / "engine", tmp_path / "memory"))
    assert got.read_bytes() == want.read_bytes()


# ---------------------------------------------------------------------------------------------
# sample --until-decided --estimator ppi


def _judged_loop_bundle(root, kind: str):
    """:func:`test_sample_adaptive._labelled_bundle` (three systems drawn, labelled by a rule)
    with a judge over every fact of the runs: ``probability`` (noisy around the rule),
    ``graded`` (the same on 0–3) or ``several`` (both)."""
    from test_bundle import _runs
    from test_sample_adaptive import _labelled_bundle, _rule

    root = _labelled_bundle(root, sizes={"A": 30, "B": 30, "C": 30})
    facts = _runs()[["query_id", "answer"]].drop_duplicates()
    truth = (_rule(facts["answer"]) == "C").astype(float)
    noisy = np.clip(0.3 + 0.4 * truth + np.random.default_rng(1).normal(0, 0.25, len(facts)), 0, 1)
    prob = facts.assign(judge_score=np.round(noisy, 3))
    graded = facts.assign(judge_score=np.round(noisy * 3).astype(int))
    if kind == "probability":
        judge = prob
    elif kind == "graded":
        judge = graded
        (root / "task.toml").write_text(GRADED, encoding="utf-8")
    else:
        judge = pd.concat([graded.assign(judge="umbrela"), prob.iloc[::2].assign(judge="llm")])
        (root / "task.toml").write_text(SEVERAL, encoding="utf-8")
    judge.to_csv(root / "judge.tsv", sep="\t", index=False)
    return root


@pytest.mark.parametrize(
    ("kind", "rank_by", "classes"),
    [("probability", "precision", False), ("graded", "pooled_recall", False),
     ("several", "precision", False), ("several", "pooled_recall", True)],
)  # fmt: skip
def test_engine_ppi_look_draws_the_in_memory_round(tmp_path, kind, rank_by, classes):
    """The look with the judge on the engine path: the in-memory open pairs, weights (to 1e-9:
    the judge's sums over cells instead of rows) and the same round, byte for byte; with
    classes (a query's correct facts in two classes by the answer's length) too."""
    import receval
    from receval.bundle import Bundle
    from receval.engine.until_decided import until_decided_round as engine_round
    from receval.until_decided import until_decided_round

    root = _judged_loop_bundle(tmp_path / "b", kind)
    if classes:
        judgments = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str)
        judgments["equivalence_class"] = np.where(
            judgments["label"] == "C", [f"e{len(a) % 2}" for a in judgments["answer"]], ""
        )
        judgments.to_csv(root / "judgments.tsv", sep="\t", index=False)
    task = receval.load_task(root)
    memory = until_decided_round(task, 40, seed=2, rank_by=rank_by, estimator="ppi")
    engine = engine_round(Bundle(root), 40, seed=2, rank_by=rank_by, estimator="ppi")
    assert engine.decisions.open_pairs == memory.decisions.open_pairs
    np.testing.assert_allclose(engine.decisions.weights, memory.decisions.weights, rtol=1e-9)
    joint = until_decided_round(task, 40, seed=2, rank_by=rank_by)
    assert not np.allclose(joint.decisions.weights, memory.decisions.weights)  # the judge told
    pd.testing.assert_frame_equal(engine.samples, memory.samples)
    pd.testing.assert_frame_equal(engine.to_annotate, memory.to_annotate)


def test_cli_until_decided_with_the_judge_out_of_core(tmp_path):
    """``sample --until-decided --estimator ppi --out-of-core`` writes the in-memory round's
    samples.tsv and to_annotate.tsv; ``score`` of the result agrees on both paths."""
    import shutil

    from click.testing import CliRunner
    from test_sample_adaptive import _label

    from receval.cli import cli

    source = _judged_loop_bundle(tmp_path / "source", "probability")
    args = ["--until-decided", "--batch", "30", "--rank-by", "precision", "--seed", "3",
            "--estimator", "ppi"]  # fmt: skip
    written = {}
    for path in ("--in-memory", "--out-of-core"):
        root = tmp_path / path[2:]
        shutil.copytree(source, root)
        result = CliRunner().invoke(cli, ["sample", str(root), *args, path])
        assert result.exit_code == 0, result.output
        written[path] = {n: (root / n).read_bytes() for n in ("samples.tsv", "to_annotate.tsv")}
        _label(root)
    assert written["--in-memory"] == written["--out-of-core"]
    assert b"mixture_prob" in written["--out-of-core"]["samples.tsv"]
    root = tmp_path / "out-of-core"
    extra = ("--estimator", "ppi", "--intervals", "anytime", "--rank-by", "precision")
    memory = _score(root, tmp_path / "memory", *extra, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *extra)
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")


# ---------------------------------------------------------------------------------------------
# Spark


@pytest.mark.slow
@needs_spark
def test_spark_engine_ppi_anytime_writes_the_duckdb_output_set(tmp_path, monkeypatch):
    """``score --engine spark --estimator ppi --intervals anytime``: the stream's cells on Spark
    equal DuckDB's, so the output set does (one probability judge: the level keys' tables)."""
    import os

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = make_bundle(tmp_path / "b", rounds=4, teams=True)
    write_judge(root, "probability", missing=7)
    args = ("--estimator", "ppi", "--intervals", "anytime", "--rank-by", "precision")
    duck = _score(root, tmp_path / "duck", *args)
    assert duck.exit_code == 0, duck.output
    spark = _score(root, tmp_path / "spark", *args, "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    for name in (*CSVS, "judge.csv"):
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes()


@pytest.mark.slow
@needs_spark
def test_spark_ppi_look_draws_the_duckdb_round(tmp_path, monkeypatch):
    """``sample --until-decided --estimator ppi`` on Spark: DuckDB's round (several judges)."""
    import os

    from receval.bundle import Bundle
    from receval.engine.until_decided import until_decided_round

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = _judged_loop_bundle(tmp_path / "b", "several")
    rounds = [
        until_decided_round(
            Bundle(root), 30, seed=4, rank_by="precision", estimator="ppi", engine=name
        )
        for name in ("duckdb", "spark")
    ]
    assert rounds[0].decisions.open_pairs == rounds[1].decisions.open_pairs
    pd.testing.assert_frame_equal(rounds[1].samples, rounds[0].samples)
    pd.testing.assert_frame_equal(rounds[1].to_annotate, rounds[0].to_annotate)
