"""``import trec`` writes the runs' ``system, query_id, answer`` columns beside the run table
(:mod:`receval.formats.runs_sidecar`); ``score --estimator official`` reads them instead of
parsing the table, only while they belong to it, and writes the same output set, byte for byte,
as without them and as the in-memory path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import receval
from receval.cli import cli
from receval.formats.runs_sidecar import SIDECAR, read_runs_columns
from receval.official import direct
from receval.operations import import_trec
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


def _files(tmp_path: Path, seed: int, n_systems: int = 4, n_queries: int = 12) -> tuple:
    """TREC qrels and runs as runs are written (each topic's lines together, by decreasing
    score, topics in numeric order so that 1000 sorts before 999), with ties, documents shared
    across topics, unjudged documents, a topic only in the qrels and one only in the runs."""
    rng = np.random.default_rng(seed)
    docs = [f"DOC-{i:03d}" for i in range(40)]
    topics = [995 + q for q in range(n_queries)]  # 995 .. 1006: string order differs
    lines = []
    for t in topics[:-1]:
        for d in rng.choice(docs, size=int(rng.integers(1, 20)), replace=False):
            lines.append(f"{t} 0 {d} {int(rng.choice([-1, 0, 0, 1, 2]))}\n")
    lines.append("7 0 DOC-000 1\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(lines))
    runs = []
    for s in range(n_systems):
        out = ["# a comment line\n"] if s == 1 else []
        for t in topics:
            if rng.random() < 0.2:
                continue
            chosen = rng.choice(docs, size=int(rng.integers(1, 25)), replace=False)
            scores = np.sort(np.round(rng.random(len(chosen)), 1))[::-1]  # ties
            for r, (d, score) in enumerate(zip(chosen, scores, strict=True), start=1):
                sep = "  " if s == 1 else "\t"  # runs of spaces in one run
                out.append(f"{t}{sep}Q0{sep}{d}{sep}{r}{sep}{score}{sep}run{s}\n")
        path = tmp_path / f"input.run{s}"
        path.write_text("".join(out))
        runs.append(path)
    return qrels, runs


def _imported(tmp_path: Path, seed: int, table_format: str = "tsv", **kwargs) -> Path:
    qrels, runs = _files(tmp_path, seed)
    root = tmp_path / "bundle"
    import_trec(root, runs, qrels=qrels, table_format=table_format, **kwargs)
    return root


def _outputs(root: Path, out: Path, **options) -> dict[str, bytes]:
    result = receval.score(root, estimator="official", **options)
    result.write(out, report=False)
    return {name: (out / name).read_bytes() for name in FILES}


def _uses_sidecar(root: Path, monkeypatch) -> bool:
    """Whether the direct official path takes the sidecar (the run table is never parsed)."""
    read = []
    monkeypatch.setattr(direct, "_read_runs", lambda paths: read.append(paths))
    view = direct.official_view(root, ScoreOptions(estimator="official"), None, None)
    monkeypatch.undo()
    return view is not None and not read


@pytest.mark.parametrize("table_format", ["tsv", "parquet"])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("options", [{}, {"average": "micro"}, {"unjudged": "ignore"}])
def test_sidecar_scores_as_the_table_and_the_in_memory_path(
    tmp_path, monkeypatch, table_format, seed, options
):
    root = _imported(tmp_path, seed, table_format)
    assert _uses_sidecar(root, monkeypatch)
    sidecar = _outputs(root, tmp_path / "sidecar", **options)
    loaded = _outputs(root, tmp_path / "loaded", out_of_core=False, **options)
    assert sidecar == loaded
    (root / SIDECAR / "meta.json").unlink()  # a bundle without it: the table is parsed
    assert not _uses_sidecar(root, monkeypatch)
    assert _outputs(root, tmp_path / "parsed", **options) == sidecar


@pytest.mark.parametrize("depth", [1, 3])
def test_sidecar_of_a_cut_import(tmp_path, monkeypatch, depth):
    root = _imported(tmp_path, 3, depth=depth)
    assert _uses_sidecar(root, monkeypatch)
    assert _outputs(root, tmp_path / "a") == _outputs(root, tmp_path / "b", out_of_core=False)


def test_sidecar_with_a_quote_in_a_document_id(tmp_path, monkeypatch):
    """A run the unquoted CSV writer refuses is written by the joined-lines writer; the
    sidecar holds its rows alike."""
    qrels, runs = _files(tmp_path, 4)
    runs[0].write_text(runs[0].read_text().replace("DOC-001", 'DOC"1'))
    root = tmp_path / "bundle"
    import_trec(root, runs, qrels=qrels)
    assert _uses_sidecar(root, monkeypatch)
    assert _outputs(root, tmp_path / "a") == _outputs(root, tmp_path / "b", out_of_core=False)


def _edit(path: Path, old: bytes, new: bytes, keep_time: bool) -> None:
    stat = os.stat(path)
    raw = path.read_bytes()
    assert old in raw
    path.write_bytes(raw.replace(old, new, 1))
    if keep_time:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.parametrize("keep_time", [False, True])
def test_edited_run_table_is_read_not_the_stale_sidecar(tmp_path, monkeypatch, keep_time):
    """A run table changed after the import (even in place, to the same size and time) is
    parsed: the sidecar no longer belongs to it."""
    root = _imported(tmp_path, 5)
    before = _outputs(root, tmp_path / "before")
    _edit(root / "runs.tsv", b"\tDOC-0", b"\tDOX-0", keep_time)
    assert read_runs_columns(root, root / "runs.tsv") is None
    assert not _uses_sidecar(root, monkeypatch)
    after = _outputs(root, tmp_path / "after")
    assert after != before
    assert after == _outputs(root, tmp_path / "loaded", out_of_core=False)


def test_touched_run_table_is_parsed(tmp_path, monkeypatch):
    root = _imported(tmp_path, 6)
    os.utime(root / "runs.tsv")
    assert read_runs_columns(root, root / "runs.tsv") is None
    assert not _uses_sidecar(root, monkeypatch)


@pytest.mark.parametrize("damage", ["answers", "blocks", "meta", "version", "rows"])
def test_damaged_sidecar_is_ignored(tmp_path, monkeypatch, damage):
    root = _imported(tmp_path, 7)
    expected = _outputs(root, tmp_path / "expected")
    folder = root / SIDECAR
    meta = json.loads((folder / "meta.json").read_text())
    if damage in ("answers", "blocks"):
        path = folder / f"{damage}.arrow"
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "meta":
        (folder / "meta.json").write_text("{")
    else:
        meta[damage] += 1
        (folder / "meta.json").write_text(json.dumps(meta))
    assert read_runs_columns(root, root / "runs.tsv") is None
    assert _outputs(root, tmp_path / "got") == expected


def test_cli_import_writes_the_sidecar_and_score_uses_it(tmp_path, monkeypatch):
    qrels, runs = _files(tmp_path, 8)
    root = tmp_path / "b"
    args = ["import", "trec", str(root), "--qrels", str(qrels)]
    result = CliRunner().invoke(cli, args + [a for r in runs for a in ("--runs", str(r))])
    assert result.exit_code == 0, result.output
    meta = json.loads((root / SIDECAR / "meta.json").read_text())
    assert meta["runs"]["name"] == "runs.tsv" and meta["plain_answers"] is True
    assert (root / ".receval" / ".gitignore").read_text().endswith("\n*\n")
    assert meta["rows"] == (root / "runs.tsv").read_text().count("\n") - 1
    assert _uses_sidecar(root, monkeypatch)
    out = tmp_path / "out"
    args = ["score", str(root), "--estimator", "official", "--out", str(out), "--no-report"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    record = json.loads((out / "run.json").read_text())
    assert set(record["inputs"]["checksums"]) == {
        "judgments.tsv",
        "queries.tsv",
        "runs.tsv",
        "task.toml",
    }


@pytest.mark.parametrize("seed", [0, 1])
def test_streamed_runs_table_is_the_bytes_of_the_table_in_bundle_order(tmp_path, seed):
    """The rows written as slices of each run as read (:func:`receval.formats.trec_order.
    write_tsv_rows`) are the bytes of the runs table ranked and written whole: runs with
    many ties (taken in order), and one with only its topics' blocks to move (slices)."""
    from receval.formats.bundle import write_bundle
    from receval.formats.trec import import_trec_tables

    qrels, runs = _files(tmp_path, seed)
    blocks = tmp_path / "input.blocks"  # 2 segments of 40 rows: written as slices
    lines = [f"{t}\tQ0\tD{d}\t{d}\t{100 - d}.5\tblocks\n" for t in (999, 1000) for d in range(20)]
    blocks.write_text("".join(lines))
    runs.append(blocks)
    import_trec(tmp_path / "b", runs, qrels=qrels)
    tables, config = import_trec_tables(qrels, runs, name="b", score_as_written=True)
    write_bundle(tmp_path / "whole", tables, config)
    for name in ("runs.tsv", "queries.tsv", "judgments.tsv", "task.toml"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()


def test_repeated_document_is_reported_before_a_reused_tag(tmp_path):
    """Repeats are checked once a run is ranked, and still reported before a tag that another
    file used, at the repeat's own line, as when the run was checked as read."""
    first, second = tmp_path / "a.run", tmp_path / "b.run"
    first.write_text("1 Q0 d1 1 3 s\n")
    second.write_text("2 Q0 d2 1 3 s\n1 Q0 d1 1 2 s\n1 Q0 d3 2 1.5 s\n1 Q0 d1 3 1 s\n")
    args = ["import", "trec", str(tmp_path / "t"), "--runs", str(first), "--runs", str(second)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"error: {second}:4: document 'd1' retrieved twice for query '1'"
    )
    second.write_text("2 Q0 d2 1 3 s\n")
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "run tag 's' also names" in result.output


def _long_runs(tmp_path: Path) -> tuple[Path, list[Path]]:
    """Three runs of 40 topics × 400 documents (a run table of ~2.6 MB, more than the 16
    blocks of 64 KiB the first sidecar version fingerprinted)."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{t} 0 D{t}-{d} {d % 2}\n" for t in range(40) for d in range(30)))
    runs = []
    for s in range(3):
        path = tmp_path / f"long.run{s}"
        lines = (f"{t} Q0 D{t}-{(d * (1, 3, 7)[s]) % 400} {d + 1} {400 - d} r{s}\n"
                 for t in range(40) for d in range(400))  # fmt: skip
        path.write_text("".join(lines))
        runs.append(path)
    return qrels, runs


def test_an_edit_that_keeps_size_and_time_anywhere_invalidates_the_sidecar(tmp_path, monkeypatch):
    """One byte changed between the blocks the old fingerprint sampled, the size kept and the
    modification time restored: the full SHA-256 no longer matches, the table is parsed, and
    ``score`` scores the table as it is now."""
    qrels, runs = _long_runs(tmp_path)
    root = tmp_path / "bundle"
    import_trec(root, runs, qrels=qrels)
    path = root / "runs.tsv"
    size = path.stat().st_size
    assert size > 16 * (1 << 16)
    assert _uses_sidecar(root, monkeypatch)
    gap = (size - (1 << 16)) // 15  # the old blocks began at multiples of this
    raw = path.read_bytes()
    at = raw.index(b"\tD", gap // 2 + (1 << 16) // 2) + 2  # a document id mid-gap
    assert (1 << 16) < at < gap
    old, new = raw[at : at + 1], b"X" if raw[at : at + 1] != b"X" else b"Y"
    _edit(path, raw[at - 8 : at + 1], raw[at - 8 : at] + new, keep_time=True)
    assert path.stat().st_size == size and old != new
    assert read_runs_columns(root, path) is None
    assert not _uses_sidecar(root, monkeypatch)
    assert _outputs(root, tmp_path / "a") == _outputs(root, tmp_path / "b", out_of_core=False)


def test_the_sidecar_records_the_full_hash_and_score_hashes_the_table_once(tmp_path, monkeypatch):
    """``meta.json`` holds the table's SHA-256; ``score`` hashes the table once (the sidecar's
    check) and ``run.json`` records that digest."""
    import hashlib

    from receval.formats import runs_sidecar

    root = _imported(tmp_path, 9)
    path = root / "runs.tsv"
    meta = json.loads((root / SIDECAR / "meta.json").read_text())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert meta["runs"]["sha256"] == digest and meta["version"] == runs_sidecar.VERSION
    hashed = []
    real = runs_sidecar.file_sha256
    monkeypatch.setattr(runs_sidecar, "file_sha256", lambda p: hashed.append(p) or real(p))
    out = tmp_path / "out"
    args = ["score", str(root), "--estimator", "official", "--out", str(out), "--no-report"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert hashed.count(path) == 1
    assert json.loads((out / "run.json").read_text())["inputs"]["checksums"]["runs.tsv"] == digest


def test_a_first_version_sidecar_is_ignored(tmp_path, monkeypatch):
    """A sidecar of version 1 (a sampled fingerprint, no full hash) is not trusted."""
    root = _imported(tmp_path, 10)
    meta_path = root / SIDECAR / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["version"] = 1
    meta_path.write_text(json.dumps(meta))
    assert read_runs_columns(root, root / "runs.tsv") is None
    assert not _uses_sidecar(root, monkeypatch)
