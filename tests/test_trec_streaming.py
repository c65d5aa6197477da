"""``receval import trec`` streams the runs table (one run in memory at a time): the bundle is
the one :func:`import_trec_tables` + :func:`write_bundle` write (TSV: the same bytes; Parquet:
the same rows), and a bad line exits 2 naming the file and the line, leaving no bundle."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from receval.cli import cli
from receval.formats.bundle import write_bundle
from receval.formats.trec import import_trec_tables

RUNS = (
    "301\tQ0\tFBIS3-1\t1\t12.5\trunA\n301\tQ0\tFT-2\t2\t12.5\trunA\n302\tQ0\tFBIS3-1\t1\t3\trunA\n",
    "# a comment\r\n302  Q0 \tLA-3 1 0.25 runB \r\n301 Q0 FT-2 1 -1e3 runB\r\n",  # mixed
    '303 Q0 D"q 1 1.0 runC\n301 Q0 FT-2 1 7 runC\n',  # a quote character in a document id
)
QRELS = "301 0 FBIS3-1 1\n301 0 FT-2 0\n302 0 LA-3 2\n304 0 X 1\n"


def _files(tmp_path: Path) -> tuple[Path, list[Path]]:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(QRELS)
    runs = []
    for i, text in enumerate(RUNS):
        path = tmp_path / f"input.run{i}"
        path.write_bytes(text.encode())
        runs.append(path)
    return qrels, runs


def _import(tmp_path: Path, out: Path, qrels: Path, runs: list[Path], *extra: str):
    args = ["import", "trec", str(out), "--qrels", str(qrels), *extra]
    return CliRunner().invoke(cli, args + [a for r in runs for a in ("--runs", str(r))])


@pytest.mark.parametrize("depth", [None, 1])
def test_streamed_tsv_bundle_is_the_same_bytes(tmp_path, depth):
    qrels, runs = _files(tmp_path)
    extra = () if depth is None else ("--depth", str(depth))
    result = _import(tmp_path, tmp_path / "streamed", qrels, runs, "--name", "t", *extra)
    assert result.exit_code == 0, result.output
    tables, config = import_trec_tables(qrels, runs, depth, name="t", score_as_written=True)
    write_bundle(tmp_path / "whole", tables, config)
    names = sorted(p.name for p in (tmp_path / "whole").iterdir())
    streamed = sorted(p.name for p in (tmp_path / "streamed").iterdir())
    assert streamed == [".receval", *names]  # and the runs' sidecar (test_runs_sidecar.py)
    for name in names:
        assert (tmp_path / "streamed" / name).read_bytes() == (
            tmp_path / "whole" / name
        ).read_bytes()


def test_streamed_parquet_bundle_has_the_same_rows(tmp_path):
    qrels, runs = _files(tmp_path)
    result = _import(tmp_path, tmp_path / "streamed", qrels, runs, "--format", "parquet")
    assert result.exit_code == 0, result.output
    tables, _ = import_trec_tables(qrels, runs)
    streamed = pq.read_table(tmp_path / "streamed" / "runs.parquet")
    assert streamed.equals(tables["runs"].combine_chunks())
    assert pq.ParquetFile(tmp_path / "streamed" / "runs.parquet").metadata.num_row_groups == 3


@pytest.mark.parametrize("table_format", ["tsv", "parquet"])
def test_bad_line_in_a_later_run_exits_2_and_leaves_no_bundle(tmp_path, table_format):
    qrels, runs = _files(tmp_path)
    runs[2].write_text("303 Q0 D1 1 1.0 runC\n303 Q0 D2 x 1.0 runC\n")
    out = tmp_path / "b"
    result = _import(tmp_path, out, qrels, runs, "--format", table_format)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"error: {runs[2]}:2: rank 'x' is not an integer"
    )
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".b.")]  # no staging folder


def test_existing_bundle_is_refused_before_reading_and_kept(tmp_path):
    qrels, runs = _files(tmp_path)
    out = tmp_path / "b"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    result = _import(tmp_path, out, qrels, runs)
    assert result.exit_code != 0
    assert (out / "keep.txt").read_text() == "x"
    result = _import(tmp_path, out, qrels, runs, "--overwrite")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        ".receval",
        "judgments.tsv",
        "queries.tsv",
        "runs.tsv",
        "task.toml",
    ]


def test_text_hashes_are_equal_exactly_for_equal_texts():
    """The duplicate check's hashes (8 bytes at a time over Arrow's buffers): equal texts have
    equal hashes, in sliced arrays too, and no two distinct texts of this sample collide."""
    import numpy as np
    import pyarrow as pa

    from receval.formats.trec import HASHED_BYTES, _text_hashes

    rng = np.random.default_rng(0)
    alphabet = list("ab1-\x00é")
    texts = ["".join(rng.choice(alphabet, size=rng.integers(0, 15))) for _ in range(5000)]
    for array in (pa.array(texts), pa.array(texts).slice(7), pa.array(texts, pa.large_string())):
        values = array.to_pylist()
        hashes = _text_hashes(pa.chunked_array([array]))
        by_hash: dict[int, str] = {}
        for text, h in zip(values, hashes.tolist(), strict=True):
            assert by_hash.setdefault(h, text) == text
        assert len(by_hash) == len(set(values))
    assert _text_hashes(pa.array(["x" * (HASHED_BYTES + 1)])) is None


@pytest.mark.parametrize("forced", [False, True])
def test_repeated_document_is_found_with_any_hashes(tmp_path, monkeypatch, forced):
    """A document retrieved twice for a query with different scores (not adjacent once
    ranked) is an error at its second line; with every hash forced equal the exact check
    still passes clean runs and finds the repeat."""
    import numpy as np

    import receval.formats.trec as trec
    from receval.errors import BundleError

    if forced:
        monkeypatch.setattr(trec, "_text_hashes", lambda column: np.zeros(len(column), np.uint64))
    clean = tmp_path / "clean.run"
    clean.write_text("1 Q0 d1 1 3 s\n1 Q0 d2 2 2 s\n2 Q0 d1 1 1 s\n")
    assert len(trec.read_trec_run(clean)) == 3
    bad = tmp_path / "bad.run"
    bad.write_text("1 Q0 d1 1 3 s\n1 Q0 d2 2 2 s\n2 Q0 d1 1 1 s\n1 Q0 d1 3 0.5 s\n")
    with pytest.raises(BundleError) as info:
        trec.read_trec_run(bad)
    assert (info.value.line, "'d1' retrieved twice for query '1'") == (
        4,
        info.value.message[info.value.message.index("'d1'") :],
    )
