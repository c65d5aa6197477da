"""TREC importer: run and qrels formats, trec_eval ranking, depth, bundle encoding, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from receval.errors import BundleError
from receval.formats.bundle import write_bundle
from receval.formats.trec import import_trec, read_qrels, read_trec_run
from receval.official.rules import OfficialPolicy
from receval.official.scores import official_scores
from receval.task import load_task

FIXTURES = Path(__file__).parent / "fixtures" / "trec"
QRELS = FIXTURES / "qrels.txt"
RUNS = [FIXTURES / "sysA.run", FIXTURES / "sysB.run"]


def expect_error(call, path: Path, line: int | None, text: str) -> None:
    with pytest.raises(BundleError) as info:
        call()
    err = info.value
    assert (err.path, err.line) == (str(path), line)
    assert text in err.message
    assert str(err).startswith(f"{path}:{line}: " if line is not None else f"{path}: ")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_read_run_and_qrels():
    run = read_trec_run(FIXTURES / "sysB.run")
    # the comment line is skipped; tabs and spaces both separate columns
    assert run["line"].tolist() == [2, 3, 4, 5]
    assert run["docno"].tolist() == ["d2", "d4", "d6", "d1"]
    assert run["rank_file"].tolist() == [1, 2, 1, 1]
    np.testing.assert_allclose(run["score"], [0.9, 0.9, 0.5, 0.5])
    qrels = read_qrels(QRELS)
    assert qrels["relevance"].tolist() == [1, 0, 2, 1, 1, 0, -2]


@pytest.mark.parametrize("codec", ["gzip", "bz2", "lzma"])
def test_compressed_runs_and_qrels_read_as_the_plain_files(tmp_path, codec):
    """NIST distributes runs gzipped (``input.<run>.gz``): gzip, bzip2 and xz files are read as
    they are (told by their first bytes); a damaged one is an error naming it."""
    import importlib

    module = importlib.import_module(codec)
    packed = []
    for path in (*RUNS, QRELS):
        target = tmp_path / f"{path.name}.z"
        target.write_bytes(module.compress(path.read_bytes()))
        packed.append(target)
    for plain, target in zip(RUNS, packed, strict=False):
        pd.testing.assert_frame_equal(read_trec_run(target), read_trec_run(plain))
    pd.testing.assert_frame_equal(read_qrels(packed[-1]), read_qrels(QRELS))
    broken = tmp_path / "broken.z"
    broken.write_bytes(packed[0].read_bytes()[:-8])
    with pytest.raises(BundleError, match=f"a damaged {codec} file"):
        read_trec_run(broken)


def test_ranks_follow_trec_eval_not_the_rank_column():
    tables, _ = import_trec(QRELS, RUNS)
    runs = tables["runs"]
    a = runs[(runs["system"] == "sysA") & (runs["query_id"] == "q1")]
    # d2 and d7 tie at score 2.0: decreasing docno puts d7 first, whatever the file says
    assert a["answer"].tolist() == ["d1", "d7", "d2", "d3"]
    assert a["rank"].tolist() == [1, 2, 3, 4]
    assert a["rank_file"].tolist() == [1, 3, 2, 4]
    b = runs[(runs["system"] == "sysB") & (runs["query_id"] == "q1")]
    # tie at 0.9: d4 before d2 although the file ranks d2 first
    assert b["answer"].tolist() == ["d4", "d2"]
    assert b["rank"].tolist() == [1, 2]
    assert b["source"].tolist() == ["sysB.run:3", "sysB.run:2"]


def test_bundle_encoding():
    tables, config = import_trec(QRELS, RUNS)
    queries = tables["queries"]
    assert queries["query_id"].tolist() == ["q1", "q2", "q3", "q4"]
    assert queries["in_qrels"].tolist() == ["true", "true", "true", "false"]
    assert queries["relevant"].tolist() == [3, 1, 0, 0]
    j = tables["judgments"]
    # relevance > 0 is correct; 0 and negative grades are wrong
    assert j["label"].tolist() == ["1", "0", "1", "1", "1", "0", "0"]
    assert j["relevance"].tolist() == [1, 0, 2, 1, 1, 0, -2]
    assert len(tables["runs"]) == 10
    assert config.matching.casefold is False
    mapping = config.label_map()
    assert (mapping["1"], mapping["0"]) == ("correct", "wrong")


def test_depth_keeps_the_top_k():
    tables, _ = import_trec(QRELS, RUNS, depth=1)
    runs = tables["runs"]
    assert (runs["rank"] == 1).all()
    kept = set(zip(runs["system"], runs["query_id"], runs["answer"], strict=True))
    assert kept == {
        ("sysA", "q1", "d1"),
        ("sysA", "q2", "d5"),
        ("sysB", "q1", "d4"),
        ("sysB", "q2", "d6"),
        ("sysB", "q4", "d1"),
    }
    with pytest.raises(ValueError, match="depth"):
        import_trec(QRELS, RUNS, depth=0)


def test_without_qrels():
    tables, _ = import_trec(None, RUNS[:1])
    assert set(tables) == {"queries", "runs"}
    assert tables["queries"]["query_id"].tolist() == ["q1", "q2"]
    assert (tables["queries"]["in_qrels"] == "false").all()


@pytest.mark.parametrize(
    ("depth", "unjudged", "a", "b"),
    [
        # A: q1 d1 R, d7 unjudged, d2 W, d3 R; q2 d5 R, d8 unjudged.  B: q1 d4 R, d2 W; q2 d6 W;
        # q4 d1 unjudged (q4 is not in the qrels: not evaluated, as trec_eval skips it).
        # gt = relevant documents = 3 + 1.
        # the bundle's default for TREC: unjudged documents are not relevant (trec_eval)
        (None, None, (3, 3, 0, 3 / 6, 3 / 4), (1, 2, 1, 1 / 3, 1 / 4)),
        (1, None, (2, 0, 0, 1.0, 2 / 4), (1, 1, 1, 1 / 2, 1 / 4)),
        # TAC's rule: unjudged responses ignored (precision over judged documents)
        (None, "ignore", (3, 1, 2, 3 / 4, 3 / 4), (1, 2, 1, 1 / 3, 1 / 4)),
        (1, "ignore", (2, 0, 0, 1.0, 2 / 4), (1, 1, 1, 1 / 2, 1 / 4)),
    ],
)
def test_end_to_end_official_scores(tmp_path, depth, unjudged, a, b):
    tables, config = import_trec(QRELS, RUNS, depth)
    task = load_task(write_bundle(tmp_path / "b", tables, config))
    s = official_scores(task, OfficialPolicy(unassessed=unjudged)).set_index("system")
    assert (s["gt"] == 4).all()
    for system, (right, wrong, ignored, precision, recall) in (("sysA", a), ("sysB", b)):
        row = s.loc[system]
        assert (row["right"], row["wrong"], row["ignored"]) == (right, wrong, ignored)
        assert row["precision"] == pytest.approx(precision)
        assert row["recall"] == pytest.approx(recall)


def test_document_ids_are_case_sensitive(tmp_path):
    run = write(tmp_path, "r.run", "q1 Q0 D1 1 2.0 s\nq1 Q0 d1 2 1.0 s\n")
    qrels = write(tmp_path, "q.txt", "q1 0 d1 1\n")
    tables, config = import_trec(qrels, [run])
    task = load_task(write_bundle(tmp_path / "b", tables, config))
    assert task.outputs["fact"].nunique() == 2
    row = official_scores(task).iloc[0]
    assert (row["right"], row["unassessed"]) == (1, 1)


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("q1 Q0 d1 1 2.0\n", "expected 6 whitespace-separated columns"),
        ("q1 Q0 d1 one 2.0 s\n", "rank 'one' is not an integer"),
        ("q1 Q0 d1 1.5 2.0 s\n", "rank '1.5' is not an integer"),
        ("q1 Q0 d1 inf 2.0 s\n", "rank 'inf' is not an integer"),
        ("q1 Q0 d1 1e400 2.0 s\n", "rank '1e400' is not an integer"),
        ("q1 Q0 d1 1e30 2.0 s\n", "rank '1e30' is not an integer"),
        ("q1 Q0 d1 1 high s\n", "score 'high' is not a finite number"),
        ("q1 Q0 d1 1 nan s\n", "score 'nan' is not a finite number"),
        ("q1 Q0 d1 1 2.0 other\n", "run tag 'other' differs from 's'"),
        ("q1 Q0 d0 1 2.0 s\n", "document 'd0' retrieved twice for query 'q1'"),
    ],
)
def test_bad_run_line(tmp_path, text, what):
    run = write(tmp_path, "r.run", "q1 Q0 d0 1 3.0 s\n\n" + text)
    expect_error(lambda: read_trec_run(run), run, 3, what)


@pytest.mark.parametrize("table_bytes", [0, 1 << 26])
def test_repeated_document_found_by_table_and_by_sort(tmp_path, monkeypatch, table_bytes):
    """A (qid, docno) pair seen twice among others is found whether the pairs are counted in a
    table (few possible pairs) or sorted (too many for a table)."""
    from receval.formats import trec

    monkeypatch.setattr(trec, "PAIR_TABLE_BYTES", table_bytes)
    lines = [f"q{q} Q0 d{d} {d + 1} {9 - d} s" for q in range(3) for d in range(5)]
    run = write(tmp_path, "ok.run", "\n".join(lines) + "\n")
    assert len(read_trec_run(run)) == 15
    run = write(tmp_path, "r.run", "\n".join([*lines, "q1 Q0 d3 6 0.5 s"]) + "\n")
    expect_error(
        lambda: read_trec_run(run), run, 16, "document 'd3' retrieved twice for query 'q1'"
    )
    assert trec._repeats(np.array([4, 0, 4]), 5) and not trec._repeats(np.array([4, 0, 3]), 5)


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("q1 0 d2\n", "expected 4 whitespace-separated columns"),
        ("q1 0 d2 yes\n", "relevance 'yes' is not an integer"),
        ("q1 0 d2 -inf\n", "relevance '-inf' is not an integer"),
        ("q1 0 d1 0\n", "document 'd1' judged twice for query 'q1'"),
    ],
)
def test_bad_qrels_line(tmp_path, text, what):
    qrels = write(tmp_path, "q.txt", "q1 0 d1 1\n" + text)
    expect_error(lambda: import_trec(qrels, RUNS[:1]), qrels, 2, what)


def test_same_tag_in_two_files(tmp_path):
    other = write(tmp_path, "copy.run", "# copy\nq1 Q0 d1 1 2.0 sysA\n")
    expect_error(lambda: import_trec(None, [RUNS[0], other]), other, 2, "run tag 'sysA' also names")


def test_empty_run(tmp_path):
    run = write(tmp_path, "r.run", "\n# nothing\n")
    expect_error(lambda: read_trec_run(run), run, None, "no data lines")


def test_plain_and_irregular_run_files_read_the_same(tmp_path):
    """The Arrow fast path (single spaces) and the line-by-line reader agree, errors included."""
    import pandas as pd

    plain = "".join(
        f"q{q} Q0 d{d} {d + 1} {1.0 / (d + 1)!r} tagA\n" for q in range(3) for d in range(5)
    )
    irregular = "# a comment\n\n" + plain.replace(" Q0 ", "\tQ0  ")
    (tmp_path / "plain.txt").write_text(plain)
    (tmp_path / "irregular.txt").write_text(irregular)
    a = read_trec_run(tmp_path / "plain.txt")
    b = read_trec_run(tmp_path / "irregular.txt")
    pd.testing.assert_frame_equal(a.drop(columns="line"), b.drop(columns="line"))
    assert a["line"].tolist() == list(range(1, 16))
    assert b["line"].tolist() == list(range(3, 18))
    broken = plain.splitlines(keepends=True)
    broken[6] = "q1 Q0 dX 2 0.5\n"  # five fields on line 7
    (tmp_path / "broken.txt").write_text("".join(broken))
    with pytest.raises(BundleError, match=r"broken.txt:7: expected 6 whitespace-separated"):
        read_trec_run(tmp_path / "broken.txt")


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace(" Q0 ", "  Q0 ", 1),  # a run of spaces
        lambda t: " " + t,  # a leading space
        lambda t: t.replace("\n", " \n", 1),  # a trailing space
        lambda t: t.replace("\n", "\n# note\n", 1),  # a comment line
        lambda t: t.replace("\n", "\n\n", 1),  # a blank line
        lambda t: t.replace("d1 ", "d1\u00a0 ", 1),  # non-ASCII (NBSP is whitespace to split)
        lambda t: t.rstrip("\n"),  # no final newline
    ],
)
def test_almost_plain_run_files_read_as_str_split_does(tmp_path, edit):
    """Whatever the Arrow reader would split differently goes through the line-by-line reader."""
    plain = "".join(
        f"q{q} Q0 d{d} {d + 1} {1.0 / (d + 1)!r} tagA\n" for q in range(2) for d in range(4)
    )
    (tmp_path / "plain.txt").write_text(plain)
    (tmp_path / "edited.txt").write_text(edit(plain), encoding="utf-8")
    a = read_trec_run(tmp_path / "plain.txt")
    b = read_trec_run(tmp_path / "edited.txt")
    cols = ["qid", "docno", "rank_file", "score", "tag"]
    assert b[cols].astype(str).values.tolist() == a[cols].astype(str).values.tolist()


@pytest.mark.parametrize("table_format", ["tsv", "parquet"])
def test_import_trec_command(tmp_path, table_format):
    """The CLI writes the bundle in either format (same tables); no progress bar in a pipe."""
    from click.testing import CliRunner

    from receval.cli import cli
    from receval.formats.tables import LINE, find_table, read_table

    args = ["import", "trec", str(tmp_path / "b"), "--qrels", str(QRELS), "--format", table_format]
    result = CliRunner().invoke(cli, args + [arg for r in RUNS for arg in ("--runs", str(r))])
    assert result.exit_code == 0, result.output
    assert result.output == f"wrote {tmp_path / 'b'}: 4 queries, 2 runs, 7 judgments\n"
    tables, _ = import_trec(QRELS, RUNS)
    for name, expected in tables.items():
        got = read_table(find_table(tmp_path / "b", name)).drop(columns=LINE)
        assert got.astype(str).values.tolist() == expected.astype(str).values.tolist(), name


def test_import_trec_command_does_not_import_pandas(tmp_path):
    """pyarrow imports pandas (0.15-0.2 s) on any conversion from Python or numpy; importing
    plain files builds its Arrow values from buffers (receval.formats.buffers) instead."""
    import subprocess
    import sys

    run = write(tmp_path, "a.run", "q1 Q0 d1 1 3.0 sysA\nq1 Q0 d2 2 2.5 sysA\nq2 Q0 d5 1 5 sysA\n")
    qrels = write(tmp_path, "qrels.txt", "q1 0 d1 1\nq1 0 d3 0\nq3 0 d1 2\n")
    code = (
        "import sys; from receval.operations import import_trec; "
        f"import_trec({str(tmp_path / 'b')!r}, [{str(run)!r}], qrels={str(qrels)!r}); "
        "print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert (tmp_path / "b" / "queries.tsv").read_text() == (
        "query_id\tin_qrels\trelevant\nq1\ttrue\t1\nq3\ttrue\t1\nq2\tfalse\t0\n"
    )


def _reader_outcome(path: Path, read):
    try:
        table, lines = read()
    except BundleError as exc:
        return ("error", str(exc))
    return ([table.column(j).to_pylist() for j in range(table.num_columns)], lines.tolist())


def test_every_reader_splits_as_str_split_does(tmp_path):
    """Tabs, runs of whitespace, CRLF, blank and comment lines, wrong field counts: the whole
    reader (Arrow's CSV reader on tab-separated files, Arrow's whitespace splitter on other ASCII
    files) gives the fields, line numbers and first error of one ``str.split`` per line."""
    from receval.formats import trec

    rng = np.random.default_rng(7)
    names = trec.RUN_FIELDS
    words = ["301", "Q0", "d-1", "12.5", "tag", "a#b", "#x"]
    seps = [" ", "\t", "\t", "  ", " \t ", "\x0b", "\x0c"]
    for case in range(400):
        lines = []
        for _ in range(rng.integers(1, 6)):
            k = rng.choice([6, 6, 6, 6, 5, 7, 0])
            line = str(rng.choice(seps)).join(str(rng.choice(words)) for _ in range(k))
            line = (
                str(rng.choice(["", "", " ", "\t"])) + line + str(rng.choice(["", "", "\r", " "]))
            )
            lines.append(("# c " if rng.random() < 0.05 else "") + line)
        raw = ("\n".join(lines) + str(rng.choice(["", "\n"]))).encode()
        path = tmp_path / f"r{case}.run"
        path.write_bytes(raw)

        def reference(path=path, raw=raw):
            rows, numbers = trec._split(path, trec.decode_text(path, raw), 6, "qid Q0 docno")
            import pyarrow as pa

            return pa.table(
                {n: pa.array(rows[:, j], pa.string()) for j, n in enumerate(names)}
            ), numbers

        got = _reader_outcome(path, lambda path=path: trec._fields(path, names, "qid Q0 docno"))
        assert got == _reader_outcome(path, reference), raw


def test_tab_separated_runs_take_a_columnar_reader(tmp_path, monkeypatch):
    """A run as NIST distributes it (tab-separated) or with runs of whitespace never reaches the
    line-by-line reader (it was 5.1 s of a 5.8 s import of real TREC 2003 Robust runs)."""
    from receval.formats import trec

    def refuse(*args, **kwargs):
        raise AssertionError("the line-by-line reader was used")

    monkeypatch.setattr(trec, "_split", refuse)
    plain = "".join(
        f"30{q}\tQ0\tFBIS3-{d}\t{d + 1}\t{5.0 - d}\tpircRB04t3\n"
        for q in range(3)
        for d in range(5)
    )
    (tmp_path / "tabs.txt").write_text(plain)
    (tmp_path / "mixed.txt").write_text(
        "# header\n\n" + plain.replace("\tQ0\t", "  Q0 \t").replace("\n", " \r\n")
    )
    a = read_trec_run(tmp_path / "tabs.txt")
    b = read_trec_run(tmp_path / "mixed.txt")
    pd.testing.assert_frame_equal(a.drop(columns="line"), b.drop(columns="line"))
    assert b["line"].tolist() == list(range(3, 18))
