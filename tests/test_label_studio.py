"""Label Studio exports in the shapes a live Label Studio 1.23.2 server writes (issue 23, item 7;
the live round trip is tests/test_label_studio_live.py): the export button names annotators only
by user id (JSON ``completed_by: 1``, JSON-MIN / CSV ``annotator: 1``), a snapshot export with
``annotations__completed_by.only_id = false`` by e-mail."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import make_bundle

from receval.cli import cli
from receval.formats.label_studio import user_id_note
from receval.judgments import add_judgments, read_label_file

TASKS = [("q1", "Paris"), ("q2", "Milan")]
USERS = {1: "alice@example.com", 3: "carol@example.com"}


def _full(expand: bool) -> list[dict]:
    """A JSON export (fields as Label Studio 1.23.2 writes them, shortened)."""
    out = []
    for i, (query_id, answer) in enumerate(TASKS, start=1):
        annotations = []
        for user, label in ((1, "C"), (3, "wrong")):
            who = {"id": user, "email": USERS[user], "first_name": "", "last_name": ""}
            annotations.append(
                {
                    "id": 10 * i + user,
                    "completed_by": who if expand else user,
                    "result": [
                        {
                            "from_name": "label",
                            "to_name": "answer",
                            "type": "choices",
                            "value": {"choices": [label]},
                        }
                    ],
                    "was_cancelled": False,
                    "ground_truth": False,
                    "lead_time": None,
                    "task": i,
                    "project": 1,
                    "updated_by": user,
                }
            )
        out.append(
            {
                "id": i,
                "annotations": annotations,
                "drafts": [],
                "predictions": [],
                "data": {"query_id": query_id, "query": "x", "answer": answer},
                "meta": {"systems": "A, B", "n_systems": 2},
                "project": 1,
            }
        )
    return out


def _min(expand: bool) -> list[dict]:
    return [
        {
            "query_id": q,
            "query": "x",
            "answer": a,
            "id": i,
            "label": label,
            "annotator": USERS[user] if expand else user,
            "annotation_id": 10 * i + user,
        }
        for i, (q, a) in enumerate(TASKS, start=1)
        for user, label in ((1, "C"), (3, "wrong"))
    ]


def _csv(expand: bool) -> str:
    rows = ['"annotation_id","annotator","answer","id","label","query","query_id"']
    for i, (q, a) in enumerate(TASKS, start=1):
        for user, label in ((1, "C"), (3, "wrong")):
            who = USERS[user] if expand else str(user)
            rows.append(f'{10 * i + user},"{who}","{a}",{i},"{label}","x","{q}"')
    return "\r\n".join(rows) + "\r\n"


def _write(tmp_path, kind: str, expand: bool):
    name = f"{kind}-{'snapshot' if expand else 'button'}"
    if kind == "csv":
        path = tmp_path / f"{name}.csv"
        path.write_text(_csv(expand))
    else:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_full(expand) if kind == "json" else _min(expand)))
    return path


@pytest.mark.parametrize("kind", ["json", "json-min", "csv"])
@pytest.mark.parametrize("expand", [False, True], ids=["button", "snapshot"])
def test_annotators_are_emails_or_ids_with_a_warning(tmp_path, kind, expand):
    root = make_bundle(tmp_path, judgments=None)
    path = _write(tmp_path, kind, expand)
    result = add_judgments(root, [path])
    added = result.added
    want = sorted(USERS.values()) if expand else ["1", "3"]
    assert sorted(set(added["annotator"])) == want
    assert sorted(added["label"]) == ["C", "C", "wrong", "wrong"]
    if expand:
        assert result.notes == ()
    else:
        (note,) = result.notes
        assert note.startswith(f"{path.name}: Label Studio names 2 annotator(s) only by user id")
        assert "(1, 3)" in note and '"only_id": false' in note


def test_the_cli_warns_on_an_export_of_user_ids(tmp_path):
    root = make_bundle(tmp_path, judgments=None)
    button, snapshot = _write(tmp_path, "json", False), _write(tmp_path, "csv", True)
    result = CliRunner().invoke(cli, ["judgments", "add", str(root), str(button), str(snapshot)])
    assert result.exit_code == 0, result.output
    # a warning is wrapped to the terminal: its continuation lines are indented
    text = result.output.replace("\n  ", " ")
    warnings = [line for line in text.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "json-button.json: Label Studio names 2" in warnings[0]
    assert "docs/label-studio.md" in warnings[0]


def test_no_warning_for_names_or_for_sheets_that_are_not_label_studio(tmp_path):
    root = make_bundle(tmp_path, judgments=None)
    sheet = tmp_path / "sheet.csv"  # a spreadsheet whose annotators happen to be numbers
    sheet.write_text("query_id,answer,label,annotator\nq1,Paris,C,7\n")
    assert add_judgments(root, [sheet]).notes == ()
    named = _write(tmp_path, "json", False)
    assert not read_label_file(named, annotator="ann1").attrs["label_studio"]  # --annotator
    assert user_id_note("x.json", ["ann@x.org", "bob"]) is None
    many = user_id_note("x.json", [str(i) for i in range(12, 0, -1)])
    assert "12 annotator(s)" in many and "(1, 2, 3, 4, 5, ...)" in many


def _edit(tasks: list[dict], where: tuple, value) -> list[dict]:
    """``tasks`` with the node at ``where`` (keys and indices) set to ``value``."""
    node = tasks
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    return tasks


@pytest.mark.parametrize(
    ("where", "value", "what"),
    [
        ((0, "annotations"), 1, "task 1: annotations is 1, not a JSON list"),
        ((1, "annotations", 0), "C", 'task 2: an annotation is "C", not a JSON object'),
        ((0, "data"), [], "task 1: data is [], not a JSON object"),
        ((0, "annotations", 0, "result"), {}, "task 1: an annotation's result is {}, not a JSON"),
        ((0, "annotations", 0, "result", 0, "value"), 7, "task 1: a result's value is 7, not"),
        ((0, "annotations", 0, "result", 0, "value", "choices"), "C", 'choices is "C", not'),
        ((0, "data", "query_id"), {"id": 1}, 'task 1: query_id is {"id": 1}, not a value'),
    ],
)
def test_an_export_of_the_wrong_shape_is_a_one_line_error(tmp_path, where, value, what):
    """A JSON export edited by hand or written by another tool: exit 2, one line naming the file
    and the task, nothing added (was a TypeError or AttributeError traceback)."""
    root = make_bundle(tmp_path, judgments=None)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(_edit(_full(True), where, value)))
    before = (root / "judgments.tsv").read_bytes() if (root / "judgments.tsv").exists() else None
    result = CliRunner().invoke(cli, ["judgments", "add", str(root), str(path)])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert str(path) in result.output and what in result.output, result.output
    after = (root / "judgments.tsv").read_bytes() if (root / "judgments.tsv").exists() else None
    assert after == before
