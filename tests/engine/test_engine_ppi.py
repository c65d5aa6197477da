"""``score --estimator ppi`` and the judge audit on the engine path (receval.engine.judge): the
judge table read with the loader's checks, every sum over the runs in SQL, and the same output
set as the in-memory path (judge.csv and run.json's judge blocks included)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_spark
from test_engine_score import CSVS, _same_output_sets, _score, make_bundle

GRADED = "[judge]\nscale = [0, 3]\n"
SEVERAL = "[judge]\nscale = [0, 3]\n\n[judge.scales]\nllm = [0, 1]\n"


def _pool(root: Path) -> pd.DataFrame:
    """The distinct (query_id, answer) of the bundle's runs, in a fixed order."""
    paths = sorted((root / "runs").glob("*.parquet")) or [root / "runs.parquet"]
    runs = pd.concat([pd.read_parquet(p) for p in paths])
    return runs[["query_id", "answer"]].drop_duplicates().reset_index(drop=True)


def write_judge(root: Path, kind: str, *, missing: int = 0, parquet: bool = False) -> None:
    """``judge.tsv`` (or ``.parquet``) scoring the pool's facts but the last ``missing``:
    ``probability`` (one judge in [0, 1], correlated with the labels' rule), ``graded`` (one
    judge on 0–3), ``several`` (a graded judge and a continuous probability judge, each
    missing a different share of the facts)."""
    facts = _pool(root)
    rng = np.random.default_rng(11)
    # the labels of make_bundle: wrong where MD5-ish key % 3 == 0; the judge sees it noisily
    from receval.engine.sampled import python_key

    pairs = zip(facts["query_id"], facts["answer"], strict=True)
    key = np.array([python_key(f"{q}{a}") for q, a in pairs])
    truth = (key % 3 != 0).astype(float)
    noisy = np.clip(0.3 + 0.4 * truth + rng.normal(0, 0.25, len(facts)), 0, 1)
    if kind == "probability":
        frame = facts.assign(judge_score=np.round(noisy, 3))
    elif kind == "graded":
        frame = facts.assign(judge_score=np.round(noisy * 3).astype(int))
    else:
        a = facts.assign(judge_score=np.round(noisy * 3).astype(int), judge="umbrela")
        b = facts.assign(judge_score=np.round(rng.random(len(facts)) * 0.5 + 0.5 * truth, 4))
        b = b.assign(judge="llm").iloc[::2]  # half the facts only
        frame = pd.concat([a.iloc[3:], b])
    if missing:
        frame = frame.iloc[: len(frame) - missing]
    if parquet:
        frame.to_parquet(root / "judge.parquet", index=False)
    else:
        frame.to_csv(root / "judge.tsv", sep="\t", index=False)


CASES = [
    ("probability", {}, {}, ()),
    ("probability", {"missing": 7}, {"rounds": 4, "teams": True}, ()),  # logistic recall map
    ("probability", {"parquet": True}, {"layout": "one-file"}, ("--target", "macro")),
    ("graded", {"missing": 5}, {"toml": GRADED}, ()),
    ("graded", {}, {"toml": GRADED, "rounds": 4, "pending": 2}, ("--allow-pending",)),
    ("several", {}, {"toml": SEVERAL}, ()),
    ("several", {"missing": 4}, {"toml": SEVERAL, "rounds": 3}, ("--method", "BCa")),
    ("several", {}, {"toml": SEVERAL, "units": "uniform"}, ("--precision-form", "ratio")),
    ("probability", {"missing": 7}, {"rounds": 4, "teams": True}, ("--cluster-queries",)),
    (
        "probability",
        {"parquet": True},
        {"layout": "one-file"},
        ("--cluster-queries", "--method", "basic"),
    ),
    ("several", {"missing": 4}, {"toml": SEVERAL, "rounds": 3}, ("--cluster-queries",)),
]


@pytest.mark.parametrize(("kind", "judge", "bundle", "extra"), CASES)
def test_engine_ppi_writes_the_in_memory_output_set(tmp_path, kind, judge, bundle, extra):
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
    assert record["judge"]["systems"] and record["judge_audit"]["judges"]


@pytest.mark.parametrize("estimator", ["joint", "simple"])
def test_a_judge_table_is_audited_on_the_engine_path_for_every_estimator(tmp_path, estimator):
    root = make_bundle(tmp_path / "b", toml=SEVERAL)
    write_judge(root, "several", missing=3)
    memory = _score(root, tmp_path / "memory", "--estimator", estimator, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", "--estimator", estimator)
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    got, want = (d / "judge.csv" for d in (tmp_path / "engine", tmp_path / "memory"))
    assert got.read_bytes() == want.read_bytes()


def test_engine_ppi_never_loads_the_task(tmp_path, monkeypatch):
    import receval.bundle.runs
    import receval.task
    from receval import api

    root = make_bundle(tmp_path / "b", toml=SEVERAL)
    write_judge(root, "several")

    def refuse(*args, **kwargs):
        raise AssertionError("the engine path loaded the task")

    monkeypatch.setattr(receval.task, "load_task", refuse)
    monkeypatch.setattr(receval.task.Task, "from_frames", refuse)
    monkeypatch.setattr(receval.bundle.runs, "_run_frame", refuse)
    result = api.score(root, estimator="ppi", bootstrap=100, seed=1, out_of_core=True)
    assert result.run.extra["engine_path"]["engine"] == "duckdb"
    assert result.judge_audit is not None and len(result.leaderboard) == 4


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("q1\tdoc 1\t4\tumbrela", "is outside [0, 3]"),
        ("q1\tdoc 1\t1.5\tllm", "is outside [0, 1]"),
        ("q1\tdoc 1\t2\tumbrela\nq1\t DOC 1\t1\tumbrela", "already has judge_score 2.0"),
    ],
)
def test_bad_judge_grades_are_the_loaders_error_lines_on_the_engine_path(tmp_path, line, problem):
    root = make_bundle(tmp_path / "b", rounds=1, toml=SEVERAL)
    text = "query_id\tanswer\tjudge_score\tjudge\nq0\tdoc 2\t1\tumbrela\n" + line + "\n"
    (root / "judge.tsv").write_text(text, encoding="utf-8")
    errors = []
    for path in ("--in-memory", "--out-of-core"):
        result = _score(root, tmp_path / path[2:], "--estimator", "ppi", path=path)
        assert result.exit_code == 2, result.output
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output
        assert problem in lines[0]
        errors.append(lines[0])
    assert errors[0] == errors[1], errors  # the same line, the fact numbered as the loader does
    assert f"judge.tsv:{text.count(chr(10))}: " in errors[0]


def test_engine_ppi_without_a_judge_table_is_the_in_memory_error(tmp_path):
    root = make_bundle(tmp_path / "b", rounds=1)
    outputs = []
    for path in ("--in-memory", "--out-of-core"):
        result = _score(root, tmp_path / path[2:], "--estimator", "ppi", path=path)
        assert result.exit_code == 2, result.output
        outputs.append(result.output)
    assert outputs[0] == outputs[1] and "judge.tsv" in outputs[0]


@pytest.mark.slow
@needs_spark
def test_spark_engine_ppi_writes_the_duckdb_output_set(tmp_path, monkeypatch):
    """``score --engine spark --estimator ppi``: the judge's sums on Spark equal DuckDB's."""
    import os

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = make_bundle(tmp_path / "b", toml=SEVERAL, teams=True)
    write_judge(root, "several", missing=4)
    duck = _score(root, tmp_path / "duck", "--estimator", "ppi")
    assert duck.exit_code == 0, duck.output
    spark = _score(root, tmp_path / "spark", "--estimator", "ppi", "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    for name in (*CSVS, "judge.csv"):
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes()


@pytest.mark.slow
@needs_spark
def test_spark_engine_ppi_with_classes_writes_the_duckdb_output_set(tmp_path, monkeypatch):
    """``score --engine spark --estimator ppi`` with classes of aliases and several judges (the
    self-join without the classed facts, their terms and calibration grades from the small
    tables): DuckDB's output set."""
    import os

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = with_aliases(make_bundle(tmp_path / "b", toml=SEVERAL, rounds=3))
    write_judge(root, "several", missing=4)
    duck = _score(root, tmp_path / "duck", "--estimator", "ppi")
    assert duck.exit_code == 0, duck.output
    spark = _score(root, tmp_path / "spark", "--estimator", "ppi", "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    for name in (*CSVS, "judge.csv"):
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("several", [False, True])
def test_engine_ppi_of_a_judged_kbp_sim_is_the_in_memory_output_set(tmp_path, several):
    """data/kbp-sim (50 exhaustive units, 140,985 run rows) as per-system Parquet runs with a
    judge on its pool (a probability judge; or it and a graded 0–3 judge, each missing some
    facts): the same output set with ``--estimator ppi``, judge.csv included."""
    import hashlib
    import shutil

    root = tmp_path / "kbp"
    shutil.copytree(Path(__file__).parents[2] / "data" / "kbp-sim", root)
    (root / "truth.tsv").unlink()
    queries = pd.read_csv(root / "queries.tsv", sep="\t", dtype=str)
    queries[["query_id"]].to_csv(root / "queries.tsv", sep="\t", index=False)
    runs = pd.read_csv(root / "runs.tsv", sep="\t", dtype=str, keep_default_na=False)
    (root / "runs.tsv").unlink()
    (root / "runs").mkdir()
    for system, part in runs.groupby("system"):
        part.drop(columns="system").to_parquet(root / "runs" / f"{system}.parquet", index=False)
    from receval.config import load_config
    from receval.task import normalize_answers

    matching = load_config(root / "task.toml", default_name="kbp").matching
    runs["answer"] = normalize_answers(runs["answer"], matching)  # one score per fact
    facts = runs[["query_id", "answer"]].drop_duplicates().reset_index(drop=True)
    digest = [hashlib.md5(f"{q}\x1f{a}".encode()).hexdigest() for q, a in facts.itertuples(False)]
    score = np.array([int(d[:4], 16) / 65535 for d in digest])
    judge = facts.assign(judge_score=np.round(score, 4)).iloc[5:]
    if several:
        graded = facts.assign(judge_score=np.array([int(d[4], 16) % 4 for d in digest]))
        judge = pd.concat([judge.assign(judge="p"), graded.iloc[::3].assign(judge="g")])
        toml = (root / "task.toml").read_text(encoding="utf-8")
        scales = "\n[judge]\nscale = [0, 3]\n\n[judge.scales]\np = [0, 1]\n"
        (root / "task.toml").write_text(toml + scales, encoding="utf-8")
    judge.to_csv(root / "judge.tsv", sep="\t", index=False)
    memory = _score(root, tmp_path / "memory", "--estimator", "ppi", path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", "--estimator", "ppi")
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    got, want = (d / "judge.csv" for d in (tmp_path / "engine", tmp_path / "memory"))
    assert got.read_bytes() == want.read_bytes()


def test_engine_ppi_in_query_slices_writes_the_same_output_set(tmp_path, monkeypatch):
    """The judge's sums streamed in slices of the pool's facts and the systems' distinct
    facts gathered in batches of systems (a large pool): the in-memory output set."""
    import receval.engine.judge as engine_judge
    import receval.engine.judge_stream as stream

    root = make_bundle(tmp_path / "b", toml=SEVERAL)
    write_judge(root, "several", missing=4)
    memory = _score(root, tmp_path / "memory", "--estimator", "ppi", path="--in-memory")
    assert memory.exit_code == 0, memory.output
    monkeypatch.setattr(engine_judge, "PAIRS_PER_SLICE", 40)
    monkeypatch.setattr(stream, "PAIRS_PER_SLICE", 40)
    engine = _score(root, tmp_path / "engine", "--estimator", "ppi")
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    got, want = (d / "judge.csv" for d in (tmp_path / "engine", tmp_path / "memory"))
    assert got.read_bytes() == want.read_bytes()


def with_aliases(root: Path) -> Path:
    """``root``'s judgments with classes (:func:`test_engine_classes.with_classes`: a query's
    correct judged facts in two classes of aliases several systems output) and, per class of
    the first query, one more correct spelling that no system output (a class's canonical fact
    may then be a string the runs never hold)."""
    from test_engine_classes import with_classes

    with_classes(root)
    judgments = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str, keep_default_na=False)
    named = judgments[judgments["equivalence_class"] != ""]
    first = named[named["query_id"] == named["query_id"].iloc[0]].drop_duplicates(
        "equivalence_class"
    )
    extra = first.assign(answer=["a " + c for c in first["equivalence_class"]])
    pd.concat([judgments, extra]).to_csv(root / "judgments.tsv", sep="\t", index=False)
    return root


CLASS_CASES = [
    ("probability", {"missing": 9}, {}, ()),
    ("probability", {}, {"rounds": 4, "teams": True}, ("--target", "macro")),
    ("probability", {"missing": 3}, {"units": "uniform"}, ("--precision-form", "ratio")),
    ("probability", {}, {"rounds": 3}, ("--method", "BCa")),
    ("graded", {"missing": 5}, {"toml": GRADED}, ("--precision-form", "ratio")),
    ("graded", {}, {"toml": GRADED, "rounds": 3, "teams": True}, ("--target", "macro")),
    ("several", {"missing": 4}, {"toml": SEVERAL, "rounds": 3}, ()),
    ("several", {}, {"toml": SEVERAL, "units": "uniform"}, ("--method", "BCa")),
    ("probability", {"missing": 3}, {"rounds": 3}, ("--cluster-queries",)),
    ("graded", {}, {"toml": GRADED, "rounds": 3, "teams": True}, ("--cluster-queries",)),
]


@pytest.mark.parametrize(("kind", "judge", "bundle", "extra"), CLASS_CASES)
def test_engine_ppi_with_equivalence_classes_writes_the_in_memory_output_set(
    tmp_path, kind, judge, bundle, extra
):
    """Classes of aliases (several spellings in one class, the judge scoring all of them, some,
    or none; a spelling no system output): the judge's sums over the canonical facts as the
    in-memory path takes them, the same output set."""
    root = with_aliases(make_bundle(tmp_path / "b", **bundle))
    write_judge(root, kind, **judge)
    args = ("--estimator", "ppi", *extra)
    memory = _score(root, tmp_path / "memory", *args, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *args, path="--out-of-core")
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    got, want = (d / "judge.csv" for d in (tmp_path / "engine", tmp_path / "memory"))
    assert got.read_bytes() == want.read_bytes()
    record = json.loads((tmp_path / "engine" / "run.json").read_text())
    assert record["judge"]["systems"]


def test_rounds_drawn_by_judge_are_refused_on_the_engine_path(tmp_path):
    root = make_bundle(tmp_path / "b", rounds=1)
    write_judge(root, "probability")
    samples = pd.read_csv(root / "samples.tsv", sep="\t", dtype=str, keep_default_na=False)
    samples["design"] = "judge-uncertainty"
    samples.to_csv(root / "samples.tsv", sep="\t", index=False)
    result = _score(root, tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "rounds drawn --by-judge" in result.output


def test_the_judge_is_staged_where_spark_executors_read_it(tmp_path):
    """On Spark the staged judge table sits in the bundle's folder (shared storage on a
    cluster), elsewhere — or when that folder is read-only — in the system's temporary folder."""
    import os
    from types import SimpleNamespace

    from receval.engine.judge import staging_dir

    bundle = SimpleNamespace(root=tmp_path)
    assert staging_dir(bundle, SimpleNamespace(name="spark")) == tmp_path
    assert staging_dir(bundle, SimpleNamespace(name="duckdb")) is None
    assert staging_dir(bundle, "spark") == tmp_path
    tmp_path.chmod(0o555)
    try:
        if not os.access(tmp_path, os.W_OK):  # root may write anyway
            assert staging_dir(bundle, "spark") is None
    finally:
        tmp_path.chmod(0o755)


@pytest.mark.parametrize(("target", "options"), [("micro", {}), ("macro", {"teams": True})])
def test_streamed_pool_sums_equal_the_self_join(tmp_path, monkeypatch, target, options):
    """The judge's pool sums streamed by slices of the numbered pool
    (receval.engine.judge_stream) equal the self-join's (pair_sums), every map and every sum."""
    import receval.engine.judge_stream as stream
    from receval.bundle import Bundle
    from receval.engine.judge import open_engine_judge
    from receval.engine.sampled_data import engine_sample_data, read_small_tables
    from receval.engine.score import summarise_bundle

    root = make_bundle(tmp_path / "b", toml=SEVERAL, rounds=3, **options)
    write_judge(root, "several", missing=4)
    bundle = Bundle(root)
    small = read_small_tables(bundle)
    summary = summarise_bundle(bundle, small, "duckdb")
    judge = open_engine_judge(bundle, small, summary, "duckdb")
    assert judge.numbered > 0
    data = engine_sample_data(small, summary, target)
    raw = judge.key_scores()
    values = np.vstack([raw, raw**2, 1 - raw])
    monkeypatch.setattr(stream, "PAIRS_PER_SLICE", 30)  # many slices
    got = judge.pool_sums(data, target, values)
    want = judge._joined_sums(data, target, values)
    for name in ("g1", "pm", "gs", "ps", "jp", "scored"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=name)
    assert got.g1.sum() > 0 and got.ps.sum() > 0
