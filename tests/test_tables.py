"""String-table readers (TSV, CSV, Parquet) with line numbers, and the atomic writers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from receval.errors import BundleError
from receval.formats.tables import (
    LINE,
    atomic_path,
    find_table,
    read_table,
    write_table,
    write_text_atomic,
)


def write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode("utf-8"))
    return path


def rows(frame: pd.DataFrame) -> list[list[str]]:
    return frame.drop(columns=[LINE]).to_numpy().tolist()


# --------------------------------------------------------------------------------------------
# TSV


def test_tsv_values_stay_strings_and_lines_count_from_the_header(tmp_path: Path):
    path = write(
        tmp_path / "t.tsv",
        "query_id\tanswer\tscore\nq1\t007\t1\n\nq2\t\"quoted\" 'x'\t1e-3\n   \nq3\t1.50\t\n",
    )
    frame = read_table(path)
    assert list(frame.columns) == ["query_id", "answer", "score", LINE]
    assert rows(frame) == [
        ["q1", "007", "1"],
        ["q2", "\"quoted\" 'x'", "1e-3"],  # no quoting in TSV: quotes are data
        ["q3", "1.50", ""],
    ]
    assert frame[LINE].tolist() == [2, 4, 6]  # blank lines skipped but counted
    assert frame[LINE].dtype == np.int64


def test_tsv_crlf_and_bom(tmp_path: Path):
    path = write(tmp_path / "t.tsv", b"\xef\xbb\xbfquery_id\tanswer\r\nq1\tParis\r\nq2\tRome\r\n")
    frame = read_table(path)
    assert list(frame.columns) == ["query_id", "answer", LINE]
    assert rows(frame) == [["q1", "Paris"], ["q2", "Rome"]]
    assert frame[LINE].tolist() == [2, 3]


def test_tsv_no_final_newline(tmp_path: Path):
    frame = read_table(write(tmp_path / "t.tsv", "query_id\nq1\nq2"))
    assert rows(frame) == [["q1"], ["q2"]]
    assert frame[LINE].tolist() == [2, 3]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x0c", "\x0b", "\x85", "\x1c", "\r"])
def test_tsv_line_separators_other_than_newline_are_data(tmp_path: Path, separator: str):
    """str.splitlines() would cut these answers in two and shift every later line number."""
    path = write(
        tmp_path / "t.tsv",
        f"query_id\tanswer\nq1\tone{separator}two\nq2\tthree\tEXTRA\n",
    )
    with pytest.raises(BundleError) as info:
        read_table(path)
    assert info.value.line == 3  # the bad row is still reported on its own line
    path = write(tmp_path / "u.tsv", f"query_id\tanswer\nq1\tone{separator}two\nq2\tthree\n")
    frame = read_table(path)
    assert rows(frame) == [["q1", f"one{separator}two"], ["q2", "three"]]
    assert frame[LINE].tolist() == [2, 3]


def test_header_only_gives_an_empty_frame_with_the_columns(tmp_path: Path):
    frame = read_table(write(tmp_path / "t.tsv", "query_id\tanswer\n"))
    assert frame.empty
    assert list(frame.columns) == ["query_id", "answer", LINE]
    assert frame[LINE].dtype == np.int64


def test_header_names_are_stripped(tmp_path: Path):
    frame = read_table(write(tmp_path / "t.tsv", "query_id \t answer\nq1\tx\n"))
    assert list(frame.columns) == ["query_id", "answer", LINE]


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [
        (b"", 1, "empty"),
        (b"\n \n\t\n", 1, "empty"),
        (b"\xef\xbb\xbf", 1, "empty"),
        (b"\xef\xbb\xbf\n\n", 1, "empty"),
        (b"\nquery_id\nq1\n", 1, "header"),
        (b"query_id,answer\nq1,x\n", 1, "comma-separated"),
        (b"query_id\tanswer\nq1\tx\nq2\tx\ty\n", 3, "found 3"),
        (b"query_id\tanswer\nq1\n", 2, "found 1"),
        (b"query_id\tanswer\nq1\tx\nq2\t\xe9\n", 3, "utf-8"),
        (b"query_id\tanswer\nq1\tx\n\nq2\tx\x00\n", 4, "nul"),
        (b"query_id\t\tanswer\n", 1, "empty column name"),
        (b"a\tb\ta\n", 1, "duplicate column name(s) in the header: a"),
        (b"a\t_line\n1\t2\n", 1, "reserved"),
    ],
)
def test_tsv_errors_name_the_line(tmp_path: Path, content: bytes, line: int, words: str):
    path = write(tmp_path / "t.tsv", content)
    with pytest.raises(BundleError) as info:
        read_table(path)
    assert info.value.line == line
    assert info.value.path == str(path)
    assert words in info.value.message.casefold() or words in info.value.message


# --------------------------------------------------------------------------------------------
# CSV


def test_csv_quoting_and_record_start_lines(tmp_path: Path):
    path = write(
        tmp_path / "t.csv",
        'query_id,answer,score\nq1,"Paris, France",0.5\nq2,"two\nlines",\n\nq3,"say ""hi""",1\n',
    )
    frame = read_table(path)
    assert rows(frame) == [
        ["q1", "Paris, France", "0.5"],
        ["q2", "two\nlines", ""],
        ["q3", 'say "hi"', "1"],
    ]
    assert frame[LINE].tolist() == [2, 3, 6]  # a record's line is where it starts


def test_csv_crlf(tmp_path: Path):
    frame = read_table(write(tmp_path / "t.csv", "a,b\r\n1,2\r\n3,4\r\n"))
    assert rows(frame) == [["1", "2"], ["3", "4"]]
    assert frame[LINE].tolist() == [2, 3]


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [
        ("a\tb\n1\t2\n", 1, "tab-separated"),
        ("a,b\n1,2\n3\n", 3, "found 1"),
        ('a,b\n1,2\n3,"unterminated\n4,5\n', 3, "malformed csv"),
        ('a,b\n1,"x"y\n', 2, "malformed csv"),
        ('a,b\n"multi\nline",2\n5,6,7\n', 4, "found 3"),
        (",b\n1,2\n", 1, "empty column name"),
    ],
)
def test_csv_errors_name_the_line(tmp_path: Path, content: str, line: int, words: str):
    path = write(tmp_path / "t.csv", content)
    with pytest.raises(BundleError) as info:
        read_table(path)
    assert info.value.line == line, info.value
    assert words in info.value.message.casefold()


# --------------------------------------------------------------------------------------------
# Parquet


def test_parquet_values_become_strings_faithfully(tmp_path: Path):
    table = pa.table(
        {
            "query_id": pa.array([1, None, 30], type=pa.int64()),  # nulls: still "1", not "1.0"
            "answer": pa.array(["Paris", None, "Rome"]),
            "score": pa.array([0.1, float("nan"), 1e-20]),
            "flag": pa.array([True, False, None]),
            "blob": pa.array([b"caf\xc3\xa9", None, b"x"], type=pa.binary()),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    frame = read_table(path)
    assert list(frame.columns) == ["query_id", "answer", "score", "flag", "blob", LINE]
    assert rows(frame) == [
        ["1", "Paris", "0.1", "True", "café"],
        ["", "", "", "False", ""],
        ["30", "Rome", "1e-20", "", "x"],
    ]
    assert frame[LINE].tolist() == [1, 2, 3]  # row numbers


def test_parquet_drops_the_pandas_index(tmp_path: Path):
    frame = pd.DataFrame({"query_id": ["q1", "q2"]}, index=[10, 20])
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)  # stores __index_level_0__
    assert "__index_level_0__" in pq.read_schema(path).names
    got = read_table(path)
    assert list(got.columns) == ["query_id", LINE]


def test_parquet_empty_table(tmp_path: Path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"query_id": pa.array([], type=pa.string())}), path)
    frame = read_table(path)
    assert frame.empty
    assert list(frame.columns) == ["query_id", LINE]


@pytest.mark.parametrize("content", [b"", b"PAR1", b"not parquet at all", b"PAR1\x00\x01PAR1"])
def test_unreadable_parquet(tmp_path: Path, content: bytes):
    path = write(tmp_path / "t.parquet", content)
    with pytest.raises(BundleError) as info:
        read_table(path)
    assert info.value.line is None
    assert "parquet" in info.value.message.casefold()
    assert "\n" not in str(info.value)


def test_parquet_binary_not_utf8(tmp_path: Path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"answer": pa.array([b"ok", b"\xff"], type=pa.binary())}), path)
    with pytest.raises(BundleError) as info:
        read_table(path)
    assert info.value.line == 2


# --------------------------------------------------------------------------------------------
# finding tables


def test_find_table(tmp_path: Path):
    assert find_table(tmp_path, "runs") is None
    write(tmp_path / "runs.csv", "a\n1\n")
    assert find_table(tmp_path, "runs") == tmp_path / "runs.csv"
    (tmp_path / "queries.tsv").mkdir()  # a folder is not a table
    assert find_table(tmp_path, "queries") is None
    write(tmp_path / "runs.parquet", b"")
    with pytest.raises(BundleError, match="ambiguous"):
        find_table(tmp_path, "runs")


def test_unsupported_suffix(tmp_path: Path):
    with pytest.raises(BundleError, match="unsupported"):
        read_table(write(tmp_path / "t.xlsx", "a\n1\n"))


def test_unreadable_file(tmp_path: Path):
    """A folder named like a table cannot be read: a BundleError, not IsADirectoryError."""
    path = tmp_path / "t.tsv"
    path.mkdir()
    with pytest.raises(BundleError) as info:
        read_table(path)
    assert info.value.line is None
    assert "cannot read" in info.value.message


# --------------------------------------------------------------------------------------------
# writers


@pytest.mark.parametrize("suffix", [".tsv", ".csv", ".parquet"])
def test_write_then_read_round_trip(tmp_path: Path, suffix: str):
    frame = pd.DataFrame(
        {
            "query_id": ["q1", "q2", "q3"],
            "answer": ["Paris, France", 'say "hi"', "007"],
            "prob": [0.1, 1 / 3, 1.0],
        }
    )
    path = tmp_path / f"t{suffix}"
    write_table(path, frame.assign(**{LINE: [9, 9, 9]}))  # _line is never written
    got = read_table(path)
    assert list(got.columns) == ["query_id", "answer", "prob", LINE]
    assert got["query_id"].tolist() == frame["query_id"].tolist()
    assert got["answer"].tolist() == frame["answer"].tolist()
    # floats survive exactly (repr is the shortest round-trip form)
    assert [float(v) for v in got["prob"]] == frame["prob"].tolist()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left behind


def test_tsv_writer_refuses_tabs_and_newlines_and_leaves_the_old_file(tmp_path: Path):
    path = tmp_path / "t.tsv"
    write_table(path, pd.DataFrame({"answer": ["fine"]}))
    before = path.read_bytes()
    with pytest.raises(ValueError, match="tab or newline"):
        write_table(path, pd.DataFrame({"answer": ["ok", "bad\tvalue"]}))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.tsv"]


def _pandas_tsv(frame: pd.DataFrame) -> bytes:
    """What write_table wrote before the Arrow writer: pandas' to_csv, no quoting."""
    import csv
    import io

    out = io.StringIO()
    frame.to_csv(
        out, sep="\t", index=False, quoting=csv.QUOTE_NONE, lineterminator="\n", escapechar=None
    )
    return out.getvalue().encode("utf-8")


def _tricky_frame(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    words = np.array(["", "q1", 'say "hi"', "Zürich", "ß", "a b", "'", "\u2028x", "007", "1.0"])
    floats = rng.standard_normal(rows) * 10.0 ** rng.integers(-20, 20, rows)
    floats[rng.random(rows) < 0.1] = np.nan
    floats[: min(rows, 6)] = [0.0, -0.0, 1e16, 1e-5, 1 / 3, 123456789.0][: min(rows, 6)]
    text = words[rng.integers(0, len(words), rows)]
    with_missing = text.astype(object)
    with_missing[rng.random(rows) < 0.2] = None
    with_nan = text.astype(object)
    with_nan[rng.random(rows) < 0.2] = np.nan
    return pd.DataFrame(
        {
            "text": pd.array(text, dtype="str"),
            "object": text.astype(object),
            "missing": with_missing,
            "nan": with_nan,
            "int": rng.integers(-(10**12), 10**12, rows),
            "float": floats,
            "str_na": pd.Series(with_missing, dtype="str"),
        }
    )


@pytest.mark.parametrize(("rows", "seed"), [(0, 0), (1, 1), (7, 2), (2000, 3)])
def test_tsv_writer_bytes_equal_pandas(tmp_path: Path, rows: int, seed: int):
    """The Arrow TSV writer writes exactly what pandas' to_csv wrote (floats in repr form,
    missing values empty, quotes as they are), for frames and for Arrow tables."""
    frame = _tricky_frame(rows, seed)
    path = tmp_path / "t.tsv"
    write_table(path, frame)
    assert path.read_bytes() == _pandas_tsv(frame)
    table = pa.Table.from_pandas(frame[["text", "int", "float", "str_na"]], preserve_index=False)
    write_table(path, table)
    assert path.read_bytes() == _pandas_tsv(frame[["text", "int", "float", "str_na"]])
    # small blocks: the joins restart cleanly at block boundaries
    from receval.formats.tables import tsv_columns, write_tsv

    write_tsv(path, tsv_columns(frame), rows_per_block=3)
    assert path.read_bytes() == _pandas_tsv(frame)


def test_tsv_writer_other_kinds_go_through_pandas(tmp_path: Path):
    frame = pd.DataFrame(
        {"flag": [True, False], "cat": pd.Categorical(["a", "b"]), "mixed": [1, "x"]}
    )
    path = tmp_path / "t.tsv"
    write_table(path, frame)
    assert path.read_bytes() == _pandas_tsv(frame)


@pytest.mark.parametrize("bad", ["x\ty", "x\ny", "x\ry"])
def test_tsv_writer_names_the_first_bad_value(tmp_path: Path, bad: str):
    frame = pd.DataFrame({"a": ["ok"] * 5, "b": ["ok", "ok", bad, bad, "ok"]})
    for table in (frame, pa.Table.from_pandas(frame, preserve_index=False)):
        with pytest.raises(
            ValueError, match=r"t.tsv: value in column 'b' \(row 3\) contains a tab"
        ):
            write_table(tmp_path / "t.tsv", table)
    assert list(tmp_path.iterdir()) == []


def test_atomic_path_cleans_up_on_failure(tmp_path: Path):
    target = tmp_path / "out.txt"
    write_text_atomic(target, "old\n")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    write_text_atomic(target, "new\n")
    assert target.read_text() == "new\n"


@pytest.mark.parametrize(
    "text",
    [
        "a\tb\nx\t1\ny\t2\n",  # plain
        "a\tb\r\nx\t1\r\ny\t2\r\n",  # CRLF line ends: still plain
        "a\tb\nx\t1\ry\t2\n",  # a lone CR: not plain
        "a\tb\nx\t1\x00\n",  # a NUL byte: not plain
        "\ufeffa\tb\nx\t1\n",  # a byte-order mark: not plain
        "",  # empty: read, never mapped
    ],
)
def test_mapped_file_reads_as_the_read_one(tmp_path, monkeypatch, text):
    """A file mapped into memory (large) is parsed exactly as the same file read (small)."""
    from receval.formats import tables

    path = tmp_path / "t.tsv"
    path.write_bytes(text.encode("utf-8"))
    read = tables.read_plain_tsv(path)
    monkeypatch.setattr(tables, "MAP_BYTES", 0)
    with tables.mapped_bytes(path) as raw:
        assert isinstance(raw, bytes) != bool(text) and raw[:] == text.encode("utf-8")
    mapped = tables.read_plain_tsv(path)
    assert (read is None) == (mapped is None)
    assert read is None or read.equals(mapped)


def test_chunked_text_columns_write_the_same_bytes_as_single_chunks(tmp_path):
    """Columns chunked alike (an imported task: one chunk per file) are written as they are;
    other layouts (an empty chunk, which Arrow's CSV writer garbles, or chunks that differ
    between columns) are combined first: the bytes are the same either way."""
    import pyarrow as pa

    from receval.formats.tables import _tsv_columns_arrow, write_tsv

    layouts = {
        "aligned": ([["a", "b"], ["c"]], [["1", "2"], ["3"]]),
        "empty chunk": ([["a", "b"], [], ["c"]], [["1", "2"], [], ["3"]]),
        "different": ([["a"], ["b", "c"]], [["1", "2"], ["3"]]),
    }
    for name, (left, right) in layouts.items():
        table = pa.table(
            {
                "x": pa.chunked_array(left, pa.string()),
                "n": pa.chunked_array(right, pa.string()),
                "k": pa.chunked_array([[len(c)] * len(c) for c in left], pa.int64()),
            }
        )
        path = tmp_path / f"{name}.tsv"
        write_tsv(path, _tsv_columns_arrow(table))
        k = "\t".join(str(len(c)) for c in left for _ in c).split("\t")
        expected = "x\tn\tk\n" + "".join(
            f"{x}\t{n}\t{m}\n" for x, n, m in zip("abc", "123", k, strict=True)
        )
        assert path.read_text() == expected, name
