"""``score`` on the engine path (receval.engine.score): the same output set as the in-memory
path, from SQL aggregates over Parquet runs, never loading the task."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_spark

from receval.bundle import Bundle
from receval.engine.sampled import python_key, sample_round

CSVS = ("leaderboard.csv", "pool.csv", "conflicts.csv", "per_query.csv", "annotation.csv",
        "pooling_bias.csv", "agreement.csv")  # fmt: skip


def _runs(seed: int = 0, teams: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for system in ("A", "B", "C", "D"):
        for q in range(6):
            docs = rng.choice(30, size=8 + q, replace=False)
            rows += [(system, f"q{q}", f" Doc  {d}" if d % 4 else f"doc {d}") for d in docs]
    frame = pd.DataFrame(rows, columns=["system", "query_id", "answer"])
    if teams:
        frame["team"] = frame["system"].map({"A": "t1", "B": "t1", "C": "t2", "D": "t3"})
    return frame


def make_bundle(root: Path, *, layout: str = "per-system", rounds: int = 2, pending: int = 0,
                teams: bool = False, duplicates: bool = False, toml: str = "",
                units: str = "", topup: bool = False, floor: bool = False) -> Path:  # fmt: skip
    """A small Parquet bundle with ``rounds`` uniform rounds labelled from a synthetic truth
    (two annotators who disagree now and then); ``pending`` facts left unlabelled; ``units``
    (:func:`_write_units`) exhaustive units; ``topup``: a last round for systems B and D only
    (``--intervals auto`` then resolves to anytime); ``floor``: a last round drawn as
    ``--until-decided`` draws (floor draws with ``mixture_prob``, random order)."""
    runs = _runs(teams=teams)
    if duplicates:
        runs = pd.concat([runs, runs.iloc[::7].assign(answer=lambda f: f["answer"].str.upper())])
    root.mkdir(parents=True)
    pd.DataFrame({"query_id": [f"q{q}" for q in range(7)]}).to_csv(
        root / "queries.tsv", sep="\t", index=False
    )
    if toml:
        (root / "task.toml").write_text(toml, encoding="utf-8")
    if layout == "per-system":
        (root / "runs").mkdir()
        for system, part in runs.groupby("system"):
            part.drop(columns="system").to_parquet(root / "runs" / f"{system}.parquet", index=False)
    else:
        runs.to_parquet(root / "runs.parquet", index=False)
    bundle = Bundle(root)
    for seed in range(rounds):
        bundle.record_round(sample_round(bundle, 6, seed=seed + 1))
    if topup:
        bundle.record_round(sample_round(bundle, 5, seed=9, systems=["B", "D"]))
    if floor:
        from receval.until_decided import fixed_round

        bundle.record_round(fixed_round(bundle.load(), 16, seed=4, weights=np.array([1, 3, 1, 2])))
    todo = pd.read_csv(root / "to_annotate.tsv", sep="\t", dtype=str)
    todo = todo.iloc[: len(todo) - pending]
    key = np.array(
        [python_key(f"{q}{a}") for q, a in zip(todo["query_id"], todo["answer"], strict=True)]
    )
    first = np.where(key % 3 == 0, "W", "C")
    second = np.where(key % 7 == 0, np.where(first == "C", "W", "C"), first)
    rows = pd.concat(
        [
            todo.assign(label=first, annotator="a1"),
            todo.iloc[::2].assign(label=second[::2], annotator="a2"),
        ]
    )
    rows[["query_id", "answer", "label", "annotator"]].to_csv(
        root / "judgments.tsv", sep="\t", index=False
    )
    if units:
        _write_units(root, units)
    return root


def _write_units(root: Path, kind: str) -> None:
    """Exhaustive units whose facts are pooled or not, spelled as the runs spell them or not,
    some found in two units and one unit found empty; ``kind`` ``uniform``, ``prob``
    (inclusion probabilities) or ``documents`` (each fact's multiplicity d(x))."""
    units = pd.DataFrame({"unit": [f"d{u}" for u in range(6)]})
    if kind == "prob":
        units["prob"] = [0.5, 0.25, 0.5, 0.8, 0.1, 0.4]
    units.to_csv(root / "exhaustive_units.tsv", sep="\t", index=False)
    rows = [(f"d{u}", f"q{(u + k) % 7}", f"DOC {(7 * u + 3 * k) % 34}") for u in range(5)
            for k in range(u + 2)]  # fmt: skip
    rows += [("d0", "q1", "doc 1"), ("d3", "q1", " Doc  1")]  # one fact in two units
    facts = pd.DataFrame(rows, columns=["unit", "query_id", "answer"])
    if kind == "documents":
        facts["documents"] = [1 + i % 3 for i in range(len(facts))]
    facts.to_csv(root / "exhaustive.tsv", sep="\t", index=False)


def _score(root: Path, out: Path, *extra: str, path: str = "--out-of-core"):
    from click.testing import CliRunner

    from receval.cli import cli

    args = ["score", str(root), "--out", str(out), "--no-report", "--quiet", "--bootstrap", "200",
            "--seed", "3", path, *extra]  # fmt: skip
    return CliRunner().invoke(cli, args)


def _same_output_sets(memory: Path, engine: Path) -> None:
    for name in CSVS:  # conflicts.csv's fact ids too: numbered as the loader numbers facts
        assert (engine / name).read_bytes() == (memory / name).read_bytes(), name
    want = json.loads((memory / "run.json").read_text())
    got = json.loads((engine / "run.json").read_text())
    assert got.pop("engine_path")["rows"] > 0
    for record in (want, got):
        record.pop("created")
    assert got == want


@pytest.mark.parametrize(
    ("options", "extra"),
    [
        ({}, ()),
        ({"teams": True, "duplicates": True, "layout": "one-file"}, ()),
        ({"pending": 3}, ("--allow-pending", "--target", "macro")),
        ({}, ("--cluster-queries", "--method", "basic", "--estimator", "simple")),
        ({}, ("--method", "BCa", "--tiers", "holm")),
        ({"toml": '[official]\nunjudged = "wrong"\n'}, ("--rank-by", "precision")),
        ({"units": "uniform"}, ("--rank-by", "recall")),
        ({"units": "prob", "teams": True, "layout": "one-file"}, ("--cluster-queries",)),
        ({"units": "documents", "pending": 2}, ("--allow-pending", "--target", "macro")),
        ({"units": "uniform", "topup": True}, ()),  # auto: anytime
        ({"topup": True, "teams": True}, ("--intervals", "anytime-asymptotic", "--rank-by", "f1")),
        ({"units": "prob"}, ("--intervals", "anytime", "--target", "macro")),
        ({"layout": "one-file"}, ("--intervals", "anytime", "--estimator", "simple")),
        ({"floor": True, "units": "uniform"}, ()),  # an --until-decided round: anytime
        (
            {"floor": True, "teams": True},
            ("--intervals", "anytime-asymptotic", "--target", "macro"),
        ),
    ],
)
def test_engine_score_writes_the_in_memory_output_set(tmp_path, options, extra):
    root = make_bundle(tmp_path / "b", **options)
    memory = _score(root, tmp_path / "memory", *extra, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *extra)
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")


def test_engine_score_never_loads_the_task(tmp_path, monkeypatch):
    """The engine path neither loads the task nor reads an output row into Python."""
    import receval.bundle.runs
    import receval.task
    from receval import api

    root = make_bundle(tmp_path / "b")

    def refuse(*args, **kwargs):
        raise AssertionError("the engine path loaded the task")

    monkeypatch.setattr(receval.task, "load_task", refuse)
    monkeypatch.setattr(receval.task.Task, "from_frames", refuse)
    monkeypatch.setattr(receval.bundle.runs, "_run_frame", refuse)
    result = api.score(root, bootstrap=100, seed=1, out_of_core=True)
    assert result.run.extra["engine_path"]["engine"] == "duckdb"
    assert len(result.leaderboard) == 4


@pytest.mark.parametrize(
    ("column", "problem"), [("answer", "missing required column answer"), ("query_id", "has type")]
)
def test_a_bad_parquet_run_is_one_error_line_naming_the_file(tmp_path, column, problem):
    root = make_bundle(tmp_path / "b", rounds=1)
    bad = root / "runs" / "B.parquet"
    frame = pd.read_parquet(bad)
    if problem.startswith("missing"):
        frame = frame.drop(columns=column)
    else:
        frame[column] = 1.5
    frame.to_parquet(bad, index=False)
    result = _score(root, tmp_path / "out")
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(bad) in lines[0], (
        result.output
    )
    assert problem in lines[0]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (("--estimator", "official"), "--estimator official"),
        (("--weighting", "overlap"), "--weighting overlap"),
        (("--target-recall", "0.5"), "--target-recall"),
        (("--estimator", "ppi"), "--estimator ppi"),
    ],
)
def test_engine_path_refuses_what_it_cannot_score_naming_the_option(tmp_path, extra, named):
    root = make_bundle(tmp_path / "b", rounds=1)
    result = _score(root, tmp_path / "out", *extra)
    assert result.exit_code == 2 and named in result.output, result.output


def test_text_runs_are_refused_out_of_core_and_scored_in_memory_by_default(tmp_path):
    root = make_bundle(tmp_path / "b", rounds=1, layout="one-file")
    pd.read_parquet(root / "runs.parquet").to_csv(root / "runs.tsv", sep="\t", index=False)
    (root / "runs.parquet").unlink()
    assert "Parquet" in _score(root, tmp_path / "o1").output
    result = _score(root, tmp_path / "o2", path="--quiet")
    assert result.exit_code == 0, result.output
    assert "engine_path" not in json.loads((tmp_path / "o2" / "run.json").read_text())


def _partitioned(root: Path) -> Path:
    """``root`` with its runs moved to a dataset partitioned by system
    (``runs/system=<name>/part-0.parquet``)."""
    for path in sorted((root / "runs").glob("*.parquet")):
        folder = root / "runs" / f"system={path.stem}"
        folder.mkdir()
        path.rename(folder / "part-0.parquet")
    return root


@pytest.mark.slow
@needs_spark
@pytest.mark.parametrize(
    "layout",
    [
        {"teams": True},
        {"teams": True, "duplicates": True, "layout": "one-file"},
        {"partitioned": True},
        {"units": "documents", "teams": True, "topup": True},  # anytime: popularity strata
    ],
)
def test_spark_engine_score_writes_the_duckdb_output_set(tmp_path, monkeypatch, layout):
    """``score --engine spark --out-of-core``: Spark reads the Parquet runs (one scan of the
    like files, each file's system from its path) and runs the same three aggregations; the
    output set equals DuckDB's, for one file per system, one file with a team column and
    duplicate answers, a dataset partitioned by system, and exhaustive units with a top-up
    round (true recall; ``auto`` intervals resolving to anytime, whose popularity strata Spark
    aggregates in one query)."""
    import os

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    options = dict(layout)
    partitioned = options.pop("partitioned", False)
    root = make_bundle(tmp_path / "b", **options)
    if partitioned:
        _partitioned(root)
    duck = _score(root, tmp_path / "duck")
    assert duck.exit_code == 0, duck.output
    spark = _score(root, tmp_path / "spark", "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    for name in CSVS:
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes()


@pytest.mark.parametrize("teams", [False, True])
def test_engine_score_in_batches_writes_the_same_output_set(tmp_path, monkeypatch, teams):
    """Pool facts and memberships one run file per batch, the pool merged in slices (two parts
    per slice): the in-memory output set, with and without named teams."""
    import receval.engine.summary as summary

    root = make_bundle(tmp_path / "b", teams=teams)
    memory = _score(root, tmp_path / "memory", path="--in-memory")
    assert memory.exit_code == 0, memory.output
    monkeypatch.setattr(summary, "BATCH_SYSTEMS", 1)
    monkeypatch.setattr(summary, "BATCH_FACTS", 2)
    engine = _score(root, tmp_path / "engine")
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")


def test_system_batches_cut_by_width_and_facts():
    from receval.engine.summary import system_batches

    cells = pd.DataFrame({"system": ["A", "A", "B", "C", "D"], "facts": [3, 3, 2, 9, 1]})
    systems = ["A", "B", "C", "D", "E"]
    assert system_batches(cells, systems, facts=8, width=2) == [["A", "B"], ["C"], ["D", "E"]]
    assert system_batches(cells, systems, facts=100, width=10) == [systems]


def test_merge_slices_count_distinct_facts_not_parts():
    """Many parts of few facts (each batch repeats a fact): the merge is cut by the distinct
    facts (HyperLogLog + 25 %), never into more slices than by parts."""
    from receval.engine.base import connect
    from receval.engine.summary import merge_slices

    engine = connect("duckdb", on_disk=True)
    try:
        engine.create_table(
            "pool_parts",
            "SELECT range % 10 AS q, range % 7 AS a, 1 AS lo, 1 AS hi FROM range(7000)",
        )
        assert merge_slices(engine, facts=20) == 5  # 70 facts (+25 %: 87) by 20, not 350
        assert merge_slices(engine, facts=10_000) == 1
        engine.con.execute("DROP TABLE pool_parts")
        engine.create_table(
            "pool_parts", "SELECT range AS q, 0 AS a, 1 AS lo, 1 AS hi FROM range(100)"
        )
        assert merge_slices(engine, facts=10) == 10  # by parts (100 / 10), not 125 / 10
    finally:
        engine.close()


@pytest.mark.parametrize("teams", [False, True])
def test_register_runs_says_whether_a_file_has_teams(tmp_path, teams):
    from receval.engine.base import connect
    from receval.engine.sampled import register_runs

    root = make_bundle(tmp_path / "b", teams=teams)
    engine = connect("duckdb")
    try:
        register_runs(engine, Bundle(root).parquet_runs(), strip=True)
        assert engine.run_teams is teams
    finally:
        engine.close()


@pytest.mark.slow
def test_engine_score_of_kbp_sim_with_exhaustive_units_is_the_in_memory_output_set(tmp_path):
    """data/kbp-sim (50 exhaustive units, 140,985 run rows) as per-system Parquet runs, without
    what the engine path does not read (truth.tsv; queries' slots): the same output set, true
    recall θ̂·ν̂ included."""
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
    memory = _score(root, tmp_path / "memory", path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine")
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    pool = pd.read_csv(tmp_path / "engine" / "pool.csv").set_index("quantity")
    assert pool.loc["exhaustive_units", "estimate"] == 50


def test_at_size_the_default_takes_the_engine_path_or_says_why_not(tmp_path, monkeypatch):
    """From ENGINE_PATH_ROWS Parquet rows on, ``score`` without --out-of-core/--in-memory takes
    the engine path when it can (exhaustive units and anytime intervals included), and
    otherwise scores in memory with a warning naming what the engine path cannot score."""
    import receval.engine.score as engine_score

    monkeypatch.setattr(engine_score, "ENGINE_PATH_ROWS", 10)
    root = make_bundle(tmp_path / "b", units="uniform", topup=True)
    taken = _score(root, tmp_path / "taken", path="--quiet")
    assert taken.exit_code == 0, taken.output
    record = json.loads((tmp_path / "taken" / "run.json").read_text())
    assert record["engine_path"]["rows"] > 0
    assert not any("scored in memory" in w for w in record["warnings"])
    skipped = _score(root, tmp_path / "skipped", "--weighting", "overlap", path="--quiet")
    assert skipped.exit_code == 0, skipped.output
    record = json.loads((tmp_path / "skipped" / "run.json").read_text())
    assert "engine_path" not in record
    (warning,) = [w for w in record["warnings"] if "scored in memory" in w]
    assert "--weighting overlap" in warning and "Parquet rows" in warning


def test_a_floor_probability_no_design_gives_is_the_same_error_on_both_paths(tmp_path):
    """An ``--until-decided`` round whose recorded ``mixture_prob`` the design cannot give:
    the engine path checks it from the drawn facts' memberships, with the in-memory message."""
    root = make_bundle(tmp_path / "b", floor=True)
    samples = pd.read_csv(root / "samples.tsv", sep="\t", dtype=str, keep_default_na=False)
    row = samples.index[samples["mixture_prob"] != ""][0]
    samples.loc[row, "mixture_prob"] = str(float(samples.loc[row, "mixture_prob"]) * 1.5)
    samples.to_csv(root / "samples.tsv", sep="\t", index=False)
    errors = []
    for path in ("--in-memory", "--out-of-core"):
        result = _score(root, tmp_path / path[2:], "--intervals", "anytime", path=path)
        assert result.exit_code == 2, result.output
        errors.append(result.output.strip())
    assert errors[0] == errors[1] and "disagrees with the floor mixture" in errors[0]
