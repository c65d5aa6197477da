"""The engine-ranked lists of the curve commands equal the pandas ones (order, ties, labels)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from receval.cli import cli
from receval.curves.sources import CurveBundle, frame_system
from receval.errors import BundleError
from receval.task import load_task

PARAMS = ["--epsilon", "0.2", "--window", "10"]


def _parquet_runs(root) -> None:
    """runs.tsv -> runs/<system>.parquet, unsorted, with tied, missing and duplicate scores and
    duplicate facts spelled differently (the loader keeps the best-scored copy)."""
    runs = pd.read_csv(root / "runs.tsv", sep="\t", dtype=str, keep_default_na=False)
    (root / "runs").mkdir()
    for system, rows in runs.groupby("system"):
        rows = rows.copy()
        rows["score"] = np.round(pd.to_numeric(rows["score"]), 1)  # many ties
        rows.iloc[[3, 7, 11], rows.columns.get_loc("score")] = np.nan
        rows.iloc[[4], rows.columns.get_loc("score")] = -0.0
        rows.iloc[[6], rows.columns.get_loc("score")] = 0.0
        best = rows.iloc[[5]].assign(answer=lambda f: " " + f["answer"].str.upper(), score=99.0)
        worse = rows.iloc[[9]].assign(answer=lambda f: f["answer"].str.upper())
        unscored = rows.iloc[[3]].assign(answer=lambda f: f["answer"] + " ")
        rows = pd.concat([rows.iloc[::-1], best, worse, unscored])
        rows.drop(columns=["system"]).to_parquet(root / "runs" / f"{system}.parquet", index=False)
    (root / "runs.tsv").unlink()


@pytest.fixture()
def bundle(tmp_path):
    root = tmp_path / "task"
    args = ["simulate", str(root), "--systems", "3", "--queries", "120", "--per-system", "20"]
    result = CliRunner().invoke(cli, [*args, "--seed", "5"])
    assert result.exit_code == 0, result.output
    _parquet_runs(root)
    return root


def test_engine_ranked_list_equals_the_pandas_one(bundle):
    task = load_task(bundle)
    light = CurveBundle.load(bundle)
    assert light.systems == task.systems
    for system in task.systems:
        want, got = frame_system(task, system), light.ranked(system)
        assert got.size == want.size
        np.testing.assert_array_equal(got.known.ranks, want.known.ranks)
        np.testing.assert_array_equal(got.known.labels, want.known.labels)
        ranks = np.arange(1, want.size + 1)
        pd.testing.assert_frame_equal(
            got.items(ranks)[["rank", "query_id", "answer"]].astype({"rank": "int64"}),
            want.items(ranks).astype({"query_id": object, "answer": object}),
            check_dtype=False,
        )
    assert light.true_facts() == int((task.truth["value"] == 1).sum())


def _annotate(root, truth: pd.DataFrame) -> int:
    batch = pd.read_csv(root / "curve_to_annotate.tsv", sep="\t", dtype=str, keep_default_na=False)
    keys = batch["query_id"] + "\x1f" + batch["answer"].str.strip().str.casefold()
    labels = truth.reindex(keys).to_numpy()
    assert not pd.isna(labels).any()
    rows = pd.DataFrame({"query_id": batch["query_id"], "answer": batch["answer"], "label": labels})
    rows.to_csv(root / "judgments.tsv", sep="\t", mode="a", header=False, index=False)
    return len(rows)


def _plan_to_the_end(root, method: str, options=()) -> list[str]:
    truth = pd.read_csv(root / "truth.tsv", sep="\t", dtype=str, keep_default_na=False)
    truth = truth.set_index(truth["query_id"] + "\x1f" + truth["answer"].str.casefold())["label"]
    judgments = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str, keep_default_na=False)
    judgments[["query_id", "answer", "label"]].to_csv(root / "judgments.tsv", sep="\t", index=False)
    batches = []
    for _ in range(40):
        args = ["curve", "plan", str(root), "--system", "T01_1", "--method", method, *PARAMS]
        result = CliRunner().invoke(cli, [*args, "--seed", "0", *options])  # the same draws
        assert result.exit_code == 0, result.output
        batches.append((root / "curve_to_annotate.tsv").read_text())
        if not _annotate(root, truth):
            return batches
    raise AssertionError("the plan never became empty")


@pytest.mark.parametrize("method", ["stratband", "paula"])
def test_engine_path_writes_the_same_batches_and_curve(bundle, tmp_path, monkeypatch, method):
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(bundle, copy)
    outputs = {}
    for root, rows in ((bundle, "1000000000"), (copy, "0")):
        monkeypatch.setenv("RECEVAL_CURVE_ENGINE_ROWS", rows)
        batches = _plan_to_the_end(root, method)
        out = tmp_path / f"{rows}.csv"
        args = ["curve", "estimate", str(root), "--system", "T01_1", "--method", method, *PARAMS]
        result = CliRunner().invoke(cli, [*args, "--out", str(out)])
        assert result.exit_code == 0, result.output
        meta = out.with_name(out.name + ".json").read_text()
        outputs[rows] = (batches, out.read_text(), meta)
    assert (copy / ".receval" / "ranked" / "T01_1" / "order.npy").is_file()
    assert not (bundle / ".receval").exists()
    assert outputs["0"] == outputs["1000000000"]


def test_a_changed_run_is_ranked_again(bundle):
    first = CurveBundle.load(bundle).ranked("T01_2")
    top = first.items(np.array([1]))
    path = bundle / "runs" / "T01_2.parquet"
    runs = pd.read_parquet(path)
    last = first.items(np.array([first.size]))
    hit = (runs["query_id"] == last["query_id"].iloc[0]) & (
        runs["answer"] == last["answer"].iloc[0]
    )
    runs.loc[hit, "score"] = 1000.0
    stat = path.stat()
    runs.to_parquet(path, index=False)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same modification time
    again = CurveBundle.load(bundle).ranked("T01_2")
    new_top = again.items(np.array([1]))
    assert new_top["answer"].iloc[0] == last["answer"].iloc[0] != top["answer"].iloc[0]
    assert again.size == first.size


@pytest.mark.parametrize(
    "change",
    [
        lambda f: f.assign(query_id=np.where(np.arange(len(f)) == 4, "nope", f["query_id"])),
        lambda f: f.assign(answer=np.where(np.arange(len(f)) == 6, "  ", f["answer"])),
        lambda f: f.assign(score=np.where(np.arange(len(f)) == 2, np.inf, f["score"])),
        lambda f: f.assign(system=np.where(np.arange(len(f)) == 3, "other", "T01_3")),
        lambda f: f.assign(fact=1),
        lambda f: f.drop(columns=["answer"]),
    ],
    ids=["unknown-query", "empty-answer", "inf-score", "system", "reserved", "missing"],
)
def test_run_errors_are_the_loaders(bundle, change):
    path = bundle / "runs" / "T01_3.parquet"
    change(pd.read_parquet(path)).to_parquet(path, index=False)
    with pytest.raises(BundleError) as want:
        load_task(bundle)
    with pytest.raises(BundleError) as got:
        CurveBundle.load(bundle).ranked("T01_3")
    assert str(got.value) == str(want.value)


def test_judgment_errors_are_the_loaders(bundle):
    path = bundle / "judgments.tsv"
    with path.open("a") as fh:
        fh.write("Q001\tx\tmaybe\n")
    with pytest.raises(BundleError) as want:
        load_task(bundle)
    with pytest.raises(BundleError) as got:
        CurveBundle.load(bundle)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("batch_rows", [7, 1 << 20])
def test_ties_of_long_prefixes_and_unicode_in_small_batches(tmp_path, batch_rows):
    from receval.config import Matching
    from receval.curves.ranked import system_ranked_list
    from receval.engine import connect
    from receval.engine.ranked import cached_items, rank_run_file

    rng = np.random.default_rng(3)
    stems = ["https://example.org/a/very/long/path/", "Straße ", "STRASSE", "ÉCOLE", "x"]
    n = 300
    answers = [f"{stems[k % 5]}{rng.integers(0, 40)}" for k in range(n)]
    answers[5] = "  two   words\tTAB "
    runs = pd.DataFrame(
        {
            "system": "A",
            "query_id": rng.choice(["q1", "q10", "q2", "Q3"], n),
            "answer": answers,
            "score": rng.choice([0.5, 0.25, np.nan, 1.0], n),
        }
    )
    # a repeated answer repeats its score (with another score it is an error, issue 23)
    repeat = runs.groupby(["query_id", "answer"], sort=False)["score"]
    runs["score"] = repeat.transform(lambda s: s.iloc[0])
    task = __import__("receval.task", fromlist=["Task"]).Task.from_frames(runs=runs)
    want = system_ranked_list(task.outputs, "A")
    path = tmp_path / "A.parquet"
    runs.drop(columns=["system"]).to_parquet(path, index=False)
    with connect("duckdb") as engine:
        cache = rank_run_file(
            path,
            tmp_path / "A",
            engine,
            queries={"q1", "q10", "q2", "Q3"},
            matching=Matching(),
            batch_rows=batch_rows,
        )
        got = cached_items(cache, np.arange(1, len(want) + 1), engine)
    assert got["query_id"].tolist() == want["query_id"].tolist()
    assert got["answer"].tolist() == want["answer_raw"].tolist()


def test_a_text_run_and_an_empty_one_rank_as_the_loader_does(bundle):
    path = bundle / "runs" / "T01_2.parquet"
    pd.read_parquet(path).to_csv(path.with_suffix(".tsv"), sep="\t", index=False)
    path.unlink()
    empty = bundle / "runs" / "T01_9.parquet"
    pd.read_parquet(bundle / "runs" / "T01_1.parquet").iloc[:0].to_parquet(empty, index=False)
    task = load_task(bundle)
    light = CurveBundle.load(bundle)
    want, got = frame_system(task, "T01_2"), light.ranked("T01_2")
    ranks = np.arange(1, want.size + 1)
    assert got.items(ranks)["answer"].tolist() == want.items(ranks)["answer"].tolist()
    np.testing.assert_array_equal(got.known.ranks, want.known.ranks)
    assert light.ranked("T01_9").size == 0


def test_a_large_bundle_ranks_its_small_runs_in_the_engine(bundle, tmp_path, monkeypatch):
    """From ENGINE_PATH_ROWS Parquet run rows in the bundle (not in the one run), the curve
    commands rank the system's run in the engine instead of loading the task: the same
    batches and curve; RECEVAL_CURVE_ENGINE_ROWS, when set, still decides alone."""
    import shutil

    import receval.engine.score

    for name in ("exhaustive_units.tsv", "exhaustive.tsv"):
        (bundle / name).unlink(missing_ok=True)
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    monkeypatch.delenv("RECEVAL_CURVE_ENGINE_ROWS", raising=False)
    outputs = {}
    for root, limit in ((bundle, 10**12), (copy, 1)):
        monkeypatch.setattr(receval.engine.score, "ENGINE_PATH_ROWS", limit)
        batches = _plan_to_the_end(root, "stratband")
        out = tmp_path / f"{limit}.csv"
        args = ["curve", "estimate", str(root), "--system", "T01_1", "--method", "stratband"]
        result = CliRunner().invoke(cli, [*args, *PARAMS, "--out", str(out)])
        assert result.exit_code == 0, result.output
        outputs[limit] = (batches, out.read_text(), out.with_name(out.name + ".json").read_text())
    assert (copy / ".receval" / "ranked" / "T01_1" / "order.npy").is_file()
    assert not (bundle / ".receval").exists()
    assert outputs[1] == outputs[10**12]
    from receval.curves.sources import engine_run_file

    monkeypatch.setenv("RECEVAL_CURVE_ENGINE_ROWS", "1000000000")
    assert engine_run_file(copy, "T01_2") is None
    monkeypatch.delenv("RECEVAL_CURVE_ENGINE_ROWS")
    assert engine_run_file(copy, "T01_2") == copy / "runs" / "T01_2.parquet"
    (copy / "judge.tsv").write_text("query_id\tanswer\tjudge_score\n", encoding="utf-8")
    assert engine_run_file(copy, "T01_2") is None  # only the loaded task reads a judge
