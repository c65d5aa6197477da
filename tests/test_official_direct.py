"""The official census counted from the run table's codes (:mod:`receval.official.direct`)
writes the same output set, byte for byte, as the in-memory path that builds the Task; bundles
it does not cover go to the in-memory path (same files), and bad input still exits 2 naming
the file and the line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import receval
from receval.cli import cli
from receval.formats.bundle import write_bundle
from receval.formats.trec import import_trec, import_trec_tables
from receval.official.direct import official_view
from receval.scoring import ScoreOptions

FILES = (
    "leaderboard.csv",
    "pool.csv",
    "conflicts.csv",
    "per_query.csv",
    "annotation.csv",
    "pooling_bias.csv",
    "agreement.csv",
)


def _files(tmp_path: Path, seed: int, n_systems: int = 4, n_queries: int = 9) -> tuple:
    """TREC qrels and runs: shared documents across topics, unjudged documents, topics only
    in the qrels and only in the runs, graded and negative relevance."""
    rng = np.random.default_rng(seed)
    docs = [f"DOC-{i:03d}" for i in range(40)]
    qrels = tmp_path / "qrels.txt"
    lines = []
    for q in range(n_queries - 1):
        for d in rng.choice(docs, size=int(rng.integers(1, 20)), replace=False):
            lines.append(f"{301 + q} 0 {d} {int(rng.choice([-1, 0, 0, 1, 2]))}\n")
    lines.append("999 0 DOC-000 1\n")  # a topic nobody retrieved for
    qrels.write_text("".join(lines))
    runs = []
    for s in range(n_systems):
        out = []
        for q in range(n_queries):
            if rng.random() < 0.2:
                continue
            chosen = rng.choice(docs, size=int(rng.integers(1, 25)), replace=False)
            for r, d in enumerate(chosen, start=1):
                out.append(f"{301 + q}\tQ0\t{d}\t{r}\t{rng.random():.4f}\trun{s}\n")
        path = tmp_path / f"input.run{s}"
        path.write_text("".join(out))
        runs.append(path)
    return qrels, runs


def _bundle(tmp_path: Path, seed: int, suffix: str = ".tsv") -> Path:
    qrels, runs = _files(tmp_path, seed)
    tables, config = import_trec_tables(qrels, runs, score_as_written=suffix == ".tsv")
    return write_bundle(tmp_path / "bundle", tables, config, suffix=suffix)


def _outputs(root: Path, out: Path, **options) -> dict[str, bytes]:
    result = receval.score(root, estimator="official", **options)
    result.write(out, report=False)
    return {name: (out / name).read_bytes() for name in FILES}


@pytest.mark.parametrize("suffix", [".tsv", ".parquet"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    "options",
    [{}, {"average": "micro"}, {"unjudged": "ignore"}, {"rank_by": "precision", "seed": 3}],
)
def test_same_output_set_as_the_in_memory_path(tmp_path, seed, suffix, options):
    root = _bundle(tmp_path, seed, suffix)
    checked = ScoreOptions(estimator="official", **options)
    assert official_view(root, checked, "duckdb", None) is not None  # the direct path is taken
    direct = _outputs(root, tmp_path / "direct", **options)
    loaded = _outputs(root, tmp_path / "loaded", out_of_core=False, **options)
    assert direct == loaded


def test_run_json_is_the_in_memory_paths_but_for_the_time(tmp_path):
    import json

    root = _bundle(tmp_path, 2)
    runs = []
    for name, out_of_core in (("direct", None), ("loaded", False)):
        result = receval.score(root, estimator="official", out_of_core=out_of_core)
        result.write(tmp_path / name, report=False)
        record = json.loads((tmp_path / name / "run.json").read_text())
        record.pop("created")
        runs.append(record)
    assert runs[0] == runs[1]


def test_conflicting_judgments_are_reported_alike(tmp_path):
    """A fact judged twice with different labels (a hand-edited judgments.tsv): scored in
    memory (conflicts.csv names the task's fact ids); the conflict is in conflicts.csv."""
    root = _bundle(tmp_path, 0)
    judgments = root / "judgments.tsv"
    lines = judgments.read_text().splitlines(keepends=True)
    fields = lines[1].rstrip("\n").split("\t")
    header = lines[0].rstrip("\n").split("\t")
    label = header.index("label")
    fields[label] = "0" if fields[label] == "1" else "1"
    judgments.write_text("".join(lines) + "\t".join(fields) + "\n")
    assert official_view(root, ScoreOptions(estimator="official"), "duckdb", None) is None
    direct = _outputs(root, tmp_path / "direct")
    loaded = _outputs(root, tmp_path / "loaded", out_of_core=False)
    assert direct == loaded
    assert direct["conflicts.csv"].count(b"\n") == 2


def _edit_runs(root: Path, edit) -> None:
    path = root / "runs.tsv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(edit(lines)))


def _duplicate(lines):
    return [*lines, lines[1]]


def _spaced(lines):
    fields = lines[1].split("\t")
    fields[2] = fields[2] + " x"  # an answer with a space: normalised by [matching]
    return [lines[0], "\t".join(fields), *lines[2:]]


def _team(lines):
    return [
        lines[0].rstrip("\n") + "\tteam\n",
        *(line.rstrip("\n") + "\tT\n" for line in lines[1:]),
    ]


@pytest.mark.parametrize("edit", [_duplicate, _spaced, _team], ids=["duplicate", "space", "team"])
def test_bundles_it_does_not_cover_score_in_memory_alike(tmp_path, edit):
    root = _bundle(tmp_path, 1)
    _edit_runs(root, edit)
    assert official_view(root, ScoreOptions(estimator="official"), "duckdb", None) is None
    direct = _outputs(root, tmp_path / "direct")
    loaded = _outputs(root, tmp_path / "loaded", out_of_core=False)
    assert direct == loaded


def test_bundle_without_qrels_scores(tmp_path):
    _, runs = _files(tmp_path, 3)
    tables, config = import_trec(None, runs)
    root = write_bundle(tmp_path / "bundle", tables, config)
    assert official_view(root, ScoreOptions(estimator="official"), "duckdb", None) is not None
    assert _outputs(root, tmp_path / "a") == _outputs(root, tmp_path / "b", out_of_core=False)


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda f: f.__setitem__(3, "not-a-number"), "score"),
        (lambda f: f.__setitem__(1, "no-such-query"), "no-such-query"),
    ],
)
def test_bad_run_rows_exit_2_naming_file_and_line(tmp_path, edit, problem):
    root = _bundle(tmp_path, 0)

    def bad(lines):
        fields = lines[5].rstrip("\n").split("\t")
        edit(fields)
        return [*lines[:5], "\t".join(fields) + "\n", *lines[6:]]

    _edit_runs(root, bad)
    result = CliRunner().invoke(
        cli,
        ["score", str(root), "--out", str(tmp_path / "o"), "--estimator", "official", "--quiet"],
    )
    assert result.exit_code == 2, result.output
    message = result.output.strip().splitlines()[-1]
    assert message.startswith("error: ") and "runs.tsv:6" in message and problem in message


def test_pair_codes_number_the_distinct_query_answer_pairs():
    """Facts are coded per distinct (query, answer) pair (answers shared by several queries
    included), and ``pair_of`` finds the code of a pair, -1 for a pair no row has."""
    from receval.official.direct import _pair_codes

    rng = np.random.default_rng(4)
    query = rng.integers(0, 5, 2000).astype(np.int32)
    answer = rng.integers(0, 60, 2000).astype(np.int32)
    answer[:60] = np.arange(60)  # every answer code is used, as a dictionary's are
    codes, n, pair_of = _pair_codes(query, answer, 60)
    pairs = list(zip(query.tolist(), answer.tolist(), strict=True))
    assert n == len(set(pairs)) and codes.max() == n - 1
    code_of: dict[tuple[int, int], int] = {}
    for pair, code in zip(pairs, codes.tolist(), strict=True):
        assert code_of.setdefault(pair, code) == code
    assert len(set(code_of.values())) == n
    q = np.array([p[0] for p in code_of] + [9], np.int64)
    a = np.array([p[1] for p in code_of] + [0], np.int64)
    assert pair_of(q, a).tolist() == [*code_of.values(), -1]


def test_threaded_parse_of_a_mapped_run_table(tmp_path, monkeypatch):
    """A run table large enough for Arrow's threaded parse is read from the mapped file and
    unmapped after (the parse returns from its own function: no frame keeps the buffer)."""
    import receval.formats.tables as tables

    monkeypatch.setattr(tables, "THREADED_PARSE_BYTES", 0)
    root = _bundle(tmp_path, 0)
    for _ in range(3):
        assert official_view(root, ScoreOptions(estimator="official"), "duckdb", None) is not None
