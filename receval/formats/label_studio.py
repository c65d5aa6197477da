"""Label Studio tasks out, Label Studio exports back in.

Label Studio (https://labelstud.io) is the most used open-source annotation tool.  The round trip:

1. :func:`label_studio_tasks` turns the bundle's pending items (the fact rows of
   ``to_annotate.tsv``; without that file, every drawn fact still unlabelled) into Label Studio
   tasks — one JSON object ``{"data": {...}, "meta": {...}}`` per fact, ``data`` with
   ``query_id, query, answer`` and, when the bundle has them, ``provenance`` and
   ``relation_provenance``, ``meta`` with ``systems, n_systems`` (labelling is blind: annotators
   never see which systems output a fact) — and
   :func:`labelling_config` writes the matching labelling interface (a single-choice ``label``
   over the bundle's categories, each choice's ``alias`` the bundle's own label value, so exported
   results are bundle labels).  ``receval export label-studio TASK OUT.json`` writes both
   (``OUT.json`` and ``OUT.xml``).
2. Annotators label in Label Studio; the project's **JSON** export (a list of tasks, each with
   ``data`` and ``annotations``; an annotation has ``completed_by`` and a ``result`` list whose
   ``choices`` result holds the label) or **JSON-MIN** export (one flat object per annotation with
   ``annotator`` and the choice under the control's name) is read back by
   :func:`read_label_studio_export`, one vote per (task, annotation), ``annotator`` = the export's
   user: the e-mail (else the username) of an expanded ``completed_by`` object or of
   ``created_username``; the numeric user id only when the export names nobody.  Cancelled (skipped) annotations
   are not votes.  Label Studio 1.23.2's export button names nobody (checked against a live
   server: ``completed_by: 1``; JSON-MIN and CSV ``annotator: 1``): ``judgments add`` then
   warns (:func:`user_id_note`); a snapshot export with ``serialization_options =
   {"annotations__completed_by": {"only_id": false}}`` names users by e-mail in all three
   formats (``docs/label-studio.md``).  ``receval judgments add TASK export.json`` merges them
   (:mod:`receval.judgments`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pandas as pd

from receval.config import LABEL_CATEGORIES, TaskConfig
from receval.errors import BundleError
from receval.formats.tables import LINE, read_table
from receval.task import Task

__all__ = [
    "label_studio_tasks",
    "labelling_config",
    "pending_facts",
    "read_label_studio_export",
    "user_id_note",
]

#: The name of the choice control (``from_name`` of the results).
CONTROL = "label"


def pending_facts(task: Task) -> pd.DataFrame:
    """The facts waiting for a label: ``query_id, answer`` (+ the other to_annotate columns)."""
    path = task.root / "to_annotate.tsv"
    if path.is_file():
        todo = read_table(path).drop(columns=[LINE])
        if "kind" in todo.columns:
            todo = todo[todo["kind"].astype(str).isin(("fact", ""))]
        return todo.reset_index(drop=True)
    from receval.design import facts_to_annotate

    drawn = task.samples["fact"].to_numpy() if len(task.samples) else []
    return facts_to_annotate(task.outputs, drawn, task.labels.index).reset_index(drop=True)


def _query_text(task: Task) -> pd.Series:
    queries = task.queries.set_index("query_id")
    parts = [c for c in ("entity", "slot") if c in queries.columns]
    if not parts:
        return pd.Series(queries.index, index=queries.index)
    text = queries[parts].fillna("").astype(str).agg(" ".join, axis=1).str.strip()
    return text.where(text != "", pd.Series(queries.index, index=queries.index))


def label_studio_tasks(task: Task) -> list[dict]:
    """The pending facts of ``task`` as Label Studio import tasks
    (``[{"data": {...}, "meta": {...}}, ...]``).

    Labelling is blind: ``data`` holds only what an annotator needs to judge the fact (the query,
    the answer, its provenance); which systems output it (``systems``, ``n_systems``) is in the
    task's ``meta``, which Label Studio keeps with the task but neither the labelling interface
    nor the data manager's columns show."""
    from receval.task import normalize_answers

    todo = pending_facts(task)
    if not len(todo):
        return []
    matching = task.config.matching
    key = (
        todo["query_id"].astype(str)
        + "\t"
        + normalize_answers(todo["answer"].astype(str), matching)
    )
    out = task.outputs
    rows = out.assign(_key=(out["query_id"].astype(str) + "\t" + out["answer"].astype(str)))
    rows = rows[rows["_key"].isin(set(key))].sort_values(["_key", "system"])
    systems = rows.groupby("_key", observed=True)["system"].agg(lambda s: ", ".join(sorted(set(s))))
    first = rows.drop_duplicates("_key").set_index("_key")
    query_text = _query_text(task)
    tasks = []
    for k, (_, row) in zip(key, todo.iterrows(), strict=True):
        data = {
            "query_id": str(row["query_id"]),
            "query": str(query_text.get(row["query_id"], row["query_id"])),
            "answer": str(row["answer"]),
        }
        meta = {
            "systems": str(systems.get(k, "")),
            "n_systems": len(systems.get(k, "").split(", ")) if k in systems else 0,
        }
        for col in ("provenance", "relation_provenance"):
            if col in first.columns and k in first.index and str(first.at[k, col]).strip():
                data[col] = str(first.at[k, col])
        tasks.append({"data": data, "meta": meta})
    return tasks


def labelling_config(config: TaskConfig, with_provenance: bool = False) -> str:
    """Label Studio labelling config (XML): the query, the answer (and its provenance), one
    required single choice; nothing that says which systems output the answer."""
    choices = []
    for category in LABEL_CATEGORIES:
        values = config.labels.get(category, ())
        if values:
            choices.append(
                f"    <Choice value={quoteattr(category)} alias={quoteattr(str(values[0]))}/>"
            )
    provenance = '  <Text name="provenance" value="$provenance"/>\n' if with_provenance else ""
    return (
        "<View>\n"
        '  <Header value="$query ($query_id)"/>\n'
        '  <Text name="answer" value="$answer"/>\n'
        f"{provenance}"
        f'  <Choices name="{CONTROL}" toName="answer" choice="single" required="true" '
        'showInline="true">\n' + "\n".join(choices) + "\n  </Choices>\n</View>\n"
    )


def _named_user(created_username: object) -> str:
    """The person in Label Studio's ``created_username`` (``"[first last] email, id"``): the
    e-mail, else the name; "" when it names nobody."""
    text = str(created_username or "").strip()
    head, sep, tail = text.rpartition(",")
    if sep and tail.strip().isdigit():
        text = head.strip()
    emails = [word for word in text.split() if "@" in word]
    return emails[-1] if emails else text


def _user(completed_by, created_username: object = None) -> str:
    """The annotator of one vote: the user's e-mail or username where the export has them (an
    expanded ``completed_by`` object, or ``created_username``); the numeric user id only when
    the export names nobody."""
    if isinstance(completed_by, dict):
        for key in ("email", "username"):
            if completed_by.get(key) not in (None, ""):
                return str(completed_by[key])
        completed_by = completed_by.get("id")
    named = _named_user(created_username)
    if named:
        return named
    return "" if completed_by in (None, "") else str(completed_by)


#: Where the docs say how to export e-mails instead of user ids.
EMAIL_EXPORT_DOC = "docs/label-studio.md"


def user_id_note(path: Path | str, annotators: pd.Series) -> str | None:
    """A warning when a Label Studio export names its annotators only by numeric user id (the
    export button of Label Studio 1.23 writes ``completed_by: 1``); None when it names people.

    Label Studio's own export (JSON, JSON-MIN, CSV) holds no user names unless it was made as
    a snapshot with ``serialization_options = {"annotations__completed_by": {"only_id":
    false}}``; the votes are then recorded under the ids, which name a person only on that
    server."""
    ids = sorted({str(a) for a in annotators if str(a).strip().isdigit()}, key=int)
    if not ids:
        return None
    shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
    return (
        f"{Path(path).name}: Label Studio names {len(ids)} annotator(s) only by user id "
        f"({shown}); the votes are recorded under those ids. For e-mails, export a snapshot "
        'with serialization_options {"annotations__completed_by": {"only_id": false}} '
        f"(see {EMAIL_EXPORT_DOC})"
    )


_JSON_KIND = {dict: "object", list: "list"}


def _shaped(value: Any, kind: type, path: Path, where: str, what: str) -> Any:
    """``value`` when it is a JSON ``kind`` (an empty one for null or absent); else the export is
    not one Label Studio wrote, named at the task (a JSON file has no useful line here)."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise BundleError(path, None, f"{where}: {what} is {shown}, not a JSON {_JSON_KIND[kind]}")
    return value


def _choice(result: Any, path: Path, where: str) -> str:
    """The label of an annotation's result list (the ``choices`` result of our control)."""
    picked = [
        r
        for r in _shaped(result, list, path, where, "an annotation's result")
        if isinstance(r, dict) and r.get("type", "choices") == "choices" and "value" in r
    ]
    ours = [r for r in picked if r.get("from_name") == CONTROL] or picked
    if not ours:
        return ""
    value = _shaped(ours[0]["value"], dict, path, where, "a result's value")
    choices = _shaped(value.get("choices"), list, path, where, "a result's choices")
    return str(choices[0]) if choices else ""


def _full_export(path: Path, items: list) -> list[dict]:
    rows = []
    for n, item in enumerate(items, start=1):
        where = f"task {item.get('id', n)}"
        data = _shaped(item.get("data"), dict, path, where, "data")
        votes = item.get("annotations") or item.get("completions")
        for annotation in _shaped(votes, list, path, where, "annotations"):
            annotation = _shaped(annotation, dict, path, where, "an annotation")
            if annotation.get("was_cancelled"):
                continue
            rows.append(
                {
                    "query_id": data.get("query_id", ""),
                    "answer": data.get("answer", ""),
                    "label": _choice(annotation.get("result"), path, where),
                    "annotator": _user(
                        annotation.get("completed_by"), annotation.get("created_username")
                    ),
                    "source": f"{path.name}:{where}",
                }
            )
    return rows


def _min_export(path: Path, items: list) -> list[dict]:
    rows = []
    for n, item in enumerate(items, start=1):
        label = item.get(CONTROL, "")
        if isinstance(label, list):
            label = label[0] if label else ""
        if isinstance(label, dict):  # {"choices": [...]}
            where = f"task {item.get('id', n)}"
            label = (_shaped(label.get("choices"), list, path, where, "choices") or [""])[0]
        rows.append(
            {
                "query_id": item.get("query_id", ""),
                "answer": item.get("answer", ""),
                "label": "" if label is None else str(label),
                "annotator": _user(item.get("annotator"), item.get("created_username")),
                "source": f"{path.name}:task {item.get('id', n)}",
            }
        )
    return rows


def read_label_studio_export(path: Path | str) -> pd.DataFrame:
    """Votes of a Label Studio JSON (or JSON-MIN) export: ``query_id, answer, label, annotator,
    source`` (``source`` names the export's task id)."""
    path = Path(path)
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(path, None, "no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise BundleError(path, line, f"not a Label Studio JSON export ({exc})") from None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise BundleError(path, 1, "not a Label Studio JSON export (expected a list of tasks)")
    full = any("annotations" in i or "completions" in i or "data" in i for i in items)
    rows = _full_export(path, items) if full else _min_export(path, items)
    for row in rows:
        for key in ("query_id", "answer", "label"):
            if isinstance(row[key], (dict, list, bool)):
                shown = json.dumps(row[key])[:40]
                task = row["source"].rsplit(":", 1)[-1]
                raise BundleError(path, None, f"{task}: {key} is {shown}, not a value")
    missing = [r for r in rows if not r["query_id"] or r["answer"] == ""]
    if missing:
        raise BundleError(
            path,
            None,
            f"{missing[0]['source']}: the task has no query_id/answer data "
            "(export tasks made by `receval export label-studio`)",
        )
    frame = pd.DataFrame(rows, columns=["query_id", "answer", "label", "annotator", "source"])
    return frame
