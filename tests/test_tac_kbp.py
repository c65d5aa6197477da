"""TAC-KBP SF importer: formats, bundle encoding, and errors naming file and line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from receval.errors import BundleError
from receval.formats.bundle import write_bundle
from receval.formats.tac_kbp import (
    import_tac_kbp,
    is_ldc_query_file,
    normalize_provenance,
    parse_provenance,
    read_assessments,
    read_ldc_queries,
    read_sf_queries,
    read_sf_run,
    sf_query_hash,
)
from receval.task import load_task

FIXTURES = Path(__file__).parent / "fixtures" / "tac"
SHARED = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "tac-kbp-coldstart-scorer-fixtures"
)
RUNS = [FIXTURES / "teamA1.tab.txt", FIXTURES / "teamB1.tab.txt", FIXTURES / "teamC1.tab.txt"]
Q1 = "CSSF15_ENG_0000000001"
Q2 = "CSSF15_ENG_0000000002"
Q3 = "CSSF15_ENG_0000000003"

RUN_LINE = f"{Q1}\tper:children\tteamX\tDOC1:10-50\tCarl Smith\tPER\tDOC1:20-29\t0.9"
QREL_LINE = (
    f"{Q1}_0_001\t{Q1}:per:children\tDOC1:10-50\tCarl Smith\tDOC1:20-29\tC\tNAM\tC\t{Q1}:1\tNAM"
)


def expect_error(call, path: Path, line: int | None, text: str) -> BundleError:
    with pytest.raises(BundleError) as info:
        call()
    err = info.value
    assert err.path == str(path)
    assert err.line == line
    assert text in err.message
    where = str(path) if line is None else f"{path}:{line}"
    assert str(err).startswith(f"{where}: ")
    return err


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# provenance


def test_normalize_provenance_sorts_spans_and_cuts_long_ones():
    assert normalize_provenance("D:100-120,D:0-60") == "D:0-60,D:100-120"
    assert normalize_provenance(" D:5-8 ") == "D:5-8"
    # spans longer than 200 characters are cut to 200, as CS-Score does before comparing
    assert normalize_provenance("D:100-350") == "D:100-299"
    assert normalize_provenance("D:100-350") == normalize_provenance("D:100-400")
    # not a TAC provenance: compared as written (stripped)
    assert normalize_provenance(" page 3 ") == "page 3"


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("", "empty"),
        ("DOC1-10-20", "not DOCID:start-end"),
        ("DOC1:50-10", "ends before it starts"),
        ("D:1-2,D:3-4,D:5-6,D:7-8,D:9-10", "at most 4"),
    ],
)
def test_parse_provenance_rejects(text, what):
    with pytest.raises(ValueError, match=what):
        parse_provenance(text)


def test_parse_provenance_reads_triples():
    assert parse_provenance("A:1-2,B:3-4") == [("A", 1, 2), ("B", 3, 4)]


# ---------------------------------------------------------------------------------------------
# readers


def test_read_sf_queries():
    queries = read_sf_queries(FIXTURES / "sf-query.xml")
    assert queries["sf_query_id"].tolist() == [Q1, Q2, Q3]
    assert queries["slots"].iloc[0] == ("per:children", "per:schools_attended")
    assert queries["slot"].tolist() == [
        "per:children",
        "per:date_of_birth",
        "org:top_members_employees",
    ]
    assert queries["entity"].iloc[2] == "Acme Corp"


def test_read_runs_in_each_layout(tmp_path):
    a = read_sf_run(FIXTURES / "teamA1.tab.txt")
    assert a.attrs["layout"] == "2015–2016"
    assert len(a) == 10  # the comment line and the blank line are skipped
    assert a["line"].tolist()[:2] == [2, 3]
    assert a["filler_type"].iloc[0] == "PER"
    assert (a["node_id"] == "").all()
    b = read_sf_run(FIXTURES / "teamB1.tab.txt")
    assert b.attrs["layout"] == "2017"
    assert b["node_id"].tolist()[:2] == [":Entity2", ":Entity3"]
    np.testing.assert_allclose(b["confidence"], [0.9, 0.8, 0.7, 0.8, 0.6])
    # 2014: no filler type column
    old = write(tmp_path, "run2014.txt", f"{Q1}\tper:children\tteamX\tD:1-9\tCarl\tD:2-5\t1.0\n")
    c = read_sf_run(old)
    assert c.attrs["layout"] == "2014"
    assert c["filler"].iloc[0] == "Carl"
    assert c["filler_provenance"].iloc[0] == "D:2-5"
    assert c["filler_type"].iloc[0] == ""


def test_read_assessments_in_both_layouts():
    new = read_assessments(FIXTURES / "qrel.txt")
    old = read_assessments(FIXTURES / "qrel-2015.txt")
    assert new.attrs["layout"] == "2016–2017"
    assert old.attrs["layout"] == "2014–2015"
    cols = ["sf_query_id", "slot", "filler", "code", "equivalence_class", "filler_provenance"]
    assert new[cols].equals(old[cols])
    assert new["filler_mention_type"].iloc[3] == "NOM"
    assert (old["filler_mention_type"] == "").all()
    # "0" (no class) becomes empty
    assert new["equivalence_class"].iloc[4] == ""
    assert new["equivalence_class"].iloc[0] == f"{Q1}:1"


def test_bare_equivalence_class_number_is_qualified(tmp_path):
    # 2014 assessments number classes within the query
    path = write(
        tmp_path, "qrel2014.txt", f"000001\t{Q1}:per:children\tD:1-9\tCarl\tD:2-5\tC\tC\t3\n"
    )
    assert read_assessments(path)["equivalence_class"].iloc[0] == f"{Q1}:3"


# ---------------------------------------------------------------------------------------------
# the bundle


def test_import_encodes_the_bundle():
    tables, config = import_tac_kbp(FIXTURES / "sf-query.xml", RUNS, FIXTURES / "qrel.txt")
    queries, runs, judgments = tables["queries"], tables["runs"], tables["judgments"]
    assert queries["query_id"].tolist() == [
        f"{Q1}:per:children",
        f"{Q2}:per:date_of_birth",
        f"{Q3}:org:top_members_employees",
    ]
    assert (queries["hop"] == "0").all()
    # hop-1 rows are skipped by default, and counted
    assert runs.attrs["hop1_rows_skipped"] == 1
    assert judgments.attrs["hop1_rows_skipped"] == 1
    assert len(runs) == 9 + 5 + 1
    assert len(judgments) == 13
    assert runs["system"].unique().tolist() == ["teamA1", "teamB1", "teamC1"]
    first = runs.iloc[0]
    assert first["query_id"] == f"{Q1}:per:children"
    assert first["answer"] == "Carl Smith"
    assert first["provenance"] == "DOC1:20-29"
    assert first["relation_provenance"] == "DOC1:10-50"
    assert first["source"] == "teamA1.tab.txt:2"
    assert first["score"] == pytest.approx(0.9)
    j = judgments.iloc[3]
    assert (j["answer"], j["label"], j["equivalence_class"]) == ("the daughter", "C", f"{Q1}:2")
    assert (j["filler_mention_type"], j["ec_mention_type"]) == ("NOM", "NAM")
    assert j["response_id"] == f"{Q1}_0_004"
    # the TAC label vocabulary, INEXACT counted wrong (CS-Score's default)
    mapping = config.label_map()
    assert {k: mapping[k.casefold()] for k in "CWXISL"} == {
        "C": "correct",
        "W": "wrong",
        "X": "inexact",
        "I": "ignore",
        "S": "inexact",
        "L": "inexact",
    }
    assert config.inexact_policy == "wrong"


def test_gzipped_inputs_import_as_the_plain_files(tmp_path):
    """Runs, assessments and the query XML may be gzipped (read as they are)."""
    import gzip

    def packed(path: Path) -> Path:
        target = tmp_path / f"{path.name}.gz"
        target.write_bytes(gzip.compress(path.read_bytes()))
        return target

    plain = import_tac_kbp(FIXTURES / "sf-query.xml", RUNS, FIXTURES / "qrel.txt")[0]
    gz = import_tac_kbp(
        packed(FIXTURES / "sf-query.xml"), [packed(r) for r in RUNS], packed(FIXTURES / "qrel.txt")
    )[0]
    for name in ("queries", "runs", "judgments"):
        columns = [c for c in plain[name].columns if c not in ("_file", "source")]
        pd.testing.assert_frame_equal(
            gz[name][columns].reset_index(drop=True), plain[name][columns].reset_index(drop=True)
        )


def test_imported_bundle_loads(tmp_path):
    tables, config = import_tac_kbp(FIXTURES / "sf-query.xml", RUNS, FIXTURES / "qrel.txt")
    task = load_task(write_bundle(tmp_path / "b", tables, config))
    assert task.systems == ["teamA1", "teamB1", "teamC1"]
    assert len(task.raw_outputs) == 15
    # teamB1 outputs "Ivy Lee" twice (same response): one output row with two copies
    ivy = task.outputs[(task.outputs["system"] == "teamB1") & (task.outputs["answer"] == "ivy lee")]
    assert ivy["copies"].tolist() == [2]
    # extra columns survive the round trip
    assert {"relation_provenance", "hop", "source", "node_id"} <= set(task.raw_outputs.columns)
    assert {"equivalence_class", "provenance", "response_id"} <= set(task.judgments.columns)
    # categories follow the vocabulary: X is inexact and counts as wrong (value 0)
    frank = task.judgments[task.judgments["answer"] == "frank"].iloc[0]
    assert (frank["category"], frank["value"]) == ("inexact", 0.0)
    hal = task.judgments[task.judgments["answer"] == "hal"].iloc[0]
    assert hal["category"] == "ignore" and np.isnan(hal["value"])


def test_include_hop1_keeps_derived_queries(tmp_path):
    tables, config = import_tac_kbp(
        FIXTURES / "sf-query.xml", RUNS, FIXTURES / "qrel.txt", include_hop1=True
    )
    queries = tables["queries"]
    derived = queries[queries["hop"] == "1"]
    assert derived["query_id"].tolist() == [f"{Q1}_aaaaaaaaaaaa:per:schools_attended"]
    assert derived["parent_query"].tolist() == [f"{Q1}:per:children"]
    assert (tables["runs"]["hop"] == "1").sum() == 1
    assert (tables["judgments"]["hop"] == "1").sum() == 1
    task = load_task(write_bundle(tmp_path / "b", tables, config))
    assert len(task.queries) == 4


def test_import_without_assessments():
    tables, _ = import_tac_kbp(FIXTURES / "sf-query.xml", RUNS[:1], None)
    assert set(tables) == {"queries", "runs"}


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared TAC scorer fixtures not available")
def test_import_official_test_suite_k1():
    folder = SHARED / "SCORER_TS_K1"
    tables, _ = import_tac_kbp(
        folder / "sf-query.xml", [folder / "SCORER_TS_K1.valid.ldc.tab.txt"], folder / "qrel.txt"
    )
    assert len(tables["runs"]) == 6
    assert tables["runs"].attrs["hop1_rows_skipped"] == 4
    assert len(tables["judgments"]) == 18
    assert tables["judgments"].attrs["hop1_rows_skipped"] == 36
    assert tables["judgments"]["equivalence_class"].nunique() == 2


# ---------------------------------------------------------------------------------------------
# bad input: error names the file and the line


def _import_run(tmp_path, text, *, qrel: str | None = None):
    run = write(tmp_path, "run.txt", text)
    qpath = write(tmp_path, "qrel.txt", qrel) if qrel is not None else None
    return run, lambda: import_tac_kbp(FIXTURES / "sf-query.xml", [run], qpath)


@pytest.mark.parametrize(
    ("line2", "what"),
    [
        ("\t".join(RUN_LINE.split("\t")[:6]), "expected 7, 8 or 9 tab-separated columns"),
        (RUN_LINE.replace("DOC1:20-29", "DOC1:29-20"), "bad filler provenance"),
        (RUN_LINE.replace("DOC1:10-50", "DOC1 10-50"), "bad relation provenance"),
        (RUN_LINE.replace("0.9", "high"), "confidence 'high' is not a number"),
        (RUN_LINE.replace("0.9", "1.5"), "is not a number in [0, 1]"),
        (RUN_LINE.replace("Carl Smith", ""), "empty filler column"),
        (RUN_LINE.replace(Q1, "CSSF15_ENG_9999999999"), "is not in the query file"),
        (RUN_LINE.replace("per:children", "per:spouse"), "is not the slot query"),
        (RUN_LINE + "\t:Entity1", "one file must use one format"),
    ],
)
def test_bad_run_line(tmp_path, line2, what):
    run, call = _import_run(tmp_path, RUN_LINE + "\n" + line2 + "\n")
    expect_error(call, run, 2, what)


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (QREL_LINE.replace("\tC\tNAM\tC\t", "\tQ\tNAM\tC\t"), "unknown assessment code 'Q'"),
        (QREL_LINE.replace(f"\t{Q1}:1\t", "\t0\t"), "without an equivalence class"),
        (
            QREL_LINE.replace("\tC\tNAM\tC\t", "\tW\tNAM\tW\t"),
            "with equivalence class",
        ),
        (QREL_LINE.replace(f"\t{Q1}:per:children\t", f"\t{Q1}\t"), "is not of the form"),
        (QREL_LINE + "\textra", "expected 8 or 10 tab-separated columns"),
        (QREL_LINE.replace("DOC1:20-29", "DOC1:20"), "bad filler provenance"),
        (QREL_LINE.replace(Q1, "CSSF15_ENG_9999999999"), "is not in the query file"),
    ],
)
def test_bad_assessment_line(tmp_path, line, what):
    qrel = QREL_LINE + "\n# a comment\n" + line + "\n"
    path = write(tmp_path, "qrel.txt", qrel)
    expect_error(lambda: import_tac_kbp(FIXTURES / "sf-query.xml", RUNS[:1], path), path, 3, what)


def test_run_id_shared_by_two_files(tmp_path):
    a = write(tmp_path, "a.txt", RUN_LINE + "\n")
    b = write(tmp_path, "b.txt", "\n" + RUN_LINE + "\n")
    expect_error(
        lambda: import_tac_kbp(FIXTURES / "sf-query.xml", [a, b], None),
        b,
        2,
        "run id 'teamX' also appears in",
    )


def test_empty_and_undecodable_runs(tmp_path):
    empty = write(tmp_path, "empty.txt", "# nothing\n\n")
    expect_error(lambda: read_sf_run(empty), empty, None, "no data lines")
    bad = write(tmp_path, "bad.txt", (RUN_LINE + "\n").encode() + b"\xff\xfe\n")
    expect_error(lambda: read_sf_run(bad), bad, 2, "not valid UTF-8")


@pytest.mark.parametrize(
    ("xml", "line", "what"),
    [
        (
            "<query_set>\n<query id='a'>\n<slot0>per:age</slot0>\n</query_set>\n",
            4,
            "not well-formed",
        ),
        (
            "<query_set>\n<query id='a'>\n<mentions><mention><docid>D</docid></mention></mentions>"
            "<slot0>per:age</slot0></query>\n</query_set>\n",
            2,
            "LDC query file",
        ),
        (
            "<query_set>\n\n<query id='a'><name>x</name></query>\n</query_set>\n",
            3,
            "has no <slot0>",
        ),
        (
            "<query_set>\n<query id='a'><slot0>per:age</slot0></query>\n"
            "<query id='a'><slot0>per:age</slot0></query>\n</query_set>\n",
            3,
            "duplicate query id 'a'",
        ),
        ("<query_set>\n<query><slot0>per:age</slot0></query>\n</query_set>\n", 2, "without an id"),
        ("<query_set>\n</query_set>\n", None, "no <query> elements"),
    ],
)
def test_bad_query_file(tmp_path, xml, line, what):
    path = write(tmp_path, "q.xml", xml)
    expect_error(lambda: read_sf_queries(path), path, line, what)


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.txt"
    expect_error(lambda: read_sf_run(missing), missing, None, "no such file")


# ---------------------------------------------------------------------------------------------
# LDC query files and no query file


def test_sf_query_hash_is_the_official_expansion():
    # CS-Score -expand names the entry point SIMPSONS_011:55-59 of LDC query CS17_4567
    # (slots per:children, per:schools_attended) CSSF17_ENG_afddc4ed21 in the official test suite
    assert sf_query_hash("SIMPSONS_011", 55, 59, ("per:children", "per:schools_attended")) == (
        "afddc4ed21"
    )


def test_read_ldc_queries_expands_entry_points(tmp_path):
    path = write(
        tmp_path,
        "ldc.xml",
        "<query_set>\n<query id='CS17_1'>\n<mentions>\n"
        "<mention><name>Homer</name><docid>D1</docid><beg>1</beg><end>5</end></mention>\n"
        "<mention><name>H. Simpson</name><docid>D2</docid><beg>7</beg><end>16</end></mention>\n"
        "<mention><name>Homer</name><docid>D1</docid><beg>1</beg><end>5</end></mention>\n"
        "</mentions>\n<enttype>per</enttype><slot0>per:children</slot0>\n</query>\n</query_set>\n",
    )
    assert is_ldc_query_file(path)
    queries = read_ldc_queries(path)
    # the repeated mention is the same SF query
    assert queries["sf_query_id"].tolist() == [
        sf_query_hash("D1", 1, 5, ("per:children",)),
        sf_query_hash("D2", 7, 16, ("per:children",)),
    ]
    assert queries["ldc_query_id"].tolist() == ["CS17_1", "CS17_1"]
    assert queries["entity"].tolist() == ["Homer", "H. Simpson"]
    bad = write(
        tmp_path,
        "bad.xml",
        "<query_set>\n<query id='CS17_1'><mentions><mention><docid>D1</docid><beg>x</beg>"
        "<end>5</end></mention></mentions><slot0>per:age</slot0></query>\n</query_set>\n",
    )
    expect_error(lambda: read_ldc_queries(bad), bad, 2, "integer <beg> and <end>")


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared TAC scorer fixtures not available")
@pytest.mark.parametrize("case", ["SCORER_TS_K1", "SCORER_TS_MERGE", "SCORER_TS_INEXACT_RESPONSE"])
def test_three_query_sources_give_the_same_bundle(case):
    folder = SHARED / case
    runs = sorted(folder.glob("*.valid.ldc.tab.txt"))
    qrel = folder / "qrel.txt"
    sf, _ = import_tac_kbp(folder / "sf-query.xml", runs, qrel, include_hop1=True)
    ldc, _ = import_tac_kbp(folder / "ldc-query.xml", runs, qrel, include_hop1=True)
    none, _ = import_tac_kbp(None, runs, qrel, include_hop1=True)
    key = ["query_id", "hop", "parent_query"]
    expected = sf["queries"][key].sort_values("query_id").reset_index(drop=True)
    for tables in (ldc, none):
        got = tables["queries"][key].sort_values("query_id").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, expected)
        for name in ("runs", "judgments"):
            pd.testing.assert_frame_equal(tables[name], sf[name])
    hop0 = ldc["queries"][ldc["queries"]["hop"] == "0"]
    assert hop0["ldc_query_id"].str.startswith("CS17_").all()


def test_without_a_query_file_derived_ids_are_hops(tmp_path):
    tables, _ = import_tac_kbp(None, RUNS, FIXTURES / "qrel.txt", include_hop1=True)
    queries = tables["queries"].set_index("query_id")
    assert queries.loc[f"{Q1}:per:children", "hop"] == "0"
    derived = queries[queries["hop"] == "1"]
    assert len(derived) and (derived["parent_query"] == f"{Q1}:per:children").all()


def test_ldc_query_unknown_to_the_runs_keeps_the_common_prefix(tmp_path):
    run = write(
        tmp_path,
        "r.txt",
        "CSSF17_ENG_" + sf_query_hash("D1", 1, 5, ("per:age",)) + "\tper:age\tr1\tD1:1-9\t"
        "40\tSTRING\tD1:7-8\t0.5\n",
    )
    ldc = write(
        tmp_path,
        "ldc.xml",
        "<query_set>\n<query id='CS17_1'><mentions>"
        "<mention><name>A</name><docid>D1</docid><beg>1</beg><end>5</end></mention>"
        "<mention><name>B</name><docid>D2</docid><beg>1</beg><end>5</end></mention>"
        "</mentions><slot0>per:age</slot0></query>\n</query_set>\n",
    )
    tables, _ = import_tac_kbp(ldc, [run], None)
    assert tables["queries"]["sf_query_id"].tolist() == [
        "CSSF17_ENG_" + sf_query_hash("D1", 1, 5, ("per:age",)),
        "CSSF17_ENG_" + sf_query_hash("D2", 1, 5, ("per:age",)),
    ]
    other = write(tmp_path, "o.txt", "XYZ_1\tper:age\tr1\tD1:1-9\t40\tSTRING\tD1:7-8\t0.5\n")
    expect_error(lambda: import_tac_kbp(ldc, [other], None), other, 1, "not in the query file")


def test_tac_bundles_stay_micro(tmp_path):
    """``import tac-kbp`` leaves ``[official] average`` unset: the official census stays
    CS-Score's micro average (an imported TREC bundle is macro, see test_official_trec)."""
    from click.testing import CliRunner

    from receval.cli import cli

    fixtures = Path(__file__).resolve().parent / "fixtures" / "tac"
    bundle = tmp_path / "tac"
    args = ["import", "tac-kbp", str(bundle), "--queries", str(fixtures / "sf-query.xml")]
    for run in ("teamA1.tab.txt", "teamB1.tab.txt", "teamC1.tab.txt"):
        args += ["--runs", str(fixtures / run)]
    args += ["--assessments", str(fixtures / "qrel.txt")]
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert "average" not in (bundle / "task.toml").read_text()
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["score", str(bundle), "--out", str(out), "--estimator", "official", "--no-report"]
    )
    assert result.exit_code == 0, result.output
    board = pd.read_csv(out / "leaderboard.csv")
    assert board["note"].str.contains("micro-averaged").all()
    assert (board["estimator"] == "official").all()
