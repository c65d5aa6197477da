"""The annotation round trip: sample -> export -> annotate -> ``judgments add`` -> score.

Label Studio exports are written here in the documented JSON export format (a list of tasks, each
with ``id``, ``data`` and ``annotations``; an annotation has ``completed_by``, ``was_cancelled``
and a ``result`` list of ``{"from_name", "to_name", "type": "choices", "value": {"choices":
[...]}}``; https://labelstud.io/guide/task_format) and in the JSON-MIN format.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import make_bundle

from receval.agreement import AGREEMENT_COLUMNS, agreement_by_round, krippendorff_alpha
from receval.cli import cli
from receval.errors import BundleError
from receval.formats.label_studio import (
    label_studio_tasks,
    labelling_config,
    read_label_studio_export,
)
from receval.judgments import add_judgments, read_label_file
from receval.task import load_task

# the simulated truth of the default bundle's facts (query, normalised answer)
TRUTH = {
    ("q1", "paris"): "correct",
    ("q2", "rome"): "correct",
    ("q2", "milan"): "wrong",
    ("q3", "barcelona"): "wrong",
    ("q3", "madrid"): "correct",
}


def _truth(query_id: str, answer: str) -> str:
    return TRUTH[(query_id, " ".join(answer.split()).casefold())]


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def _ls_export(tasks: list[dict], votes: dict[int, list[tuple[object, str]]]) -> list[dict]:
    """A Label Studio JSON export of ``tasks`` (task index -> [(completed_by, choice), ...])."""
    out = []
    for i, task in enumerate(tasks):
        annotations = []
        for k, (user, choice) in enumerate(votes.get(i, [])):
            annotations.append(
                {
                    "id": 100 * i + k,
                    "completed_by": user,
                    "result": [
                        {
                            "from_name": "label",
                            "to_name": "answer",
                            "type": "choices",
                            "origin": "manual",
                            "value": {"choices": [choice]},
                        }
                    ],
                    "was_cancelled": False,
                    "ground_truth": False,
                    "lead_time": 3.5,
                    "task": i + 1,
                }
            )
        out.append(
            {
                "id": i + 1,
                "data": task["data"],
                "annotations": annotations,
                "predictions": [],
                "project": 7,
            }
        )
    return out


def test_sample_export_annotate_add_score_loop(tmp_path):
    root = make_bundle(tmp_path, judgments=None, samples=None)
    _run("sample", root, "--per-system", "3", "--seed", "3")
    todo = _read(root / "to_annotate.tsv")
    facts = todo[todo["kind"] == "fact"]
    assert len(facts) >= 3

    ls_out = tmp_path / "ls" / "tasks.json"
    _run("export", "label-studio", root, ls_out)
    tasks = json.loads(ls_out.read_text())
    assert len(tasks) == len(facts)
    assert {"query_id", "query", "answer"} <= set(tasks[0]["data"])
    # blind labelling: which systems output the fact is metadata, never shown to the annotator
    assert not {"systems", "n_systems"} & set(tasks[0]["data"])
    assert {"systems", "n_systems"} <= set(tasks[0]["meta"])
    config = ls_out.with_suffix(".xml").read_text()
    assert '<Choices name="label" toName="answer"' in config and 'alias="C"' in config
    assert "systems" not in config

    # annotator ann1 fills in the spreadsheet, with one row twice (a duplicate)
    sheet = facts[["kind", "query_id", "answer", "systems"]].copy()
    sheet["label"] = [_truth(q, a) for q, a in zip(sheet["query_id"], sheet["answer"], strict=True)]
    sheet["annotator"] = "ann1"
    sheet = pd.concat([sheet, sheet.iloc[[0]]], ignore_index=True)
    sheet_path = tmp_path / "ann1.tsv"
    sheet.to_csv(sheet_path, sep="\t", index=False)

    # annotator ann2 (Label Studio user 2) labels every task, disagreeing on the first one
    flip = {"correct": "wrong", "wrong": "correct"}
    votes = {}
    for i, task in enumerate(tasks):
        label = _truth(task["data"]["query_id"], task["data"]["answer"])
        votes[i] = [({"id": 2, "email": "ann2@example.org"}, flip[label] if i == 0 else label)]
    export = tmp_path / "project-7-export.json"
    export.write_text(json.dumps(_ls_export(tasks, votes)))

    out = _run("judgments", "add", root, sheet_path, export)
    assert f"added {2 * len(facts)} votes" in out
    assert "1 duplicate(s) skipped" in out
    assert "annotators disagree on 1 fact(s)" in out
    assert "ann1=" in out and "ann2@example.org=" in out
    assert "0 fact(s) still to annotate" in out

    task = load_task(root)
    assert len(task.judgments) == 2 * len(facts)
    assert set(task.judgments["annotator"]) == {"ann1", "ann2@example.org"}
    assert (_read(root / "to_annotate.tsv")["kind"] != "fact").all()

    # adding the same files again changes nothing
    again = _run("judgments", "add", root, sheet_path, export)
    assert "added 0 votes" in again and f"{2 * len(facts) + 1} duplicate(s)" in again
    # ... and prints what it changed (nothing), not the old disagreement again: a count of it
    assert "ann2@example.org=" not in again and "disagree on" not in again
    assert "1 earlier disagreement(s) unchanged by this call" in again

    # a third annotator disagreeing on another fact: that fact is listed, the old one counted
    third = sheet.iloc[[1]].assign(annotator="ann3")
    third["label"] = flip[third["label"].iloc[0]]
    third_path = tmp_path / "ann3.tsv"
    third.to_csv(third_path, sep="\t", index=False)
    out3 = _run("judgments", "add", root, third_path)
    assert "annotators disagree on 1 fact(s) this call added or changed:" in out3
    listed = [line for line in out3.splitlines() if line.startswith("  ")]
    assert len(listed) == 1 and "ann3=" in listed[0]
    assert "1 earlier disagreement(s) unchanged by this call" in out3

    validate = _run("validate", root)
    assert "Krippendorff's alpha" in validate

    score_dir = tmp_path / "out"
    _run("score", root, "--out", score_dir, "--bootstrap", "50", "--quiet")
    board = pd.read_csv(score_dir / "leaderboard.csv")
    assert board["precision"].notna().all()
    conflicts = pd.read_csv(score_dir / "conflicts.csv")
    assert len(conflicts) == 2  # the two disagreements, decided by the merge rule
    agreement = pd.read_csv(score_dir / "agreement.csv")
    assert list(agreement.columns) == AGREEMENT_COLUMNS
    assert agreement["annotators"].tolist() == [3]  # ann1, ann2 and ann3
    assert agreement["facts_multiply_labelled"].iloc[0] == len(facts)


def test_unknown_label_names_the_file_and_line(tmp_path):
    root = make_bundle(tmp_path)
    bad = tmp_path / "bad.tsv"
    bad.write_text("query_id\tanswer\tlabel\tannotator\nq1\tParis\tC\tx\nq2\tRome\tmaybe\tx\n")
    before = (root / "judgments.tsv").read_text()
    result = CliRunner().invoke(cli, ["judgments", "add", str(root), str(bad)])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {bad}:3: unknown label 'maybe'")
    assert (root / "judgments.tsv").read_text() == before  # nothing written


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_answer_is_refused_before_it_breaks_the_bundle(tmp_path, blank):
    """A vote with a blank answer was written to judgments.tsv, which the bundle then refused to
    load ("empty value in required column 'answer'"): now the add is refused, nothing written."""
    root = make_bundle(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text(f"query_id,answer,label,annotator\nq2,Milan,C,x\nq1,{blank},C,x\n")
    before = (root / "judgments.tsv").read_text()
    result = CliRunner().invoke(cli, ["judgments", "add", str(root), str(bad)])
    assert result.exit_code == 2
    assert result.output == f"error: {bad}:3: empty answer\n"
    assert (root / "judgments.tsv").read_text() == before
    load_task(root)


def test_votes_on_facts_no_system_output_are_kept_with_a_warning(tmp_path):
    """A mistyped answer makes a vote on a fact nobody output: kept (nothing is lost), and named
    in one warning; votes on pooled facts and on facts of an exhaustive unit are not."""
    root = make_bundle(tmp_path)
    sheet = tmp_path / "s.tsv"
    rows = ["q1\tParis\tC", "q2\tMilann\tW", "q3\tMadrid\tC", "q3\tSevilla\tW"]
    sheet.write_text("query_id\tanswer\tlabel\tannotator\n" + "\tann7\n".join(rows) + "\tann7\n")
    result = add_judgments(root, [sheet])
    assert len(result.added) == 4
    (note,) = result.notes
    assert note.startswith("2 vote(s) on facts no system output (first: s.tsv:3, q2 'Milann')")
    assert "check for a mistyped answer" in note
    exhaustive_only = make_bundle(
        tmp_path, "b2", exhaustive="unit\tquery_id\tanswer\nd1\tq2\tFlorence\n"
    )
    sheet.write_text("query_id\tanswer\tlabel\tannotator\nq2\tFlorence\tC\tann7\n")
    assert add_judgments(exhaustive_only, [sheet]).notes == ()
    cli_run = CliRunner().invoke(cli, ["judgments", "add", str(root), str(sheet)])
    assert cli_run.exit_code == 0
    assert "warning: 1 vote(s) on facts no system output" in cli_run.output


def test_category_names_are_written_as_bundle_labels(tmp_path):
    root = make_bundle(
        tmp_path, task_toml='name = "t"\n[labels]\ncorrect = ["Y"]\nwrong = ["N"]\n', judgments=None
    )
    sheet = tmp_path / "s.csv"
    sheet.write_text("query_id,answer,label,annotator\nq1,Paris,correct,a\nq2,Milan,N,a\n")
    result = add_judgments(root, [sheet])
    assert result.added["label"].tolist() == ["Y", "N"]
    assert load_task(root).labels.sum() == 1.0


def test_one_vote_per_annotator_and_fact(tmp_path):
    root = make_bundle(tmp_path)
    # ann1 said C for (q1, Paris) in the bundle; "paris " is the same fact
    change = tmp_path / "change.tsv"
    change.write_text("query_id\tanswer\tlabel\tannotator\nq1\tparis \tW\tann1\n")
    with pytest.raises(BundleError, match=r"already labelled .*use --replace"):
        add_judgments(root, [change])
    result = add_judgments(root, [change], replace=True)
    assert result.replaced == 1
    votes = load_task(root).judgments
    ann1_q1 = votes[(votes["annotator"] == "ann1") & (votes["query_id"] == "q1")]
    assert ann1_q1["label_raw"].tolist() == ["W"]
    # contradictory votes inside the new files: error naming both places
    twice = tmp_path / "twice.tsv"
    twice.write_text("query_id\tanswer\tlabel\tannotator\nq2\tMilan\tC\tann9\nq2\tmilan\tW\tann9\n")
    with pytest.raises(BundleError, match=r"twice.tsv:3.*'W' here and 'C' at twice.tsv:2"):
        add_judgments(root, [twice])


def test_rows_without_label_stay_pending(tmp_path):
    root = make_bundle(tmp_path, judgments=None, samples=None)
    _run("sample", root, "--per-system", "3", "--seed", "3")
    todo = _read(root / "to_annotate.tsv")
    todo["label"] = ""
    todo.loc[todo.index[0], "label"] = "C"
    sheet = tmp_path / "partial.tsv"
    todo.to_csv(sheet, sep="\t", index=False)
    result = add_judgments(root, [sheet], annotator="ann1")
    assert len(result.added) == 1 and result.unlabelled == len(todo) - 1
    left = _read(root / "to_annotate.tsv")
    assert len(left) == len(todo) - 1
    assert todo["answer"].iloc[0] not in set(left["answer"])


def test_concurrent_adds_all_land(tmp_path):
    root = make_bundle(tmp_path, judgments=None)
    sheets = []
    for k in range(6):
        path = tmp_path / f"ann{k}.tsv"
        path.write_text(
            "query_id\tanswer\tlabel\n"
            + "".join(f"{q}\t{a}\t{lab}\n" for (q, a), lab in TRUTH.items())
        )
        sheets.append((path, f"ann{k}"))
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda s: add_judgments(root, [s[0]], annotator=s[1]), sheets))
    assert sum(len(r.added) for r in results) == 6 * len(TRUTH)
    judgments = load_task(root).judgments
    assert len(judgments) == 6 * len(TRUTH)
    assert judgments.groupby("annotator").size().eq(len(TRUTH)).all()


def test_label_studio_tasks_and_config(tmp_path):
    root = make_bundle(tmp_path, judgments=None)
    task = load_task(root)
    tasks = label_studio_tasks(task)
    # no to_annotate.tsv: the drawn facts still unlabelled (samples.tsv draws 3 facts)
    assert sorted(t["data"]["answer"] for t in tasks) == ["Barcelona", "Milan", "Paris"]
    paris_task = next(t for t in tasks if t["data"]["answer"] == "Paris")
    paris = paris_task["data"]
    assert paris_task["meta"]["systems"] == "A, B" and paris_task["meta"]["n_systems"] == 2
    assert "systems" not in paris and paris["query"] == "France capital"
    for with_provenance in (False, True):
        config = labelling_config(task.config, with_provenance=with_provenance)
        for category in ("correct", "wrong", "inexact", "ignore"):
            assert f'value="{category}"' in config
        # every $variable the interface shows is task data an annotator needs; none is systems
        shown = set(re.findall(r"\$(\w+)", config))
        assert shown <= {"query", "query_id", "answer", "provenance"}


def test_read_label_studio_exports(tmp_path):
    tasks = [{"data": {"query_id": "q1", "answer": "Paris"}}]
    full = _ls_export(tasks, {0: [(5, "C"), ({"id": 6, "email": ""}, "W")]})
    full[0]["annotations"].append(
        {"completed_by": 7, "result": [], "was_cancelled": True}  # skipped: not a vote
    )
    path = tmp_path / "full.json"
    path.write_text(json.dumps(full))
    votes = read_label_studio_export(path)
    assert votes[["annotator", "label"]].values.tolist() == [["5", "C"], ["6", "W"]]
    minimal = [
        {"id": 1, "query_id": "q1", "answer": "Paris", "label": "correct", "annotator": 3},
        {"id": 2, "query_id": "q2", "answer": "Rome", "label": ["wrong"], "annotator": 3},
    ]
    path = tmp_path / "min.json"
    path.write_text(json.dumps(minimal))
    assert read_label_studio_export(path)["label"].tolist() == ["correct", "wrong"]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(BundleError, match="not a Label Studio JSON export"):
        read_label_studio_export(bad)


def test_label_studio_annotator_is_a_person_where_the_export_names_one(tmp_path):
    """JSON exports carry ``completed_by`` as a user id (Label Studio 1.x) with
    ``created_username`` ("first last email, id"), or as an expanded user object; JSON-MIN and
    CSV exports carry ``annotator`` (an e-mail or an id).  The vote's annotator is the e-mail,
    else the username; the number only when nothing else names the user."""
    tasks = [{"data": {"query_id": "q1", "answer": "Paris"}}]
    full = _ls_export(
        tasks,
        {
            0: [
                (1, "C"),
                (2, "C"),
                ({"id": 3, "email": "", "username": "carla"}, "W"),
                ({"id": 4, "email": "dan@example.org", "username": "dan"}, "W"),
                (5, "C"),
            ]
        },
    )
    full[0]["annotations"][0]["created_username"] = " ann@example.org, 1"
    full[0]["annotations"][1]["created_username"] = "Bea Stone bea@example.org, 2"
    path = tmp_path / "full.json"
    path.write_text(json.dumps(full))
    assert read_label_studio_export(path)["annotator"].tolist() == [
        "ann@example.org",
        "bea@example.org",
        "carla",
        "dan@example.org",
        "5",  # the export names nobody: the user id is all there is
    ]
    minimal = [
        {"id": 1, "query_id": "q1", "answer": "Paris", "label": "C", "annotator": "e@x.org"},
        {"id": 2, "query_id": "q1", "answer": "Paris", "label": "W", "annotator": 9},
    ]
    path = tmp_path / "min.json"
    path.write_text(json.dumps(minimal))
    assert read_label_studio_export(path)["annotator"].tolist() == ["e@x.org", "9"]
    sheet = tmp_path / "ls.csv"
    sheet.write_text("query_id,answer,label,annotator\nq1,Paris,C,f@x.org\n")
    assert read_label_file(sheet)["annotator"].tolist() == ["f@x.org"]


def test_krippendorff_alpha_values():
    # two annotators, four facts, agreeing on three: nominal alpha by hand.  Values 1,1,0,1 and
    # 1,1,0,0: n = 8 pairable values (five 1s, three 0s); D_o = 2/8 (one disagreeing fact, two
    # ordered pairs, over n); D_e = 2 * 5 * 3 / (8 * 7); alpha = 1 - D_o / D_e = 1 - 0.25/0.5357
    votes = pd.DataFrame(
        {
            "annotator": ["a"] * 4 + ["b"] * 4,
            "fact": [0, 1, 2, 3] * 2,
            "category": "correct correct wrong correct correct correct wrong wrong".split(),
        }
    )
    alpha, observed, note = krippendorff_alpha(votes)
    assert alpha == pytest.approx(1 - 0.25 / (30 / 56))
    assert observed == pytest.approx(0.75) and note == ""
    same = votes.assign(category="correct")
    alpha, _, note = krippendorff_alpha(same)
    assert np.isnan(alpha) and "undefined" in note


def test_agreement_by_round_uses_the_sample_rounds(tmp_path):
    root = make_bundle(tmp_path)
    frame = agreement_by_round(load_task(root))
    # the default bundle: ann1 and ann2 both label (q1, paris) and (q3, barcelona)
    # (the round of s1's draws); Rome and Madrid, drawn by no sample, have one vote each
    assert frame["round"].tolist() == ["s1", "unsampled"]
    assert frame["facts_multiply_labelled"].tolist() == [2, 0]
    assert np.isnan(frame["alpha"].iloc[1]) and "no fact labelled by two" in frame["note"].iloc[1]


def test_label_studio_vote_errors_name_the_task(tmp_path):
    root = make_bundle(tmp_path)
    export = tmp_path / "export.json"
    tasks = [{"data": {"query_id": "q1", "answer": "Paris"}}]
    export.write_text(json.dumps(_ls_export(tasks, {0: [(4, "perhaps")]})))
    result = CliRunner().invoke(cli, ["judgments", "add", str(root), str(export)])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {export}: task 1: unknown label 'perhaps'")


def test_concurrent_processes_all_land(tmp_path):
    import subprocess
    import sys

    root = make_bundle(tmp_path, judgments=None)
    procs = []
    for k in range(4):
        path = tmp_path / f"p{k}.tsv"
        path.write_text(
            "query_id\tanswer\tlabel\tannotator\n"
            + "".join(f"{q}\t{a}\t{lab}\tproc{k}\n" for (q, a), lab in TRUTH.items())
        )
        cmd = [sys.executable, "-m", "receval.cli", "judgments", "add", str(root), str(path)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    judgments = load_task(root).judgments
    assert judgments.groupby("annotator").size().to_dict() == {
        f"proc{k}": len(TRUTH) for k in range(4)
    }


def test_add_reports_its_steps(tmp_path):
    from receval.judgments import ADD_STEPS

    root = make_bundle(tmp_path)
    sheet = tmp_path / "s.csv"
    sheet.write_text("query_id,answer,label,annotator\nq1,Paris,C,ann2\n")
    steps = []
    add_judgments(root, [sheet], on_step=lambda: steps.append(1))
    assert len(steps) == ADD_STEPS


def test_a_fact_with_only_ignore_votes_stays_pending(tmp_path):
    """An ``ignore`` vote leaves the vote out, so the fact still has no label for ``score``; it
    used to leave to_annotate.tsv anyway, and score then sent the organiser to a file that no
    longer listed it."""
    root = make_bundle(tmp_path, judgments=None, samples=None)
    _run("sample", root, "--per-system", "3", "--seed", "3")
    todo = _read(root / "to_annotate.tsv")
    todo["label"] = ["I"] + ["C"] * (len(todo) - 1)
    sheet = tmp_path / "votes.tsv"
    todo.to_csv(sheet, sep="\t", index=False)
    result = CliRunner().invoke(
        cli, ["judgments", "add", str(root), str(sheet), "--annotator", "a"]
    )
    assert result.exit_code == 0, result.output
    first = todo.iloc[0]
    assert "1 fact(s) still have no label after their votes (only 'ignore' votes" in result.output
    assert f"first: {first['query_id']} " in result.output
    left = _read(root / "to_annotate.tsv")
    assert left[["query_id", "answer"]].values.tolist() == [[first["query_id"], first["answer"]]]
    scored = CliRunner().invoke(cli, ["score", str(root), "--out", str(tmp_path / "out")])
    assert scored.exit_code == 2
    assert "(1 of those facts have only ignore votes, which leave the vote out)" in scored.output
    # a label that counts, from another annotator, ends the wait
    left["label"], left["annotator"] = "W", "b"
    left.to_csv(sheet, sep="\t", index=False)
    assert add_judgments(root, [sheet]).pending == 0


def test_concurrent_sample_rounds_all_land(tmp_path):
    """Two `sample` processes at once used to draw the same round name: one's draws were lost
    from samples.tsv and to_annotate.tsv while both printed what to annotate.  They now take the
    bundle lock in turn: two rounds, both in to_annotate.tsv, and a curve plan waits too."""
    import subprocess
    import sys

    root = make_bundle(tmp_path, judgments=None, samples=None)
    sample = [sys.executable, "-m", "receval.cli", "sample", str(root), "--per-system", "2"]
    cmds = [[*sample, "--seed", str(k)] for k in range(3)]
    curve = ["curve", "plan", str(root), "--system", "A", "--method", "random", "--seed", "1"]
    cmds.append([sys.executable, "-m", "receval.cli", *curve])
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for c in cmds]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    samples = load_task(root).samples
    assert sorted(samples["sample"].unique()) == ["round-1", "round-2", "round-3"]
    assert samples.groupby("sample").size().tolist() == [4, 4, 4]
    todo = _read(root / "to_annotate.tsv")
    drawn = set(zip(samples["query_id"], samples["answer"], strict=True))
    assert {(q, a.strip().casefold()) for q, a in drawn} <= {
        (q, a.strip().casefold()) for q, a in zip(todo["query_id"], todo["answer"], strict=True)
    }


@pytest.mark.parametrize("command", ["add", "sample"])
def test_a_bundle_whose_lock_cannot_be_taken_is_one_error(tmp_path, command):
    """A read-only bundle (or anything else at ``.receval.lock``) was an OSError traceback."""
    root = make_bundle(tmp_path)
    (root / ".receval.lock").mkdir()
    sheet = tmp_path / "s.tsv"
    sheet.write_text("query_id\tanswer\tlabel\tannotator\nq1\tParis\tC\tz\n")
    args = {
        "add": ["judgments", "add", str(root), str(sheet)],
        "sample": ["sample", str(root), "--per-system", "1", "--seed", "1"],
    }[command]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: {root / '.receval.lock'}: cannot take the bundle lock (Is a directory)"
    )


def test_a_tie_the_merge_leaves_unjudged_stays_pending(tmp_path):
    """With ``[merge] tie = "unjudged"`` a 1–1 tie gives no label: the fact stays in
    to_annotate.tsv for a deciding vote (it used to leave, as with ignore votes)."""
    root = make_bundle(
        tmp_path, judgments=None, samples=None, task_toml='name = "t"\n[merge]\ntie = "unjudged"\n'
    )
    _run("sample", root, "--per-system", "3", "--seed", "3")
    todo = _read(root / "to_annotate.tsv")
    first = todo.iloc[[0]]
    for annotator, label in (("a", "C"), ("b", "W")):
        sheet = tmp_path / f"{annotator}.tsv"
        first.assign(label=label, annotator=annotator).to_csv(sheet, sep="\t", index=False)
        result = add_judgments(root, [sheet])
    assert result.pending == len(todo)  # nothing else was labelled; the tied fact stays
    assert any("a tie the [merge] tie policy leaves unjudged" in n for n in result.notes)
    sheet = tmp_path / "c.tsv"
    first.assign(label="C", annotator="c").to_csv(sheet, sep="\t", index=False)
    assert add_judgments(root, [sheet]).pending == len(todo) - 1


@pytest.mark.parametrize("command", ["sample", "curve"])
def test_a_lock_held_too_long_is_one_error_line(tmp_path, monkeypatch, command):
    """Another process holding the bundle lock past the wait: exit 2 and one line, for every
    command that takes the lock (the library raises TimeoutError; the CLI says it once)."""
    fcntl = pytest.importorskip("fcntl")
    import receval.bundle

    root = make_bundle(tmp_path)
    monkeypatch.setattr(receval.bundle, "ROUND_LOCK_WAIT", 0.2)  # the writers' wait
    args = {
        "sample": ["sample", str(root), "--per-system", "1", "--seed", "1"],
        "curve": ["curve", "plan", str(root), "--system", "A", "--method", "random"],
    }[command]
    with open(root / ".receval.lock", "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {root / '.receval.lock'}: another receval process holds the lock (waited 0 s)"
    )
