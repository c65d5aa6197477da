"""``[matching]`` on the engine path: the answers read as the loader reads them, so ``sample``,
``score`` and ``validate`` write the same bytes ``--out-of-core`` and ``--in-memory`` whatever
the options, on answers wrapped in ASCII spaces and in em spaces (U+2003).  With ``strip =
false`` the surrounding spaces belong to the fact: ``" doc 3"`` and ``"doc 3"`` are two facts."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import needs_spark
from test_engine_score import _runs, _same_output_sets, _score

from receval.cli import cli
from receval.engine.sampled import python_key

MATCHING = {
    "default": "",
    "strip-off": "strip = false",
    "all-off": "strip = false\ncollapse_whitespace = false\ncasefold = false",
    "nfc-strip-off": 'unicode = "NFC"\nstrip = false',
    "collapse-off": "collapse_whitespace = false",
}
WRITTEN = ("samples.tsv", "to_annotate.tsv")


def spaced_runs() -> pd.DataFrame:
    """:func:`test_engine_score._runs` with answers wrapped four ways: a leading space, a
    trailing em space, an em space before and a space after, as written (``" Doc  3"`` and
    ``"doc 3"`` already differ in case and inner spaces)."""
    runs = _runs()
    answers = runs["answer"].to_numpy(object).copy()
    for i, answer in enumerate(answers):
        bare = answer.strip()
        answers[i] = {1: " " + bare, 2: bare + "\u2003", 3: "\u2003" + bare + " "}.get(
            i % 5, answer
        )
    return runs.assign(answer=answers)


def _run(*args) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, (args, result.output)
    return result.output


def spaced_bundle(root: Path, matching: str, layout: str = "parquet") -> Path:
    """A bundle of :func:`spaced_runs` (one Parquet file or ``runs.tsv``) with ``[matching]``
    set to ``matching`` and two rounds drawn in memory, labelled by a rule (two annotators)."""
    root.mkdir(parents=True)
    pd.DataFrame({"query_id": [f"q{q}" for q in range(7)]}).to_csv(
        root / "queries.tsv", sep="\t", index=False
    )
    if matching:
        (root / "task.toml").write_text(f"[matching]\n{matching}\n", encoding="utf-8")
    runs = spaced_runs()
    if layout == "tsv":
        runs.to_csv(root / "runs.tsv", sep="\t", index=False)
    else:
        runs.to_parquet(root / "runs.parquet", index=False)
    for seed in (1, 2):
        _run("sample", root, "--per-system", "6", "--seed", seed, "--in-memory")
    todo = pd.read_csv(root / "to_annotate.tsv", sep="\t", dtype=str, keep_default_na=False)
    pairs = zip(todo["query_id"], todo["answer"], strict=True)
    key = np.array([python_key(f"{q}{a}") for q, a in pairs])
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
    return root


def _sampled_both_ways(source: Path, tmp: Path) -> dict[str, dict[str, bytes]]:
    out = {}
    for path in ("--in-memory", "--out-of-core"):
        root = tmp / path.strip("-")
        shutil.copytree(source, root)
        _run("sample", root, "--per-system", "6", "--seed", "7", path)
        _run("sample", root, "--per-system", "4", "--seed", "7", "--system", "A", path)
        out[path] = {name: (root / name).read_bytes() for name in WRITTEN}
    return out


@pytest.mark.parametrize("layout", ["parquet", "tsv"])
@pytest.mark.parametrize("matching", list(MATCHING))
def test_sample_draws_the_in_memory_round_under_every_matching(tmp_path, matching, layout):
    """Two more rounds on a bundle whose earlier rounds memory drew: the same bytes."""
    source = spaced_bundle(tmp_path / "b", MATCHING[matching], layout)
    drawn = _sampled_both_ways(source, tmp_path)
    for name in WRITTEN:
        assert drawn["--out-of-core"][name] == drawn["--in-memory"][name], name


def test_strip_off_keeps_the_surrounding_spaces_as_written(tmp_path):
    """With ``strip = false`` the drawn spellings keep their ASCII and em spaces (the facts
    differ from the stripped ones); with the default, ASCII spaces are trimmed from the
    spelling and em spaces kept (DuckDB's plain ``trim`` removed them too: a different
    spelling from memory's and Spark's)."""
    kept = spaced_bundle(tmp_path / "off", MATCHING["strip-off"])
    default = spaced_bundle(tmp_path / "on", "")
    off = pd.read_csv(kept / "samples.tsv", sep="\t", dtype=str, keep_default_na=False)
    on = pd.read_csv(default / "samples.tsv", sep="\t", dtype=str, keep_default_na=False)
    assert off["answer"].str.startswith(" ").any() and off["answer"].str.endswith(" ").any()
    assert not (on["answer"].str.startswith(" ") | on["answer"].str.endswith(" ")).any()
    assert on["answer"].str.startswith("\u2003").any() and on["answer"].str.endswith("\u2003").any()


@pytest.mark.parametrize("matching", list(MATCHING))
def test_score_and_validate_out_of_core_are_the_in_memory_output(tmp_path, matching):
    """``score`` (every CSV and run.json) and ``validate`` (its report) on the Parquet
    bundle: the same bytes on both paths."""
    root = spaced_bundle(tmp_path / "b", MATCHING[matching])
    for path, out in (("--in-memory", "memory"), ("--out-of-core", "engine")):
        result = _score(root, tmp_path / out, "--allow-pending", path=path)
        assert result.exit_code == 0, result.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")
    memory = _run("validate", root, "--in-memory")
    assert _run("validate", root, "--out-of-core") == memory
    assert "judged facts" in memory


def test_strip_off_changes_the_facts_on_the_engine_path(tmp_path):
    """The engine honours ``strip = false`` rather than matching memory by accident: the
    pool has more facts than with the default (``" doc 3"`` and ``"doc 3"`` are two)."""
    pools = {}
    for name in ("default", "strip-off"):
        root = spaced_bundle(tmp_path / name, MATCHING[name])
        result = _score(root, tmp_path / f"{name}-out", "--allow-pending")
        assert result.exit_code == 0, result.output
        pools[name] = pd.read_csv(tmp_path / f"{name}-out" / "pool.csv")
    assert pools["strip-off"].iloc[0].to_dict() != pools["default"].iloc[0].to_dict()


@pytest.mark.parametrize("command", ["sample", "score", "validate"])
def test_a_normal_form_duckdb_lacks_is_one_error_line(tmp_path, command):
    """``unicode = "NFKC"`` cannot be honoured by DuckDB: ``--out-of-core`` exits 2 with one
    ``error:`` line (memory and Spark honour it)."""
    root = spaced_bundle(tmp_path / "b", 'unicode = "NFKC"')
    args = {
        "sample": ["--per-system", "3", "--seed", "1"],
        "score": ["--out", str(tmp_path / "o"), "--no-report", "--allow-pending"],
        "validate": [],
    }[command]
    result = CliRunner().invoke(cli, [command, str(root), *args, "--out-of-core"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "NFKC" in lines[0]


def test_the_answers_are_trimmed_of_ascii_spaces_only():
    """:func:`receval.engine.run_files.answer_as_read` in DuckDB: ``str.strip(" ")`` with
    strip, the text as written without."""
    from receval.engine.base import connect
    from receval.engine.run_files import answer_as_read

    texts = [" a ", "\u2003 b \u2003", " \u00a0c\t ", "d", "  "]
    engine = connect("duckdb")
    try:
        engine.register("t", pd.DataFrame({"x": texts, "i": range(len(texts))}))
        for strip in (True, False):
            sql = f"SELECT {answer_as_read('x', strip=strip)} AS y FROM t ORDER BY i"
            got = engine.con.execute(sql).fetchdf()["y"].tolist()
            assert got == [t.strip(" ") if strip else t for t in texts]
    finally:
        engine.close()


@pytest.mark.slow
@needs_spark
@pytest.mark.parametrize("matching", ["default", "strip-off"])
def test_spark_reads_the_answers_as_memory_does(tmp_path, monkeypatch, matching):
    """Spark (local): the same round as memory and the same score output set."""
    import os

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = spaced_bundle(tmp_path / "b", MATCHING[matching])
    for path, out in (("--in-memory", "memory"), ("--out-of-core", "spark")):
        engine = ("--engine", "spark") if out == "spark" else ()
        result = _score(root, tmp_path / out, "--allow-pending", *engine, path=path)
        assert result.exit_code == 0, result.output
    _same_output_sets(tmp_path / "memory", tmp_path / "spark")
    for path, engine in (("--in-memory", ()), ("--out-of-core", ("--engine", "spark"))):
        copy = tmp_path / f"s{path}"
        shutil.copytree(root, copy)
        _run("sample", copy, "--per-system", "6", "--seed", "7", path, *engine)
    for name in WRITTEN:
        memory = (tmp_path / "s--in-memory" / name).read_bytes()
        assert (tmp_path / "s--out-of-core" / name).read_bytes() == memory, name


@pytest.mark.parametrize("path", ["--in-memory", "--out-of-core"])
def test_a_blank_answer_is_refused_with_strip_off(tmp_path, path):
    """An answer of spaces alone (an em space and a space) is blank whatever ``strip`` says:
    ``score`` and ``validate`` exit 2 naming the answer column on both paths."""
    root = spaced_bundle(tmp_path / "b", MATCHING["strip-off"])
    runs = pd.read_parquet(root / "runs.parquet")
    runs.loc[3, "answer"] = "\u2003 "
    runs.to_parquet(root / "runs.parquet", index=False)
    score = ["score", root, "--out", tmp_path / "o", "--no-report", "--allow-pending"]
    for args in (score, ["validate", root]):
        result = CliRunner().invoke(cli, [*map(str, args), path])
        assert result.exit_code == 2, result.output
        assert "empty value in required column 'answer'" in result.output
