"""The Bundle: the lock (library and CLI alike), the engine's sampled path (same draws on every
file layout), a killed round, Parquet schema errors, DuckDB bounded by default."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_spark

from receval.bundle import Bundle, bundle_lock
from receval.engine.sampled import python_key, sample_round
from receval.errors import BundleError
from receval.task import load_task

ROOT = Path(__file__).resolve().parents[1]
LAYOUTS = ("tsv", "parquet", "dataset", "per-system", "partitioned")


def _runs(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for system in ("A", "B", "C"):
        for q in range(5):
            docs = rng.choice(40, size=12 + q, replace=False)
            rows += [(system, f"q{q}", f" Doc  {d}") for d in docs]
    return pd.DataFrame(rows, columns=["system", "query_id", "answer"])


def write_bundle(root: Path, layout: str, runs: pd.DataFrame | None = None) -> Path:
    """A small bundle whose runs are in ``layout``: one TSV, one Parquet file, a dataset folder
    of shuffled parts, one Parquet file per system, or ``runs/system=<name>/`` partitions."""
    runs = _runs() if runs is None else runs
    root.mkdir(parents=True)
    pd.DataFrame({"query_id": [f"q{q}" for q in range(5)]}).to_csv(
        root / "queries.tsv", sep="\t", index=False
    )
    if layout == "tsv":
        runs.to_csv(root / "runs.tsv", sep="\t", index=False)
    elif layout == "parquet":
        runs.to_parquet(root / "runs.parquet", index=False)
    elif layout == "dataset":
        (root / "runs.parquet").mkdir()
        shuffled = runs.sample(frac=1, random_state=1)
        for i in range(3):
            shuffled.iloc[i::3].to_parquet(root / "runs.parquet" / f"part-{i}.parquet", index=False)
    elif layout == "per-system":
        (root / "runs").mkdir()
        for system, rows in runs.groupby("system"):
            rows.drop(columns="system").to_parquet(root / "runs" / f"{system}.parquet", index=False)
    else:
        for system, rows in runs.groupby("system"):
            folder = root / "runs" / f"system={system}"
            folder.mkdir(parents=True)
            rows.drop(columns="system").to_parquet(folder / "part-0.parquet", index=False)
    return root


def test_draws_are_the_same_on_every_layout(tmp_path):
    """The same seed draws the same facts (and lists the same ones to annotate) whether the
    runs are a TSV, one Parquet file, a dataset folder of parts or per-system files."""
    rounds = {
        layout: sample_round(Bundle(write_bundle(tmp_path / layout, layout)), 6, seed=3)
        for layout in LAYOUTS
    }
    first = rounds["tsv"]
    assert len(first.samples) == 18 and first.sizes == {"A": 6, "B": 6, "C": 6}
    for drawn in rounds.values():
        pd.testing.assert_frame_equal(drawn.samples, first.samples)
        pd.testing.assert_frame_equal(drawn.to_annotate, first.to_annotate)
    other = sample_round(Bundle(tmp_path / "parquet"), 6, seed=4)
    assert not other.samples.equals(first.samples)


def test_an_engine_round_records_loads_and_continues(tmp_path):
    """Recorded, the round loads (its probabilities are the uniform design's 1/|X_j|); the next
    round gets the next name and lists the unlabelled facts of both rounds."""
    bundle = Bundle(write_bundle(tmp_path / "b", "dataset"))
    drawn = sample_round(bundle, 5, seed=1)
    bundle.record_round(drawn)
    task = load_task(bundle.root)
    assert {s.design for s in task.samplers} == {"uniform"}
    sizes = task.outputs.groupby("system", observed=True).size()
    want = 1.0 / sizes.reindex(task.samples["system"]).to_numpy()
    np.testing.assert_allclose(task.samples["prob"].to_numpy(float), want)
    again = sample_round(bundle, 5, seed=1)
    assert again.name == "round-2"
    assert set(drawn.to_annotate["answer"]) <= set(again.to_annotate["answer"])


def test_draw_probability_is_uniform():
    """u(seed, round, system, d) is uniform: the mean of 2,000 keys is ½ within 4 SE."""
    from receval.engine.sampled import draw_uniform

    u = draw_uniform(7, 1, "A", 2000)
    assert abs(u.mean() - 0.5) < 4 * np.sqrt(1 / 12 / 2000)
    assert ((u >= 0) & (u < 1)).all()
    assert python_key("a") == 0x0CC175B9C0F1B6A


@pytest.mark.parametrize(
    ("frame", "problem"),
    [
        (pd.DataFrame({"system": ["A"], "query_id": ["q1"]}), "missing required column answer"),
        (
            pd.DataFrame({"system": ["A"], "query_id": ["q1"], "answer": [1.5]}),
            "column answer has type double",
        ),
    ],
)
def test_a_bad_parquet_part_names_the_file(tmp_path, frame, problem):
    root = write_bundle(tmp_path / "b", "dataset")
    bad = root / "runs.parquet" / "part-9.parquet"
    frame.to_parquet(bad, index=False)
    with pytest.raises(BundleError) as err:
        sample_round(Bundle(root), 2, seed=1)
    assert str(bad) in str(err.value) and problem in str(err.value)


def test_listing_a_text_runs_table_does_not_read_it(tmp_path, monkeypatch):
    """Bundle.run_files lists runs.tsv without parsing it (the loader parses it, once)."""
    import receval.bundle.sources as sources

    root = write_bundle(tmp_path / "b", "tsv")
    calls = []
    monkeypatch.setattr(sources, "_read_run_table", lambda *a: calls.append(a))
    assert list(Bundle(root).run_files()) == ["runs"]
    assert Bundle(root).parquet_runs() is None
    assert calls == []


def test_the_lock_is_reentrant_in_one_thread(tmp_path):
    root = write_bundle(tmp_path / "b", "tsv")
    with bundle_lock(root, 1.0), bundle_lock(root, 1.0):
        Bundle(root, lock_timeout=1.0).append("judgments", _votes("x", 1))
    assert len(pd.read_csv(root / "judgments.tsv", sep="\t")) == 1


def _votes(annotator: str, n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"query_id": "q0", "answer": [f"doc {i}" for i in range(n)], "label": "C"}
    ).assign(annotator=annotator)


_WRITER = """
import sys, pandas as pd
from receval.bundle import Bundle
bundle = Bundle(sys.argv[1])
for i in range(15):
    bundle.append("judgments", pd.DataFrame(
        {"query_id": ["q0"], "answer": [f"{sys.argv[2]} {i}"], "label": ["C"],
         "annotator": [sys.argv[2]]}))
"""


def test_two_writers_at_once_lose_nothing(tmp_path):
    """Two processes appending through the library at once: every row of both lands."""
    root = write_bundle(tmp_path / "b", "tsv")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(root), who], env=env)
        for who in ("a", "b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    votes = pd.read_csv(root / "judgments.tsv", sep="\t")
    assert len(votes) == 30 and sorted(votes["annotator"].value_counts()) == [15, 15]


_KILLED = """
import sys, time
import receval.engine.draws as drawing
import receval.engine.sampled as sampled
from receval.bundle import Bundle
real = drawing.pick_draws
def slow(*args, **kwargs):
    out = real(*args, **kwargs)
    print("drawn", flush=True)
    time.sleep(60)
    return out
drawing.pick_draws = slow
bundle = Bundle(sys.argv[1])
with bundle.lock():
    bundle.record_round(sampled.sample_round(bundle, 3, seed=1))
"""


def test_a_round_killed_midway_leaves_the_bundle_as_it_was(tmp_path):
    """A round killed while it holds the lock: every file as before, and the lock is free."""
    root = write_bundle(tmp_path / "b", "parquet")
    bundle = Bundle(root, lock_timeout=5.0)
    bundle.record_round(sample_round(bundle, 2, seed=0))
    before = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED, str(root)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "drawn"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    after = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    assert after == before
    start = time.monotonic()
    with bundle.lock(timeout=5.0):
        assert time.monotonic() - start < 5.0


def test_duckdb_is_bounded_and_cleans_its_spill_folder(monkeypatch):
    from receval.engine.base import DuckDBEngine, default_memory_limit

    monkeypatch.delenv("RECEVAL_DUCKDB_MEMORY_LIMIT", raising=False)
    limit = default_memory_limit()
    assert limit.endswith("MB") and 256 <= int(limit[:-2]) <= 1024
    engine = DuckDBEngine()
    spill = Path(engine.con.execute("SELECT current_setting('temp_directory')").fetchone()[0])
    got = engine.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert spill.is_dir() and got != ""
    engine.close()
    assert not spill.exists()
    monkeypatch.setenv("RECEVAL_DUCKDB_MEMORY_LIMIT", "300MB")
    assert default_memory_limit() == "300MB"


def test_cli_sample_engine(tmp_path):
    """``sample --engine duckdb`` records the engine's round; --adaptive --by-judge (planned on
    the engine since the judge designs moved there) without a judge table: one line naming
    judge.tsv."""
    from click.testing import CliRunner

    from receval.cli import cli

    root = write_bundle(tmp_path / "b", "per-system")
    args = ["sample", str(root), "--per-system", "4", "--seed", "2", "--engine", "duckdb"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "sample round-1: 12 draws from 3 systems" in result.output
    want = sample_round(Bundle(write_bundle(tmp_path / "c", "tsv")), 4, seed=2).samples
    got = pd.read_csv(root / "samples.tsv", sep="\t", dtype=str)
    assert list(got["answer"]) == list(want["answer"]) and len(load_task(root).samples) == 12
    adaptive = [*args, "--adaptive", "--target-width", "0.1"]
    refused = CliRunner().invoke(cli, [*adaptive, "--by-judge"])
    assert refused.exit_code == 2, refused.output
    assert refused.output.startswith("error: ") and refused.output.count("\n") == 1
    assert "judge.tsv: --by-judge needs the judge's scores" in refused.output


def test_engine_sample_data_equals_the_in_memory_arrays(tmp_path):
    """The engine's SampleData (SQL aggregates, no output row in Python): the arrays of
    build_sample_data, drawn facts in the same order, and the same joint estimates."""
    from receval.engine.score import bundle_sample_data
    from receval.estimators.base import ScoringContext
    from receval.estimators.joint import JointEstimator
    from receval.estimators.sample_data import build_sample_data
    from receval.scoring import fit

    for layout in ("per-system", "dataset"):
        bundle = Bundle(write_bundle(tmp_path / layout, layout))
        for seed in (5, 6):
            bundle.record_round(sample_round(bundle, 8, seed=seed))
        todo = pd.read_csv(bundle.root / "to_annotate.tsv", sep="\t", dtype=str)
        keys = np.array(
            [python_key(f"{q}{a}") for q, a in zip(todo["query_id"], todo["answer"], strict=True)]
        )
        label = np.where(keys % 3 == 0, "W", "C")
        todo.assign(label=label, annotator="a")[
            ["query_id", "answer", "label", "annotator"]
        ].to_csv(bundle.root / "judgments.tsv", sep="\t", index=False)
        want = build_sample_data(load_task(bundle.root), classes=False)
        got = bundle_sample_data(bundle)
        for name in ("member", "target", "proposal", "label", "sizes", "sampler_system",
                     "sampler_n", "draw_sampler", "draw_fact", "census", "judged",
                     "query_sizes", "query_correct", "draw_query", "draw_row", "sampler_round"):  # fmt: skip
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
        assert np.isnan(got.overlap).all() and got.overlap.shape == want.overlap.shape
        runs = [
            fit(ScoringContext.of(data, bootstrap=200, seed=1), JointEstimator()).run
            for data in (got, want)
        ]
        for metric in runs[1].point:
            np.testing.assert_allclose(runs[0].point[metric], runs[1].point[metric], rtol=1e-12)
            np.testing.assert_allclose(
                runs[0].replicates[metric], runs[1].replicates[metric], rtol=1e-12
            )


def test_joint_estimates_at_any_size_api(tmp_path):
    from receval.engine.score import joint_estimates

    bundle = Bundle(write_bundle(tmp_path / "b", "parquet"))
    bundle.record_round(sample_round(bundle, 10, seed=1))
    todo = pd.read_csv(bundle.root / "to_annotate.tsv", sep="\t", dtype=str)
    todo.assign(label="C", annotator="a")[["query_id", "answer", "label", "annotator"]].to_csv(
        bundle.root / "judgments.tsv", sep="\t", index=False
    )
    out = joint_estimates(bundle, bootstrap=50, seed=1)
    assert list(out["system"]) == ["A", "B", "C"]
    np.testing.assert_allclose(out["precision"], 1.0)
    assert (out["pooled_recall_lo"] <= out["pooled_recall"]).all()


@pytest.mark.slow
@needs_spark
def test_spark_draws_the_same_facts_as_duckdb(tmp_path, monkeypatch):
    """The same SQL texts in Spark draw the same facts (and list the same ones to annotate)."""
    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    for layout in ("parquet", "per-system"):
        bundle = Bundle(write_bundle(tmp_path / layout, layout))
        duck = sample_round(bundle, 6, seed=3)
        spark = sample_round(bundle, 6, seed=3, engine="spark")
        pd.testing.assert_frame_equal(spark.samples, duck.samples)
        pd.testing.assert_frame_equal(spark.to_annotate, duck.to_annotate)


def test_the_sampled_paths_normalisation_is_pythons():
    """The engine's fact keys normalise answers as ``normalize_answers`` does, non-ASCII
    included (full case folding, every ``str.isspace`` character), so a system's N_j and the
    facts drawn are the in-memory path's facts (before: ``lower`` and ``\\s`` split ``Straße``
    from ``STRASSE``)."""
    from receval.config import Matching
    from receval.engine.base import DuckDBEngine
    from receval.engine.sampled import normalised_answer_sql
    from receval.task import normalize_answers

    values = ["Straße", "STRASSE", "  A\u00a0 b ", "ﬁsh", "ΣΑΣ", "x\u2003y", "ǅ", "İstanbul"]
    for matching in (Matching(), Matching(casefold=False), Matching(unicode="NFC")):
        with DuckDBEngine() as engine:
            engine.register("t", pd.DataFrame({"answer": values}))
            sql = normalised_answer_sql(engine, matching)
            got = engine.query(f"SELECT {sql} AS a FROM t")["a"].tolist()
        assert got == normalize_answers(pd.Series(values), matching).tolist(), matching
