"""The compact Task: run rows as integer codes (Categorical text columns), read one file at a
time, with the same values as the bundle's files say (checked against a plain reading)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from receval.task import Task, load_task, normalize_answers


def _write_bundle(root):
    (root / "runs").mkdir(parents=True)
    (root / "queries.tsv").write_text("query_id\nq1\nq2\nq3\n", encoding="utf-8")
    (root / "runs" / "A.tsv").write_text(
        "query_id\tanswer\tscore\tteam\tprovenance\tnote\n"
        "q2\t Paris \t0.5\tT1\tD1\tx\n"
        "q1\tRome\t0.9\t\tD2\ty\n"
        "q1\trome\t0.95\tT1\t\tz\n"  # the same fact again: collapsed, the higher score kept
        "q3\tStraße\t\tT1\tD3\t\n",
        encoding="utf-8",
    )
    pd.DataFrame(
        {
            "query_id": ["q1", "q3", "q2"],
            "answer": ["ROME", "berlin", "paris"],
            "score": [1.0, 2, 3],
        }
    ).to_parquet(root / "runs" / "B.parquet", index=False)
    (root / "runs" / "C.tsv").write_text("query_id\tanswer\n", encoding="utf-8")  # empty
    (root / "judgments.tsv").write_text(
        "query_id\tanswer\tlabel\nq1\trome\tC\nq3\tMadrid\tW\n", encoding="utf-8"
    )


@pytest.fixture
def task(tmp_path) -> Task:
    _write_bundle(tmp_path / "b")
    return load_task(tmp_path / "b")


def test_text_columns_are_categoricals_with_sorted_categories(task):
    for col in ("system", "team", "query_id", "answer", "answer_raw", "provenance", "note"):
        dtype = task.raw_outputs[col].dtype
        assert isinstance(dtype, pd.CategoricalDtype), col
        cats = list(dtype.categories)
        assert cats == sorted(cats), col
    assert task.raw_outputs["fact"].dtype == np.int64
    assert task.empty_systems == ("C",)


def test_values_equal_a_plain_reading_of_the_files(task, tmp_path):
    root = tmp_path / "b"
    a = pd.read_csv(root / "runs" / "A.tsv", sep="\t", dtype=str, keep_default_na=False)
    b = pd.read_parquet(root / "runs" / "B.parquet")
    raw = task.raw_outputs
    assert list(raw["system"].astype(str)) == ["A"] * 4 + ["B"] * 3
    assert list(raw["answer_raw"].astype(str)) == [*a["answer"], *b["answer"]]
    want = normalize_answers(pd.Series([*a["answer"], *b["answer"]]), task.config.matching)
    assert list(raw["answer"].astype(str)) == list(want)
    assert list(raw["team"].astype(str)) == ["T1"] * 4 + ["B"] * 3  # a blank cell: the system's
    assert list(raw["provenance"].astype(str)) == ["D1", "D2", "", "D3", "", "", ""]
    assert list(raw["note"].astype(str)) == ["x", "y", "z", "", "", "", ""]
    assert list(raw["_line"]) == [2, 3, 4, 5, 1, 2, 3]
    np.testing.assert_array_equal(raw["score"], [0.5, 0.9, 0.95, np.nan, 1.0, 2.0, 3.0])
    # facts: sorted (query_id, normalised answer) over every table, runs and judgments
    pairs = sorted({*zip(raw["query_id"].astype(str), want, strict=True), ("q3", "madrid")})
    assert list(zip(task.facts["query_id"], task.facts["answer"], strict=True)) == pairs
    for q, ans, f in zip(raw["query_id"].astype(str), want, raw["fact"], strict=True):
        assert pairs[f] == (q, ans)


def test_duplicates_collapse_to_the_highest_score(task):
    out = task.outputs
    a = out[out["system"] == "A"]
    assert len(out) == 6 and task.duplicate_rows == 1
    rome = a[a["answer"] == "rome"]
    assert rome["score"].tolist() == [0.95] and rome["copies"].tolist() == [2]
    assert rome["answer_raw"].astype(str).tolist() == ["rome"]
    assert task.facts.loc[task.facts["answer"] == "rome", "systems"].tolist() == [2]


def test_frames_give_the_same_task(task, tmp_path):
    root = tmp_path / "b"
    a = pd.read_csv(root / "runs" / "A.tsv", sep="\t", dtype=str, keep_default_na=False)
    b = pd.read_parquet(root / "runs" / "B.parquet").astype(str)
    runs = pd.concat([a.assign(system="A"), b.assign(system="B")], ignore_index=True).fillna("")
    judgments = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str)
    other = Task.from_frames(
        runs, judgments, queries=pd.DataFrame({"query_id": ["q1", "q2", "q3"]})
    )
    cols = ["system", "team", "query_id", "answer", "answer_raw", "fact", "copies"]
    left = task.outputs[cols].astype({c: str for c in cols[:5]})
    right = other.outputs[cols].astype({c: str for c in cols[:5]})
    pd.testing.assert_frame_equal(left, right)
    pd.testing.assert_frame_equal(task.facts, other.facts)


def test_an_error_in_a_later_file_names_that_file_and_line(tmp_path):
    from receval.errors import BundleError

    root = tmp_path / "b"
    _write_bundle(root)
    (root / "runs" / "D.tsv").write_text("query_id\tanswer\nq1\tx\nq9\ty\n", encoding="utf-8")
    with pytest.raises(BundleError, match=r"D\.tsv:3: query_id 'q9' is not in queries"):
        load_task(root)


def test_teams_follow_their_systems_in_any_file_order():
    runs = pd.DataFrame(
        {
            "system": ["zeta", "alpha", "zeta", "mid"],
            "team": ["TZ", "TA", "", ""],
            "query_id": ["q1", "q1", "q2", "q1"],
            "answer": ["a", "b", "c", "d"],
        }
    )
    task = Task.from_frames(runs)
    assert task.teams == {"alpha": "TA", "mid": "mid", "zeta": "TZ"}
    got = task.raw_outputs[["system", "team"]].astype(str).to_numpy().tolist()
    assert got == [["zeta", "TZ"], ["alpha", "TA"], ["zeta", "TZ"], ["mid", "mid"]]


def test_a_large_mostly_distinct_extra_column_stays_plain_text(tmp_path):
    """A per-row note (``source = file:line``) in a large run is held as Arrow text, not
    hashed into a Categorical; a run folder mixing a plain and a coded form of one column reads
    the same values either way, and ``score`` texts are parsed in the plain form too."""
    from receval.formats.coded import SNIFF_ROWS

    root = tmp_path / "b"
    (root / "runs").mkdir(parents=True)
    n = SNIFF_ROWS + 10
    (root / "queries.tsv").write_text("query_id\nq1\nq2\n", encoding="utf-8")
    pd.DataFrame(
        {
            "query_id": np.where(np.arange(n) % 2 == 0, "q1", "q2"),
            "answer": [f"d{i}" for i in range(n)],
            "score": np.linspace(0, 1, n),
            "source": [f"A.txt:{i + 1}" for i in range(n)],
            "kind": np.where(np.arange(n) % 3 == 0, "x", "y"),
        }
    ).to_parquet(root / "runs" / "A.parquet", index=False)
    (root / "runs" / "B.tsv").write_text(
        "query_id\tanswer\tscore\tsource\nq1\td1\t0.5\tB.txt:1\nq2\td2\t\tB.txt:2\n",
        encoding="utf-8",
    )
    task = load_task(root)
    raw = task.raw_outputs
    assert not isinstance(raw["source"].dtype, pd.CategoricalDtype)
    assert isinstance(raw["kind"].dtype, pd.CategoricalDtype)
    assert list(raw["source"].iloc[[0, n - 1, n, n + 1]]) == [
        "A.txt:1",
        f"A.txt:{n}",
        "B.txt:1",
        "B.txt:2",
    ]
    assert list(raw["kind"].iloc[[0, 1, n]]) == ["x", "y", ""]
    assert raw["score"].iloc[n] == 0.5 and np.isnan(raw["score"].iloc[n + 1])


def test_a_bad_score_in_a_large_text_run_names_its_line(tmp_path):
    from receval.errors import BundleError
    from receval.formats.coded import SNIFF_ROWS

    root = tmp_path / "b"
    root.mkdir()
    n = SNIFF_ROWS + 5
    (root / "queries.tsv").write_text("query_id\nq1\n", encoding="utf-8")
    scores = [f"{i / n:.9f}" for i in range(n)]
    scores[n - 2] = "nan?"
    lines = "".join(f"A\tq1\td{i}\t{s}\n" for i, s in enumerate(scores))
    (root / "runs.tsv").write_text("system\tquery_id\tanswer\tscore\n" + lines, encoding="utf-8")
    with pytest.raises(BundleError) as err:
        load_task(root)
    assert err.value.line == n  # header = line 1, row i on line i + 2
    assert "'nan?' is not a finite number" in str(err.value)


def _runs_frame(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(
        {
            "system": np.repeat(["A", "B", "C"], n // 3),
            "query_id": rng.choice(["q1", "q2", "q3"], n),
            "answer": [f"d{i % 17}" for i in range(n)],
            "score": rng.random(n),
        }
    )
    # repeated rows repeat their score (a repeat with another score is an error, issue 23)
    frame["score"] = frame.groupby(["system", "query_id", "answer"])["score"].transform("first")
    return frame


def _bundle_with(root, write_runs) -> Task:
    root.mkdir(parents=True)
    (root / "queries.tsv").write_text("query_id\nq1\nq2\nq3\n", encoding="utf-8")
    (root / "judgments.tsv").write_text(
        "query_id\tanswer\tlabel\nq1\td1\tC\nq2\td2\tW\n", encoding="utf-8"
    )
    write_runs(root)
    return load_task(root)


def _same_outputs(a: Task, b: Task) -> None:
    cols = ["system", "query_id", "answer", "score", "fact"]
    key = ["system", "query_id", "answer"]
    left = a.outputs[cols].astype({"system": str, "query_id": str, "answer": str})
    right = b.outputs[cols].astype({"system": str, "query_id": str, "answer": str})
    pd.testing.assert_frame_equal(
        left.sort_values(key, ignore_index=True), right.sort_values(key, ignore_index=True)
    )


def test_parquet_row_groups_and_partitioned_datasets_load_as_one_table(tmp_path, monkeypatch):
    """A runs.parquet of many row groups is read group by group; runs/system=<name>/ (Spark's
    partitionBy) and a runs.parquet/ folder of part files are the same runs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from receval.bundle import sources as sources_module

    monkeypatch.setattr(sources_module, "WHOLE_FILE_ROWS", 0)  # split even a small file
    frame = _runs_frame()
    table = pa.Table.from_pandas(frame, preserve_index=False)
    whole = _bundle_with(
        tmp_path / "whole", lambda r: frame.to_csv(r / "runs.tsv", sep="\t", index=False)
    )
    groups = _bundle_with(
        tmp_path / "groups", lambda r: pq.write_table(table, r / "runs.parquet", row_group_size=7)
    )
    _same_outputs(whole, groups)
    assert list(groups.raw_outputs["_line"])[:9] == list(range(1, 10))  # rows of the file
    assert len(set(groups.raw_outputs["_file"])) == 1

    def hive(root):
        pq.write_to_dataset(table, root / "runs", partition_cols=["system"])
        (root / "runs" / "_SUCCESS").write_text("", encoding="utf-8")

    partitioned = _bundle_with(tmp_path / "hive", hive)
    _same_outputs(whole, partitioned)
    assert sorted(partitioned.systems) == ["A", "B", "C"]

    def parts(root):
        (root / "runs.parquet").mkdir()
        pq.write_table(table.slice(0, 25), root / "runs.parquet" / "part-0.parquet")
        pq.write_table(table.slice(25), root / "runs.parquet" / "part-1.parquet")

    _same_outputs(whole, _bundle_with(tmp_path / "parts", parts))


def test_errors_in_a_later_row_group_or_a_partition_name_their_row(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from receval.bundle import sources as sources_module
    from receval.errors import BundleError

    monkeypatch.setattr(sources_module, "WHOLE_FILE_ROWS", 0)

    frame = _runs_frame()
    frame.loc[45, "query_id"] = "q9"
    table = pa.Table.from_pandas(frame, preserve_index=False)
    with pytest.raises(BundleError) as err:
        _bundle_with(
            tmp_path / "g", lambda r: pq.write_table(table, r / "runs.parquet", row_group_size=7)
        )
    assert err.value.line == 46 and "'q9' is not in queries" in str(err.value)

    clean = pa.Table.from_pandas(_runs_frame(), preserve_index=False)

    def mislabelled(root):
        folder = root / "runs" / "system=A"
        folder.mkdir(parents=True)
        pq.write_table(clean.slice(30, 10), folder / "part-0.parquet")  # system B rows

    with pytest.raises(BundleError) as err:
        _bundle_with(tmp_path / "p", mislabelled)
    assert err.value.line == 1 and "differs from the partition folder system=A" in str(err.value)


def test_large_vocabularies_look_up_in_duckdb_with_the_same_codes(tmp_path, monkeypatch):
    from receval.task import Vocabulary

    _write_bundle(tmp_path / "small")
    plain = load_task(tmp_path / "small")
    monkeypatch.setattr(Vocabulary, "LARGE", 2)  # every lookup past two values joins in DuckDB
    _write_bundle(tmp_path / "large")
    joined = load_task(tmp_path / "large")
    for col in ("system", "query_id", "answer", "answer_raw", "fact"):
        assert list(joined.raw_outputs[col]) == list(plain.raw_outputs[col]), col


TSV_CASES = {
    "plain": 'system\tquery_id\tanswer\tscore\nA\tq1\tParis\t0.5\nB\tq2\t"Rome"\t\n',
    "crlf": "system\tquery_id\tanswer\r\nA\tq1\t São Paulo \r\nB\tq2\tStraße\r\n",
    "no final newline": "system\tquery_id\tanswer\nA\tq1\tx\nA\tq2\ty",
    "blank line": "system\tquery_id\tanswer\nA\tq1\tx\n\nA\tq2\ty\n",
    "blank last line": "system\tquery_id\tanswer\nA\tq1\tx\nA\tq2\ty\n\n",
    "blank first line": "system\tquery_id\tanswer\n\nA\tq1\tx\n",
    "blank crlf line": "system\tquery_id\tanswer\r\nA\tq1\tx\r\n\r\nA\tq2\ty\r\n",
    "tabs only line": "system\tquery_id\tanswer\nA\tq1\tx\n \t\u3000\t\nA\tq2\ty\n",
    "bom": "\ufeffsystem\tquery_id\tanswer\nA\tq1\tx\n",
    "header spaces": " system \tquery_id\tanswer\nA\tq1\tx\n",
}


@pytest.mark.parametrize("case", sorted(TSV_CASES))
def test_arrow_tsv_reading_equals_the_text_reader(tmp_path, case):
    """Plain TSV runs are parsed by Arrow (no Python string per field); every value and line
    number equals the line-by-line reader's, and files that are not plain fall back to it."""
    from receval.formats.coded import coded_from_frame, read_coded
    from receval.formats.tables import read_plain_tsv, read_table

    path = tmp_path / "runs.tsv"
    path.write_bytes(TSV_CASES[case].encode("utf-8"))
    plain = not case.startswith(("blank", "tabs only", "bom"))
    assert (read_plain_tsv(path) is not None) == plain
    fast = read_coded(path)
    slow = coded_from_frame(read_table(path), path)
    assert fast.columns == slow.columns and fast.rows == slow.rows
    for name in fast.columns:
        assert fast.plain_text(name).to_pylist() == slow.plain_text(name).to_pylist(), name
    assert [fast.line(i) for i in range(fast.rows)] == [slow.line(i) for i in range(slow.rows)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("system\tquery_id\tanswer\nA\tq1\n", "expected 3 tab-separated fields, found 2"),
        ("system\tquery_id\tsystem\nA\tq1\tx\n", "duplicate column name"),
        ("system\tquery_id\tanswer\nA\tq1\tx\u0000\n", "NUL byte"),
    ],
)
def test_a_tsv_the_arrow_reader_refuses_gets_the_text_readers_error(tmp_path, text, message):
    from receval.errors import BundleError
    from receval.formats.coded import read_coded

    path = tmp_path / "runs.tsv"
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(BundleError, match=message):
        read_coded(path)


@pytest.mark.parametrize("n_facts", [50, 10**9])  # slots per pair, or one sort of the pairs
def test_repeated_system_fact_pairs_are_found_either_way(n_facts):
    from receval.task import output_repeats

    rng = np.random.default_rng(3)
    system = rng.integers(0, 4, 400)
    fact = rng.integers(0, min(n_facts, 10**6), 400)
    unique = np.unique(system * n_facts + fact, return_index=True)[1]
    system, fact = system[unique], fact[unique]
    assert not output_repeats(system, fact, 4, n_facts)
    again = np.r_[system, system[7]], np.r_[fact, fact[7]]
    assert output_repeats(*again, 4, n_facts)


def test_chunk_dictionaries_are_told_prefixes_by_their_buffers():
    """Arrow's chunked dictionary_encode gives every chunk a view of one dictionary: a prefix
    found by the buffers' addresses (no value comparison, which was quadratic in the rows);
    equal values in other buffers are still a prefix, different ones are not; the codes index
    the last chunk's dictionary either way."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from receval.formats import coded

    column = pa.chunked_array([["b", "a"], ["c", "b"], ["d"]])
    encoded = pc.dictionary_encode(column)
    last = encoded.chunks[-1].dictionary
    assert all(coded._same_buffers(c.dictionary, last) for c in encoded.chunks)
    copy = pa.array(last.to_pylist()[:2])
    assert not coded._same_buffers(copy, last) and coded._prefix_of(copy, last)
    assert not coded._prefix_of(pa.array(["a", "b"]), last)
    assert not coded._prefix_of(pa.array(["b", "a", "c", "d", "e"]), last)
    table = coded.CodedTable(Path("x.tsv"), 5, ["answer"])
    values, codes = coded._dictionary(column, table, "answer")
    assert np.asarray(values.to_pylist(), dtype=object)[codes].tolist() == [
        "b", "a", "c", "b", "d"
    ]  # fmt: skip
