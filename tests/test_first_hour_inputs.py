"""Issue 23 (an organiser's first hour), inputs: nested Parquet columns (item 9), conflicting
duplicate run rows (item 10), ``Task.from_frames(config=...)`` (item 11)."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import DEFAULT_FILES, make_bundle

import receval
from receval.cli import cli
from receval.errors import BundleError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _runs(**columns) -> pa.Table:
    base = {"system": ["A", "B"], "query_id": ["q1", "q2"], "answer": ["Paris", "Rome"]}
    return pa.table({**base, **columns})


NESTED = {
    "score": _runs(score=pa.array([[0.1], [0.2]], pa.list_(pa.float64()))),
    "answer": _runs(answer=pa.array([{"text": "Paris"}, {"text": "Rome"}])),
    "query_id": _runs(query_id=pa.array([["q1"], ["q2"]])),
    "meta": _runs(meta=pa.array([[("k", "v")], [("k", "w")]], pa.map_(pa.string(), pa.string()))),
}


@pytest.mark.parametrize("column", sorted(NESTED))
@pytest.mark.parametrize("layout", ["runs.parquet", "runs/A.parquet"])
def test_a_nested_parquet_column_is_one_error_line(tmp_path, column, layout):
    root = make_bundle(tmp_path, runs=None, judgments=None, samples=None)
    path = root / layout
    path.parent.mkdir(exist_ok=True)
    pq.write_table(NESTED[column], path)
    result = CliRunner().invoke(cli, ["validate", str(root)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith(f"error: {path}: column {column!r} holds nested values")
    with pytest.raises(BundleError, match=f"column {column!r} holds nested values"):
        receval.load_task(root)


def test_a_nested_column_in_another_table_or_in_memory_is_a_bundle_error(tmp_path):
    root = make_bundle(tmp_path, judgments=None)
    labels = pa.table({"query_id": ["q1"], "answer": ["Paris"], "label": pa.array([["C"]])})
    pq.write_table(labels, root / "judgments.parquet")
    with pytest.raises(BundleError, match=r"judgments\.parquet: column 'label' holds nested"):
        receval.load_task(root)
    with pytest.raises(BundleError, match="runs: column 'score' holds nested"):
        receval.Task.from_frames(runs=NESTED["score"])


# -- item 10: duplicate run rows --------------------------------------------------------------


def test_a_conflicting_duplicate_row_is_an_error_naming_both_lines(tmp_path):
    runs = DEFAULT_FILES["runs.tsv"] + "A\tT1\tq2\tRome\t0.5\n"  # line 4 says 0.8
    root = make_bundle(tmp_path, runs=runs)
    result = CliRunner().invoke(cli, ["validate", str(root)])
    assert result.exit_code == 2
    path = root / "runs.tsv"
    assert result.stderr.strip() == (
        f"error: {path}:9: system 'A' outputs answer 'Rome' for query 'q2' twice with different "
        f"scores (0.8 at {path}:4, 0.5 here): keep one row (the kept score decides the ranking)"
    )


def test_identical_duplicates_and_spellings_are_a_counted_warning_in_score(tmp_path):
    runs = DEFAULT_FILES["runs.tsv"] + "A\tT1\tq2\tRome\t0.8\n"  # identical to line 4
    root = make_bundle(tmp_path, runs=runs)  # and A's "Paris" / "paris" (another spelling)
    assert receval.load_task(root).duplicate_rows == 2
    for estimator in ("joint", "official"):
        out = tmp_path / estimator
        args = ["score", str(root), "--out", str(out), "--estimator", estimator]
        result = CliRunner().invoke(cli, [*args, "--bootstrap", "50", "--no-report"])
        assert result.exit_code == 0, result.output
        assert "warning: 2 duplicate output row(s) collapsed" in result.stderr
        warnings = json.loads((out / "run.json").read_text())["warnings"]
        assert warnings[0].startswith("2 duplicate output row(s) collapsed")


def test_rows_differing_in_provenance_are_distinct_outputs(tmp_path):
    runs = (
        "system\tquery_id\tanswer\tscore\tprovenance\n"
        "A\tq1\tParis\t0.9\tdoc1\n"
        "A\tq1\tParis\t0.4\tdoc2\n"
        "B\tq2\tRome\t0.5\tdoc3\n"
    )
    task = receval.load_task(make_bundle(tmp_path, runs=runs, judgments=None, samples=None))
    assert task.duplicate_rows == 1


# -- item 11: Task.from_frames(config=...) ----------------------------------------------------


def _frames():
    runs = pd.DataFrame({"system": ["A", "B"], "query_id": ["q1", "q1"], "answer": ["x", "y"]})
    return {"runs": runs}


def test_from_frames_accepts_the_mapping_tomllib_reads(tmp_path):
    text = 'name = "mine"\n[merge]\nrule = "unanimous"\n[official]\nunjudged = "wrong"\n'
    task = receval.Task.from_frames(**_frames(), config=tomllib.loads(text))
    assert (task.name, task.config.merge_rule, task.config.unjudged) == (
        "mine",
        "unanimous",
        "wrong",
    )
    (tmp_path / "task.toml").write_text(text)
    for path in (tmp_path / "task.toml", str(tmp_path / "task.toml")):
        task = receval.Task.from_frames(**_frames(), config=path, name="other")
        assert (task.name, task.config.merge_rule) == ("other", "unanimous")


def test_from_frames_checks_a_mapping_and_says_what_to_pass():
    with pytest.raises(BundleError, match=r"task\.toml: merge rule must be one of"):
        receval.Task.from_frames(**_frames(), config={"merge": {"rule": "most"}})
    with pytest.raises(BundleError, match="unknown setting 'nmae'"):
        receval.Task.from_frames(**_frames(), config={"nmae": "x"})
    with pytest.raises(TypeError, match="config must be a TaskConfig, the mapping tomllib reads"):
        receval.Task.from_frames(**_frames(), config=42)
