"""``validate`` on the engine path (receval.engine.validate): the in-memory path's summary and
error lines, from SQL aggregates over Parquet runs, never loading the task."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import needs_spark
from test_engine_score import _partitioned, make_bundle

import receval.bundle.runs
import receval.task
from receval.cli import cli


def _validate(root: Path, *extra: str):
    return CliRunner().invoke(cli, ["validate", str(root), *extra])


def _refuse_loading(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the engine path loaded the task")

    monkeypatch.setattr(receval.task, "load_task", refuse)
    monkeypatch.setattr(receval.task.Task, "from_frames", refuse)
    monkeypatch.setattr(receval.bundle.runs, "_run_frame", refuse)


def _make(tmp_path: Path, layout: dict) -> Path:
    options = dict(layout)
    partitioned = options.pop("partitioned", False)
    unlabelled = options.pop("unlabelled", False)
    root = make_bundle(tmp_path / "b", **options)
    if unlabelled:  # runs and queries only
        for name in ("samples.tsv", "judgments.tsv", "to_annotate.tsv"):
            (root / name).unlink(missing_ok=True)
    return _partitioned(root) if partitioned else root


LAYOUTS = [
    {},
    {"teams": True, "pending": 3},
    {"teams": True, "duplicates": True, "layout": "one-file"},
    {"partitioned": True, "rounds": 1},
    {"unlabelled": True, "rounds": 1},
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_engine_validate_prints_the_in_memory_summary(tmp_path, monkeypatch, layout):
    root = _make(tmp_path, layout)
    memory = _validate(root, "--in-memory")
    assert memory.exit_code == 0, memory.output
    _refuse_loading(monkeypatch)
    engine = _validate(root, "--out-of-core")
    assert engine.exit_code == 0, engine.output
    assert engine.output == memory.output


def test_engine_validate_counts_an_empty_submission(tmp_path, monkeypatch):
    root = make_bundle(tmp_path / "b", rounds=1)
    pd.DataFrame(
        {"query_id": pd.Series([], dtype=str), "answer": pd.Series([], dtype=str)}
    ).to_parquet(root / "runs" / "E.parquet", index=False)
    memory = _validate(root, "--in-memory")
    assert "empty submissions" in memory.output
    _refuse_loading(monkeypatch)
    assert _validate(root, "--out-of-core").output == memory.output


def test_engine_path_is_the_default_from_the_row_threshold(tmp_path, monkeypatch):
    import receval.engine.score

    root = make_bundle(tmp_path / "b", rounds=1)
    memory = _validate(root)
    monkeypatch.setattr(receval.engine.score, "ENGINE_PATH_ROWS", 1)
    _refuse_loading(monkeypatch)
    assert _validate(root).output == memory.output


def _drop_answer(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame.drop(columns="answer"), preserve_index=False)


def _nested_answer(frame: pd.DataFrame) -> pa.Table:
    table = pa.Table.from_pandas(frame.drop(columns="answer"), preserve_index=False)
    return table.append_column("answer", pa.array([[a] for a in frame["answer"]]))


def _error_line(result) -> str:
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("broken", [_drop_answer, _nested_answer], ids=["missing", "nested"])
def test_a_malformed_run_file_is_the_in_memory_error_line(tmp_path, broken, partitioned):
    root = make_bundle(tmp_path / "b", rounds=1)
    if partitioned:
        _partitioned(root)
    bad = next(p for p in sorted((root / "runs").rglob("*.parquet")) if "B" in str(p))
    pq.write_table(broken(pd.read_parquet(bad)), bad)
    memory = _error_line(_validate(root, "--in-memory"))
    assert str(bad) in memory
    assert _error_line(_validate(root, "--out-of-core")) == memory


def test_a_column_the_engine_cannot_read_names_the_file(tmp_path):
    root = make_bundle(tmp_path / "b", rounds=1)
    bad = root / "runs" / "C.parquet"
    pd.read_parquet(bad).assign(query_id=1.5).to_parquet(bad, index=False)
    line = _error_line(_validate(root, "--out-of-core"))
    assert str(bad) in line and "column query_id has type double" in line


def test_bad_values_in_the_runs_are_one_error_line(tmp_path):
    root = make_bundle(tmp_path / "b", rounds=1)
    bad = root / "runs" / "D.parquet"
    frame = pd.read_parquet(bad)
    frame.loc[0, "query_id"] = "q-unknown"
    frame.to_parquet(bad, index=False)
    line = _error_line(_validate(root, "--out-of-core"))
    assert str(bad) in line and "'q-unknown' is not in queries" in line


JUDGE_HEAD = "query_id\tanswer\tjudge_score\n"
BAD_JUDGES = {
    "column": "query_id\tanswer\nq0\tdoc 1\n",
    "query": JUDGE_HEAD + "q0\tdoc 1\t0.5\nq-unknown\tdoc 1\t0.5\n",
    "score": JUDGE_HEAD + "q0\tdoc 1\t0.5\nq1\tdoc 2\t1.5\n",
    "twice": JUDGE_HEAD + "q0\tdoc 1\t0.5\nq1\tdoc 2\t0.2\nq0\t Doc  1\t0.7\n",
}


@pytest.mark.parametrize("bad", sorted(BAD_JUDGES))
def test_a_bad_judge_table_is_the_loaders_error_line(tmp_path, bad):
    """The engine judge checks judge.tsv with the loader's functions: a missing column, an
    unknown query, a score outside [0, 1], two grades of one fact (same normalised answer):
    the in-memory error line, file and line."""
    root = make_bundle(tmp_path / "b", rounds=1)
    (root / "judge.tsv").write_text(BAD_JUDGES[bad])
    memory = _error_line(_validate(root, "--in-memory"))
    assert "judge.tsv" in memory
    assert _error_line(_validate(root, "--out-of-core")) == memory


@pytest.mark.parametrize("options", [{}, {"classes": True, "graded": True, "teams": True},
                                     {"judges": ("a", "b"), "layout": "one-file"}])  # fmt: skip
def test_engine_validate_with_a_judge_and_by_judge_rounds_is_the_in_memory_summary(
    tmp_path, monkeypatch, options
):
    """A judge table (one, graded, two judges) and a round drawn --by-judge (its design
    checked at the judge's levels): the in-memory summary, the task never loaded."""
    from test_engine_designs import judge_bundle

    root = judge_bundle(tmp_path / "b", options)
    memory = _validate(root, "--in-memory")
    assert memory.exit_code == 0, memory.output
    _refuse_loading(monkeypatch)
    engine = _validate(root, "--out-of-core")
    assert engine.exit_code == 0, engine.output
    assert engine.output == memory.output and "judge-strata" in engine.output


def test_what_the_engine_path_does_not_check_is_refused_out_of_core(tmp_path):
    root = make_bundle(tmp_path / "b", rounds=1)
    samples = pd.read_csv(root / "samples.tsv", sep="\t", dtype=str, keep_default_na=False)
    samples.assign(design="judge-uncertainty").to_csv(root / "samples.tsv", sep="\t", index=False)
    line = _error_line(_validate(root, "--out-of-core"))
    assert "judge-uncertainty" in line and "--in-memory" in line


def _with(root: Path, what: str) -> Path:
    from test_engine_classes import with_classes, with_entity_relation_round, with_truth

    if what == "classes":
        return with_classes(root)
    if what == "truth":
        return with_truth(root)
    if what == "truth-classes":
        return with_classes(with_truth(root, complete=False))
    return with_entity_relation_round(root)


@pytest.mark.parametrize("what", ["classes", "truth", "truth-classes", "entity-relation"])
@pytest.mark.parametrize("options", [{}, {"units": "documents", "teams": True}])
def test_engine_validate_with_classes_truth_units_and_designs_is_the_in_memory_summary(
    tmp_path, monkeypatch, what, options
):
    """Equivalence classes, ``truth.tsv``, exhaustive units and entity-relation rounds: the
    engine path checks them as the loader does and prints the same summary (units and truth
    were printed as absent before; classes and truth were refused)."""
    root = _with(make_bundle(tmp_path / "b", **options), what)
    memory = _validate(root, "--in-memory")
    assert memory.exit_code == 0, memory.output
    _refuse_loading(monkeypatch)
    engine = _validate(root, "--out-of-core")
    assert engine.exit_code == 0, engine.output
    assert engine.output == memory.output


def test_engine_validate_names_a_bad_truth_line_as_the_loader_does(tmp_path):
    from test_engine_classes import with_truth

    root = with_truth(make_bundle(tmp_path / "b", rounds=1))
    with (root / "truth.tsv").open("a", encoding="utf-8") as f:
        f.write("q-unknown\tdoc 1\tC\t\n")
    memory = _error_line(_validate(root, "--in-memory"))
    assert "truth.tsv" in memory and memory == _error_line(_validate(root, "--out-of-core"))


def test_text_runs_are_refused_out_of_core(tmp_path):
    root = _make(tmp_path, {"unlabelled": True, "rounds": 1, "layout": "one-file"})
    pd.read_parquet(root / "runs.parquet").to_csv(root / "runs.tsv", sep="\t", index=False)
    (root / "runs.parquet").unlink()
    assert _validate(root).exit_code == 0
    assert "text tables" in _error_line(_validate(root, "--out-of-core"))


@pytest.mark.slow
@needs_spark
@pytest.mark.parametrize(
    "layout", [{"teams": True}, {"partitioned": True, "rounds": 1}, {"with": "truth-classes"}]
)
def test_spark_validate_prints_the_duckdb_summary(tmp_path, monkeypatch, layout):
    import os

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    layout = dict(layout)
    what = layout.pop("with", None)
    root = _make(tmp_path, layout)
    root = _with(root, what) if what else root
    duck = _validate(root, "--out-of-core")
    assert duck.exit_code == 0, duck.output
    spark = _validate(root, "--out-of-core", "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    assert spark.output == duck.output


@pytest.mark.slow
@needs_spark
def test_spark_validate_with_a_judge_prints_the_duckdb_summary(tmp_path, monkeypatch):
    """A judge table and a round drawn --by-judge, checked on Spark: DuckDB's summary."""
    import os

    from test_engine_designs import judge_bundle

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = judge_bundle(tmp_path / "b", {"graded": True})
    duck = _validate(root, "--out-of-core")
    assert duck.exit_code == 0, duck.output
    spark = _validate(root, "--out-of-core", "--engine", "spark")
    assert spark.exit_code == 0, spark.output
    assert spark.output == duck.output


@pytest.mark.parametrize(
    ("column", "value"), [("system", ""), ("system", None), ("system", "  "), ("answer", None)]
)
def test_a_blank_run_value_is_the_loaders_problem(tmp_path, column, value):
    """Blank or NULL system and answer cells fail as the loader fails them (the file and the
    problem; the engine counts the rows instead of naming the first line)."""
    root = make_bundle(tmp_path / "b", rounds=1, layout="one-file")
    frame = pd.read_parquet(root / "runs.parquet")
    frame[column] = frame[column].astype(object)
    frame.loc[len(frame) - 1, column] = value
    frame.to_parquet(root / "runs.parquet", index=False)
    memory = _error_line(_validate(root, "--in-memory"))
    engine = _error_line(_validate(root, "--out-of-core"))
    problem = f"empty value in required column '{column}'"
    assert problem in memory and problem in engine
    assert str(root / "runs.parquet") in engine


def test_draws_the_engine_cannot_check_go_to_the_loader_by_default(tmp_path, monkeypatch):
    """Draws whose prob no design gives: the engine path infers and checks the designs as the
    loader does (uniform, entity-relation), so ``--out-of-core`` and the default (from the row
    threshold) give the loader's error line."""
    import receval.engine.score

    root = make_bundle(tmp_path / "b", rounds=1)
    samples = pd.read_csv(root / "samples.tsv", sep="\t", dtype=str, keep_default_na=False)
    samples["prob"] = "0.5"
    samples.to_csv(root / "samples.tsv", sep="\t", index=False)
    memory = _validate(root, "--in-memory")
    line = _error_line(_validate(root, "--out-of-core"))
    assert "disagrees with the uniform design" in line and line == _error_line(memory)
    monkeypatch.setattr(receval.engine.score, "ENGINE_PATH_ROWS", 1)
    default = _validate(root)
    assert (default.exit_code, default.output) == (memory.exit_code, memory.output)
