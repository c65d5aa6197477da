"""Official-compatible (CS-Score) closed-world scores.

End to end against the official scorer's own outputs (the Cold Start scorer test suite in
``../shared/data``, skipped when absent): import -> write_bundle -> load_task -> official_scores,
compared with the ``SF-ALL-Micro`` hop-0 line of ``*_score.summary`` to 4 decimals and with every
hop-0 count of ``*_score.sf``.  Then each scoring rule on a small synthetic task whose scores were
worked out by hand (tests/fixtures/tac).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_bundle

from receval.formats.bundle import write_bundle
from receval.formats.tac_kbp import import_tac_kbp
from receval.official.responses import categorize_responses
from receval.official.rules import COUNT_COLUMNS, CS_SCORE_SF_DEFAULT, OfficialPolicy
from receval.official.scores import official_leaderboard, official_per_query, official_scores
from receval.task import load_task

SHARED = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "tac-kbp-coldstart-scorer-fixtures"
)
FIXTURES = Path(__file__).parent / "fixtures" / "tac"
RUNS = [FIXTURES / "teamA1.tab.txt", FIXTURES / "teamB1.tab.txt", FIXTURES / "teamC1.tab.txt"]
CASES = ["SCORER_TS_K1", "SCORER_TS_MERGE", "SCORER_TS_INEXACT_RESPONSE"]
Q1 = "CSSF15_ENG_0000000001:per:children"
Q2 = "CSSF15_ENG_0000000002:per:date_of_birth"
Q3 = "CSSF15_ENG_0000000003:org:top_members_employees"

# CS-Score's .sf columns -> ours
SF_COUNTS = {
    "GT": "gt",
    "Submitted": "outputs",
    "Correct": "assessed_correct",
    "Incorrect": "assessed_wrong",
    "Inexact": "assessed_inexact",
    "Unassessed": "unassessed",
    "Dup": "duplicates",
    "Right": "right",
    "Wrong": "wrong",
    "Ignored": "ignored",
}


def _import(tmp_path: Path, queries: Path, runs: list[Path], qrel: Path | None):
    tables, config = import_tac_kbp(queries, runs, qrel)
    return load_task(write_bundle(tmp_path / "bundle", tables, config))


def _sf_lines(path: Path) -> list[dict[str, str]]:
    """Rows of a CS-Score ``.sf`` table (header-keyed; macro lines, which lack counts, dropped)."""
    lines = [ln.split() for ln in path.read_text().splitlines() if ln.strip()]
    header = lines[0]
    return [dict(zip(header, row, strict=True)) for row in lines[1:] if len(row) == len(header)]


# ---------------------------------------------------------------------------------------------
# the official scorer's test suite


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared TAC scorer fixtures not available")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("source", ["sf-query.xml", "ldc-query.xml", None])
def test_matches_official_scorer_hop0_micro(tmp_path, case, source):
    # the SF query file, the LDC query file the scorer was run with (-expand CSSF17), or none
    folder = SHARED / case
    runs = sorted(folder.glob("*.valid.ldc.tab.txt"))
    queries = folder / source if source else None
    task = _import(tmp_path, queries, runs, folder / "qrel.txt")
    scores = official_scores(task)
    assert len(scores) == 1
    row = scores.iloc[0]

    summary = (folder / f"{case}_score.summary").read_text().splitlines()
    micro = [ln.split() for ln in summary if ln.startswith("SF-ALL-Micro")]
    hop0 = [fields for fields in micro if fields[2] == "0"]
    assert len(hop0) == 1
    _, run_id, _, prec, rec, f1 = hop0[0]
    assert row["system"] == run_id
    assert f"{row['precision']:.4f}" == prec
    assert f"{row['recall']:.4f}" == rec
    assert f"{row['f1']:.4f}" == f1

    sf = _sf_lines(folder / f"{case}_score.sf")
    total = [r for r in sf if r["QID/EC"] == "ALL-Micro" and r["Hop"] == "0"]
    assert len(total) == 1
    for theirs, ours in SF_COUNTS.items():
        assert int(total[0][theirs]) == row[ours], theirs

    # every hop-0 query line of the .sf table
    per_query = official_per_query(task).set_index("query_id")
    sf_id = dict(zip(task.queries["sf_query_id"], task.queries["query_id"], strict=True))
    queries = [r for r in sf if r["Hop"] == "0" and r["QID/EC"] in sf_id]
    assert len(queries) == len(task.queries)
    for r in queries:
        mine = per_query.loc[sf_id[r["QID/EC"]]]
        for theirs, ours in SF_COUNTS.items():
            assert int(r[theirs]) == mine[ours], (r["QID/EC"], theirs)
        assert f"{mine['precision']:.4f}" == r["Prec"]
        assert f"{mine['recall']:.4f}" == r["Recall"]


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared TAC scorer fixtures not available")
def test_sf_default_policy_counts_duplicates_wrong(tmp_path):
    # K1 has 6 correct responses in 2 classes: 2 right, 4 duplicates.  Counted wrong (CS-Score's
    # documented SF default) precision becomes 2 / (2 + 4).
    folder = SHARED / "SCORER_TS_K1"
    task = _import(
        tmp_path,
        folder / "sf-query.xml",
        [folder / "SCORER_TS_K1.valid.ldc.tab.txt"],
        folder / "qrel.txt",
    )
    row = official_scores(task, CS_SCORE_SF_DEFAULT).iloc[0]
    assert (row["right"], row["wrong"], row["ignored"]) == (2, 4, 0)
    assert row["precision"] == pytest.approx(1 / 3)


# ---------------------------------------------------------------------------------------------
# every rule on the synthetic task (expected values worked out by hand; see fixtures/tac)


@pytest.fixture
def task(tmp_path):
    return _import(tmp_path, FIXTURES / "sf-query.xml", RUNS, FIXTURES / "qrel.txt")


def _by_system(scores: pd.DataFrame) -> pd.DataFrame:
    return scores.set_index("system")


def test_synthetic_default_policy(task):
    s = _by_system(official_scores(task))
    assert list(s.columns) == [
        "team",
        *COUNT_COLUMNS,
        "queries",
        "precision",
        "recall",
        "f1",
        "note",
    ]
    # gt: Q1 classes 1, 2, 3 (inexact only), 4 (found by nobody's run) = 4; Q2 single-valued,
    # two classes capped at 1; Q3 two classes -> 7 in all, the same for every system
    assert (s["gt"] == 7).all()
    a = s.loc["teamA1"]
    # right: Carl Smith (class 1), Dana Smith (class 2; relation provenance in another order),
    # 1960.  Duplicates: Carl (class 1 again), "March 3, 1960" (single-valued slot).
    # wrong: Eve Smith (W), Frank (X, inexact).  ignored: Hal (I), Zed (unassessed) + duplicates.
    expected = dict(
        outputs=9,
        judged=8,
        assessed_correct=5,
        assessed_wrong=1,
        assessed_inexact=1,
        assessed_ignore=1,
        unassessed=1,
        duplicates=2,
        right=3,
        wrong=2,
        ignored=4,
    )
    assert {k: int(a[k]) for k in expected} == expected
    assert a["precision"] == pytest.approx(3 / 5)
    assert a["recall"] == pytest.approx(3 / 7)
    assert a["f1"] == pytest.approx(0.5)
    assert a["note"] == ""
    b = s.loc["teamB1"]
    # "the daughter": nominal in a class with a named mention -> ignored; Ivy Lee right, then
    # the same line again -> duplicate; Jon Park's relation provenance differs -> unassessed;
    # 1961 wrong
    assert (b["right"], b["wrong"], b["ignored"], b["duplicates"], b["unassessed"]) == (
        1,
        1,
        3,
        1,
        1,
    )
    assert b["precision"] == pytest.approx(1 / 2)
    assert b["recall"] == pytest.approx(1 / 7)
    assert b["f1"] == pytest.approx(2 / 9)


def test_system_without_assessed_responses_gets_zero_and_a_note(task):
    # CS-Score prints an undefined precision as 0.0000 (get_line: `$value = 0 unless defined`)
    c = _by_system(official_scores(task)).loc["teamC1"]
    assert (c["right"], c["wrong"], c["unassessed"]) == (0, 0, 1)
    assert c["precision"] == 0.0 and c["f1"] == 0.0 and c["recall"] == 0.0
    assert "precision 0/0" in c["note"] and "reported as 0" in c["note"]


def test_no_correct_response_anywhere_is_zero_as_cs_score_prints_it(tmp_path):
    task = _import(tmp_path, FIXTURES / "sf-query.xml", RUNS[:1], None)
    row = official_scores(task).iloc[0]
    assert row["gt"] == 0 and row["unassessed"] == row["outputs"] == 9
    assert (row["precision"], row["recall"], row["f1"]) == (0.0, 0.0, 0.0)
    assert "gt = 0" in row["note"] and "precision 0/0" in row["note"]
    assert "CS-Score's convention" in row["note"]


@pytest.mark.parametrize(
    ("policy", "a", "b"),
    [
        # duplicates counted wrong: A 3 right / 4 wrong, B 1 right / 2 wrong
        (CS_SCORE_SF_DEFAULT, (3, 4, 2), (1, 2, 2)),
        # match on (query, filler, filler provenance): Jon Park becomes right for B
        (OfficialPolicy(match_relation_provenance=False), (3, 2, 4), (2, 1, 2)),
        # without the 2016 nominal rule "the daughter" is right for B
        (OfficialPolicy(nominal_rule=False), (3, 2, 4), (2, 1, 2)),
        # inexact right: Frank (class 3) becomes right for A
        (OfficialPolicy(inexact="right"), (4, 1, 4), (1, 1, 3)),
        # inexact ignored
        (OfficialPolicy(inexact="ignore"), (3, 1, 5), (1, 1, 3)),
        # unassessed counted wrong: Zed for A, Jon Park for B
        (OfficialPolicy(unassessed="wrong"), (3, 3, 3), (1, 2, 2)),
    ],
)
def test_policy_variants(task, policy, a, b):
    s = _by_system(official_scores(task, policy))
    assert tuple(int(v) for v in s.loc["teamA1", ["right", "wrong", "ignored"]]) == a
    assert tuple(int(v) for v in s.loc["teamB1", ["right", "wrong", "ignored"]]) == b


def test_inexact_policy_follows_the_bundle(tmp_path):
    tables, config = import_tac_kbp(FIXTURES / "sf-query.xml", RUNS, FIXTURES / "qrel.txt")
    root = write_bundle(tmp_path / "b", tables, config)
    toml = (root / "task.toml").read_text()
    assert 'inexact_policy = "wrong"' in toml  # the importer states TAC's default explicitly
    toml = toml.replace('inexact_policy = "wrong"', 'inexact_policy = "correct"')
    (root / "task.toml").write_text(toml)
    a = _by_system(official_scores(load_task(root))).loc["teamA1"]
    assert (a["right"], a["wrong"]) == (4, 1)


def test_2015_assessments_have_no_mention_types(tmp_path):
    # the same assessments in the 8-column layout: the nominal rule cannot apply
    task = _import(tmp_path, FIXTURES / "sf-query.xml", RUNS, FIXTURES / "qrel-2015.txt")
    b = _by_system(official_scores(task)).loc["teamB1"]
    assert (b["right"], b["wrong"], b["ignored"]) == (2, 1, 2)


def test_per_query_rows_add_up_to_the_micro_totals(task):
    per_query = official_per_query(task)
    assert len(per_query) == 3 * 3  # every system x every hop-0 query
    totals = per_query.groupby("system")[COUNT_COLUMNS].sum()
    scores = _by_system(official_scores(task))
    pd.testing.assert_frame_equal(totals, scores[COUNT_COLUMNS], check_names=False)
    q = per_query.set_index(["system", "query_id"])
    assert q.loc[("teamA1", Q1), "gt"] == 4
    assert q.loc[("teamA1", Q2), "gt"] == 1
    assert q.loc[("teamA1", Q3), "gt"] == 2
    # B's only Q1 answer is ignored (nominal rule): nothing right or wrong there
    assert q.loc[("teamB1", Q1), "precision"] == 0.0  # 0/0, CS-Score's convention
    assert "precision 0/0" in q.loc[("teamB1", Q1), "note"]
    assert q.loc[("teamB1", Q1), "recall"] == 0.0
    # an unanswered query still has gt and zero counts
    assert q.loc[("teamC1", Q1), "outputs"] == 0 and q.loc[("teamC1", Q1), "gt"] == 4


def test_categorized_responses_keep_run_order(task):
    cat = categorize_responses(task)
    a = cat[cat["system"] == "teamA1"]
    assert a["answer_raw"].tolist()[:3] == ["Carl Smith", "Carl", "Dana Smith"]
    assert a["post"].tolist() == [
        "right",
        "ignored",
        "right",
        "wrong",
        "wrong",
        "ignored",
        "ignored",
        "right",
        "ignored",
    ]
    assert a["duplicate"].tolist() == [False, True, False, False, False, False, False, False, True]


def test_leaderboard_contract_columns(task):
    board = official_leaderboard(task)
    contract = (
        "system, team, outputs, judged, precision, precision_lo, precision_hi, pooled_recall, "
        "pooled_recall_lo, pooled_recall_hi, recall, recall_lo, recall_hi, f1, f1_lo, f1_hi, "
        "rank, rank_lo, rank_hi, tier"
    ).split(", ")
    assert list(board.columns[: len(contract)]) == contract
    for col in contract:
        if col.endswith(("_lo", "_hi")):
            assert board[col].isna().all()
    assert board["system"].tolist() == ["teamA1", "teamB1", "teamC1"]
    assert board["rank"].tolist() == [1, 2, 3]  # C's F1 is 0 (0/0 precision reported as 0)
    np.testing.assert_allclose(board["recall"], board["pooled_recall"])


# ---------------------------------------------------------------------------------------------
# non-TAC bundles


def test_generic_bundle_matches_exact_answers(tmp_path):
    # the conftest bundle: no provenance, no equivalence classes (each correct fact is a class)
    task = load_task(make_bundle(tmp_path))
    s = _by_system(official_scores(task))
    # gt: q1 {paris}, q2 {Rome}, q3 {Barcelona, Madrid}
    assert (s["gt"] == 4).all()
    # A: Paris right, paris duplicate of the same class, Rome right, Barcelona (judged C and W:
    # the correct assessment is preferred) right
    assert tuple(int(v) for v in s.loc["A", ["right", "wrong", "ignored", "duplicates"]]) == (
        3,
        0,
        1,
        1,
    )
    # B: " Paris " (surrounding whitespace stripped) right, Milan wrong, Madrid right
    assert tuple(int(v) for v in s.loc["B", ["right", "wrong", "ignored"]]) == (2, 1, 0)
    assert s.loc["B", "precision"] == pytest.approx(2 / 3)
    assert s.loc["B", "recall"] == pytest.approx(1 / 2)


def test_matching_uses_facts_without_provenance_and_exact_strings_with_it(tmp_path):
    # no provenance (a non-TAC bundle): responses match assessments through the bundle's facts
    root = make_bundle(
        tmp_path / "plain",
        runs="system\tquery_id\tanswer\nA\tq1\tPARIS\n",
        judgments="query_id\tanswer\tlabel\nq1\tParis\tC\n",
        samples=None,
    )
    task = load_task(root)
    assert task.outputs["fact"].iloc[0] == task.judgments["fact"].iloc[0]
    row = official_scores(task).iloc[0]
    assert (row["judged"], row["unassessed"], row["right"], row["gt"]) == (1, 0, 1, 1)
    # with provenance on both sides (TAC): exact strings, as CS-Score matches them
    root = make_bundle(
        tmp_path / "tac",
        runs="system\tquery_id\tanswer\tprovenance\nA\tq1\tPARIS\tD1:1-5\n",
        judgments="query_id\tanswer\tlabel\tprovenance\nq1\tParis\tC\tD1:1-5\n",
        samples=None,
    )
    row = official_scores(load_task(root)).iloc[0]
    assert (row["judged"], row["unassessed"], row["right"], row["gt"]) == (0, 1, 0, 1)


def test_policy_values_are_checked():
    with pytest.raises(ValueError, match="duplicate"):
        OfficialPolicy(duplicate="sometimes")
    with pytest.raises(ValueError, match="inexact"):
        OfficialPolicy(inexact="correct")
    with pytest.raises(ValueError, match="unassessed"):
        OfficialPolicy(unassessed="right")


def test_provenance_counts_only_when_both_sides_give_it(tmp_path):
    judgments = "query_id\tanswer\tlabel\tprovenance\nq1\tParis\tC\tD1:1-5\n"
    without = make_bundle(
        tmp_path,
        "a",
        runs="system\tquery_id\tanswer\nA\tq1\tParis\n",
        judgments=judgments,
        samples=None,
    )
    assert official_scores(load_task(without)).iloc[0]["right"] == 1
    other_place = make_bundle(
        tmp_path,
        "b",
        runs="system\tquery_id\tanswer\tprovenance\nA\tq1\tParis\tD2:1-5\n",
        judgments=judgments,
        samples=None,
    )
    row = official_scores(load_task(other_place)).iloc[0]
    assert (row["right"], row["unassessed"]) == (0, 1)


def test_system_with_only_hop1_responses(tmp_path):
    run = tmp_path / "hop1.txt"
    run.write_text(
        "CSSF15_ENG_0000000001_aaaaaaaaaaaa\tper:schools_attended\tteamH\tDOC1:50-90\t"
        "Springfield High\tORG\tDOC1:60-75\t0.7\n"
    )
    tables, config = import_tac_kbp(
        FIXTURES / "sf-query.xml", [*RUNS, run], FIXTURES / "qrel.txt", include_hop1=True
    )
    task = load_task(write_bundle(tmp_path / "b", tables, config))
    s = _by_system(official_scores(task))
    # hop-1 rows and queries are not scored: teamH has no hop-0 output, the others are unchanged
    assert s.loc["teamH", "outputs"] == 0 and s.loc["teamH", "gt"] == 7
    assert s.loc["teamH", "precision"] == 0.0 and "0/0" in s.loc["teamH", "note"]
    assert (s.loc["teamA1", "right"], s.loc["teamA1", "wrong"], s.loc["teamA1", "gt"]) == (3, 2, 7)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared TAC scorer fixtures not available")
def test_every_assessment_wrong_prints_zeros(tmp_path):
    # K1 with every filler assessed W (no equivalence class): CS-Score's GT is 0, precision is
    # 0 / 6 and recall 0/0, which it prints as 0.0000 (F1 0.0000 as well)
    folder = SHARED / "SCORER_TS_K1"
    lines = []
    for line in (folder / "qrel.txt").read_text().splitlines():
        f = line.split("\t")
        f[5], f[6], f[7], f[8], f[9] = "W", "0", "W", "0", "0"
        lines.append("\t".join(f))
    qrel = tmp_path / "qrel.txt"
    qrel.write_text("\n".join(lines) + "\n")
    task = _import(
        tmp_path, folder / "ldc-query.xml", [folder / "SCORER_TS_K1.valid.ldc.tab.txt"], qrel
    )
    row = official_scores(task).iloc[0]
    assert (row["right"], row["wrong"], row["gt"]) == (0, 6, 0)
    assert [f"{row[m]:.4f}" for m in ("precision", "recall", "f1")] == ["0.0000"] * 3
    assert "recall 0/0" in row["note"] and "precision 0/0" not in row["note"]


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared TAC scorer fixtures not available")
@pytest.mark.parametrize("case", CASES)
def test_macro_average_matches_sf_all_macro(tmp_path, case):
    # CS-Score's SF-ALL-Macro (hop 0): mean precision, recall and F1 over the queries
    folder = SHARED / case
    runs = sorted(folder.glob("*.valid.ldc.tab.txt"))
    task = _import(tmp_path, folder / "ldc-query.xml", runs, folder / "qrel.txt")
    row = official_scores(task, average="macro").iloc[0]
    summary = (folder / f"{case}_score.summary").read_text().splitlines()
    macro = [ln.split() for ln in summary if ln.startswith("SF-ALL-Macro")]
    _, _, _, prec, rec, f1 = next(fields for fields in macro if fields[2] == "0")
    assert [f"{row[m]:.4f}" for m in ("precision", "recall", "f1")] == [prec, rec, f1]
