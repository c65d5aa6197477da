"""Merging filled-in label files into ``judgments.tsv`` (``receval judgments add``).

Annotators fill in ``to_annotate.tsv`` (or a spreadsheet with its columns) and add a ``label``
and an ``annotator`` column; annotation tools export JSON (Label Studio:
:mod:`receval.formats.label_studio`).  :func:`add_judgments` merges such files into the bundle:

* **validated**: every ``query_id`` must be a bundle query and every ``label`` a value of the
  bundle's ``[labels]`` vocabulary (a category name such as ``correct`` is accepted too and written
  as the vocabulary's first value for that category, so the bundle still loads); a row without a
  label is not annotated yet and stays pending; ``unit`` rows (exhaustive units) are not labels and
  are left alone;
* **one vote per (annotator, fact)**: a repeated row with the same label is a duplicate and is
  skipped; the same annotator giving the same fact a different label (in the new files, or against
  ``judgments.tsv``) is an error naming both places, unless ``replace=True``, when the newest vote
  replaces the older one (reported);
* **disagreements between annotators** are kept (every vote is a row) and reported: the merge
  rule of ``task.toml`` decides, and ``conflicts.csv`` of ``receval score`` lists them;
* **nothing pending is lost**: ``to_annotate.tsv`` is rewritten with the fact rows still without a
  label (and every unit row);
* **atomic and locked**: the new ``judgments.tsv`` is written to a temporary file and renamed,
  under an exclusive lock on ``TASK/.receval.lock``, so two ``add`` runs (one after the other or
  at the same time) both land and neither overwrites the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from receval.config import LABEL_CATEGORIES, TaskConfig
from receval.errors import BundleError
from receval.formats.tables import LINE, find_table, read_table, write_table

# the bundle lock (receval.lock; re-exported here: existing imports keep working)
from receval.lock import LOCK_NAME, ROUND_LOCK_WAIT, bundle_lock
from receval.task import Task, load_task, normalize_answers

__all__ = [
    "ADD_LOCK_WAIT",
    "ADD_STEPS",
    "LOCK_NAME",
    "ROUND_LOCK_WAIT",
    "AddResult",
    "add_judgments",
    "bundle_lock",
    "read_label_file",
]

#: The steps :func:`add_judgments` reports through ``on_step`` (progress bars).
ADD_STEPS = 4
#: Seconds :func:`add_judgments` (``judgments add``) waits for the bundle lock by default.
ADD_LOCK_WAIT = 60.0


@dataclass(frozen=True)
class AddResult:
    """What :func:`add_judgments` did.

    Attributes
    ----------
    added : the votes appended to ``judgments.tsv`` (``query_id, answer, label, annotator,
        source``).
    duplicates : rows skipped because the same annotator already gave that fact that label.
    replaced : votes that replaced the same annotator's earlier, different vote (``replace=True``).
    unlabelled : rows without a label (still pending).
    disagreements : facts whose annotators now disagree (``query_id, answer, votes``).
    pending : fact rows left in ``to_annotate.tsv``.
    changed : for each row of ``disagreements``, whether this call added or replaced a vote on
        that fact (False: a disagreement already in ``judgments.tsv`` before the call).
    notes : warnings about the input files (a Label Studio export that names its annotators
        only by user id: :func:`receval.formats.label_studio.user_id_note`; votes on facts that
        no system output and no exhaustive unit holds).
    """

    added: pd.DataFrame
    duplicates: int
    replaced: int
    unlabelled: int
    disagreements: pd.DataFrame
    pending: int
    files: tuple[str, ...] = field(default_factory=tuple)
    changed: tuple[bool, ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def new_disagreements(self) -> pd.DataFrame:
        """The disagreements on facts this call added or replaced a vote on."""
        return self.disagreements[list(self.changed)] if self.changed else self.disagreements[:0]


def _vocabulary(config: TaskConfig) -> dict[str, str]:
    """Case-folded accepted label -> the label written (category names map to a real value)."""
    out = {}
    for category in LABEL_CATEGORIES:
        values = config.labels.get(category, ())
        if values:
            out.setdefault(category.casefold(), str(values[0]))
    for category in LABEL_CATEGORIES:
        for value in config.labels.get(category, ()):
            out[str(value).strip().casefold()] = str(value).strip()
    return out


def read_label_file(path: Path, annotator: str | None = None) -> pd.DataFrame:
    """Read one filled-in label file: ``query_id, answer, label, annotator, source`` rows.

    ``.tsv``/``.csv``/``.parquet`` tables need ``query_id, answer, label`` (``kind`` rows other
    than ``fact`` are dropped) and an ``annotator`` column or ``annotator``; ``.json`` files are
    Label Studio exports (:func:`receval.formats.label_studio.read_label_studio_export`).
    Rows without a label are kept with an empty ``label`` (pending).
    """
    path = Path(path)
    if path.suffix.lower() == ".json":
        from receval.formats.label_studio import read_label_studio_export

        frame = read_label_studio_export(path)
    else:
        frame = read_table(path)
        missing = [c for c in ("query_id", "answer", "label") if c not in frame.columns]
        if missing:
            raise BundleError(path, 1, f"missing column(s) {', '.join(missing)}")
        if "kind" in frame.columns:
            frame = frame[frame["kind"].astype(str).str.strip().isin(("", "fact"))]
        frame = frame.assign(source=path.name + ":" + frame[LINE].astype(str))
    if "annotator" not in frame.columns or annotator is not None:
        if annotator is None:
            raise BundleError(
                path, 1, "no annotator column: add one, or name the annotator (--annotator)"
            )
        frame = frame.assign(annotator=annotator)
    out = frame[["query_id", "answer", "label", "annotator", "source"]].copy()
    for col in ("query_id", "label", "annotator"):
        out[col] = out[col].fillna("").astype(str).str.strip()
    out["answer"] = out["answer"].fillna("").astype(str)
    out["_path"] = str(path)
    out = out.reset_index(drop=True)
    # a Label Studio export (JSON, or the CSV export: it has annotation_id), annotators its own
    out.attrs["label_studio"] = annotator is None and (
        path.suffix.lower() == ".json" or "annotation_id" in frame.columns
    )
    return out


def _fail(row: pd.Series, message: str) -> BundleError:
    """The error for one input row (``source`` is ``<file>:<line>`` or ``<file>:task <id>``)."""
    path = Path(row["_path"])
    _, _, where = str(row["source"]).rpartition(":")
    if where.isdigit():
        return BundleError(path, int(where), message)
    return BundleError(path, None, f"{where}: {message}" if where else message)


def _validate(new: pd.DataFrame, task: Task) -> pd.DataFrame:
    """Check queries, labels and annotators of the labelled rows; map labels to the vocabulary."""
    vocab = _vocabulary(task.config)
    known = set(task.queries["query_id"])
    bad_query = ~new["query_id"].isin(known)
    if bad_query.any():
        row = new[bad_query].iloc[0]
        raise _fail(row, f"query_id {row['query_id']!r} is not a query of the bundle")
    folded = new["label"].str.casefold()
    bad_label = ~folded.isin(vocab)
    if bad_label.any():
        row = new[bad_label].iloc[0]
        allowed = ", ".join(sorted(set(vocab.values())))
        raise _fail(row, f"unknown label {row['label']!r} (the bundle's labels: {allowed})")
    no_annotator = new["annotator"] == ""
    if no_annotator.any():
        raise _fail(new[no_annotator].iloc[0], "empty annotator")
    no_answer = new["answer"].str.strip() == ""  # the bundle refuses a blank answer
    if no_answer.any():
        raise _fail(new[no_answer].iloc[0], "empty answer")
    return new.assign(label=folded.map(vocab))


def _existing(task: Task) -> pd.DataFrame:
    path = find_table(task.root, "judgments")
    if path is None:
        return pd.DataFrame(columns=["query_id", "answer", "label", "annotator"])
    return read_table(path).drop(columns=[LINE])


def _category(labels: pd.Series, config: TaskConfig) -> pd.Series:
    return labels.str.strip().str.casefold().map(config.label_map())


def _one_vote_per_annotator(
    new: pd.DataFrame, old: pd.DataFrame, task: Task, replace: bool
) -> tuple[pd.DataFrame, pd.DataFrame, int, int]:
    """Drop duplicate votes; refuse (or, with ``replace``, apply) changed votes."""
    matching = task.config.matching
    new = new.assign(_key=new["query_id"] + "\t" + normalize_answers(new["answer"], matching))
    new["_key"] = new["_key"] + "\t" + new["annotator"]
    new["_cat"] = _category(new["label"], task.config)
    old = old.copy()
    annot = old["annotator"].fillna("").astype(str) if "annotator" in old else ""
    old["_key"] = (
        old["query_id"].astype(str)
        + "\t"
        + normalize_answers(old["answer"].astype(str), matching)
        + "\t"
        + annot
    )
    old["_cat"] = _category(old["label"].astype(str), task.config)
    # within the new files: the same vote twice is a duplicate, a different one a contradiction
    first = new.drop_duplicates(["_key", "_cat"])
    duplicates = len(new) - len(first)
    clash = first[first.duplicated("_key", keep=False)]
    if len(clash):
        a, b = clash.iloc[0], clash[clash["_key"] == clash.iloc[0]["_key"]].iloc[1]
        raise _fail(
            b,
            f"annotator {b['annotator']!r} labels ({b['query_id']}, {b['answer']!r}) "
            f"{b['label']!r} here and {a['label']!r} at {a['source']}: one vote per annotator "
            "and fact",
        )
    # against judgments.tsv (votes with an annotator only: anonymous votes are not comparable)
    known = old[old["_key"].str.rsplit("\t", n=1).str[-1] != ""]
    prior = known.drop_duplicates("_key", keep="last").set_index("_key")["_cat"]
    before = first["_key"].map(prior)
    same = before.notna() & (before == first["_cat"])
    changed = before.notna() & (before != first["_cat"])
    duplicates += int(same.sum())
    replaced = 0
    if changed.any():
        if not replace:
            row = first[changed].iloc[0]
            raise _fail(
                row,
                f"annotator {row['annotator']!r} already labelled ({row['query_id']}, "
                f"{row['answer']!r}) {_label_of(known, row['_key'])!r} in judgments.tsv; one vote "
                "per annotator and fact (use --replace to replace it)",
            )
        replaced = int(changed.sum())
        old = old[~old["_key"].isin(set(first.loc[changed, "_key"]))]
    return first[~same], old, duplicates, replaced


def _label_of(old: pd.DataFrame, key: str) -> str:
    return str(old.loc[old["_key"] == key, "label"].iloc[-1])


def _disagreements(merged: pd.DataFrame, task: Task) -> pd.DataFrame:
    keyed = merged.assign(
        _fact=merged["query_id"].astype(str)
        + "\t"
        + normalize_answers(merged["answer"].astype(str), task.config.matching),
        _cat=_category(merged["label"].astype(str), task.config),
    )
    keyed = keyed[keyed["_cat"].isin(("correct", "wrong", "inexact"))]
    spread = keyed.groupby("_fact", observed=True)["_cat"].nunique()
    facts = spread.index[spread > 1]
    rows = keyed[keyed["_fact"].isin(facts)]
    if not len(rows):
        return pd.DataFrame(columns=["query_id", "answer", "votes"])
    votes = rows.groupby("_fact", observed=True).apply(
        lambda g: ", ".join(
            f"{a or '?'}={lab}" for a, lab in zip(g["annotator"], g["label"], strict=True)
        ),
        include_groups=False,
    )
    first = rows.drop_duplicates("_fact").set_index("_fact")
    return pd.DataFrame(
        {"query_id": first["query_id"], "answer": first["answer"], "votes": votes}
    ).reset_index(drop=True)


def _rewrite_pending(task: Task, labelled: set[str]) -> int:
    """Drop now-labelled fact rows from ``to_annotate.tsv`` and list again the drawn facts a
    new vote left without a label (a tie under ``tie = "unjudged"``); return the fact rows."""
    path = task.root / "to_annotate.tsv"
    if not path.is_file():
        return 0
    todo = read_table(path).drop(columns=[LINE])
    if not {"query_id", "answer"} <= set(todo.columns):
        return len(todo)
    kind = todo["kind"].astype(str) if "kind" in todo.columns else pd.Series("fact", todo.index)
    fact = kind.isin(("fact", ""))
    key = (
        todo["query_id"].astype(str)
        + "\t"
        + normalize_answers(todo["answer"].astype(str), task.config.matching)
    )
    done = fact & key.isin(labelled)
    back = _reopened(task, labelled, set(key[fact]))
    if done.any() or len(back):
        write_table(path, pd.concat([todo[~done], back.reindex(columns=todo.columns)]).fillna(""))
    return int((fact & ~done).sum()) + len(back)


def _reopened(task: Task, labelled: set[str], listed: set[str]) -> pd.DataFrame:
    """Rows for the drawn facts without a label that ``to_annotate.tsv`` no longer lists."""
    from receval.design import facts_to_annotate

    drawn = np.unique(task.samples["fact"].to_numpy(np.int64))
    facts = task.facts.iloc[drawn]
    keys = facts["query_id"].astype(str) + "\t" + facts["answer"].astype(str)
    wanted = ~keys.isin(labelled | listed).to_numpy()
    rows = facts_to_annotate(task.outputs, drawn[wanted], pd.Index([], dtype=np.int64))
    return rows.assign(kind="fact")


def add_judgments(
    root: Path | str,
    files: list[Path] | list[str],
    *,
    annotator: str | None = None,
    replace: bool = False,
    timeout: float = ADD_LOCK_WAIT,
    on_step: Callable[[], None] | None = None,
) -> AddResult:
    """Merge filled-in label files into the bundle's ``judgments.tsv`` (see the module docstring).

    Parameters
    ----------
    root
        The task bundle.
    files
        Label files (TSV/CSV/Parquet with ``query_id, answer, label[, annotator]``, or Label
        Studio JSON exports).
    annotator
        The annotator of files without an ``annotator`` column (overrides the column).
    replace
        Let a new vote replace the same annotator's different vote on the same fact.
    timeout
        Seconds to wait for another ``add`` holding the bundle lock.
    on_step
        Called after each of the :data:`ADD_STEPS` steps (files read, bundle loaded,
        judgments written, pending facts rewritten): progress reporting.

    Returns
    -------
    AddResult

    Raises
    ------
    BundleError
        A bad row (unknown query or label, empty annotator, contradictory votes), naming the
        file and line; nothing is written then.
    """
    root = Path(root)
    if not files:
        raise ValueError("no label files given")
    step = on_step or (lambda: None)
    frames = [read_label_file(Path(f), annotator) for f in files]
    notes = tuple(_user_id_notes(files, frames))
    rows = pd.concat(frames, ignore_index=True)
    step()
    with bundle_lock(root, timeout):
        task = load_task(root)  # inside the lock: sees every earlier add
        step()
        unlabelled = int((rows["label"] == "").sum())
        new = _validate(rows[rows["label"] != ""].reset_index(drop=True), task)
        old = _existing(task)
        fresh, old, duplicates, replaced = _one_vote_per_annotator(new, old, task, replace)
        added = fresh[["query_id", "answer", "label", "annotator", "source"]]
        merged = pd.concat([old.drop(columns=["_key", "_cat"]), added.astype(object)])
        columns = list(dict.fromkeys([*old.columns.drop(["_key", "_cat"]), *added.columns]))
        merged = merged[columns].fillna("").reset_index(drop=True)
        path = find_table(root, "judgments") or root / "judgments.tsv"
        if len(added) or replaced:
            write_table(path, merged)
        step()
        labelled = _counted_facts(merged, task)
        pending = _rewrite_pending(task, labelled)
        step()
    disagreements = _disagreements(merged, task)
    notes += tuple(_outside_note(added, task))
    notes += tuple(_ignored_note(added, labelled, task))
    return AddResult(
        added=added.reset_index(drop=True),
        duplicates=duplicates,
        replaced=replaced,
        unlabelled=unlabelled,
        disagreements=disagreements,
        pending=pending,
        files=tuple(str(f) for f in files),
        changed=tuple(_fact_keys(disagreements, task).isin(set(_fact_keys(added, task)))),
        notes=notes,
    )


def _counted_facts(votes: pd.DataFrame, task: Task) -> set[str]:
    """Fact keys the bundle's merge gives a label (``[merge]``, as ``score`` sees them): a fact
    whose votes are all ``ignore`` (which leaves the vote out), or tied under ``tie =
    "unjudged"``, still waits for a label (in ``to_annotate.tsv``, and for ``score``)."""
    from receval.merge import merge_labels

    keys = _fact_keys(votes, task)
    codes, uniques = pd.factorize(keys)
    value = _category(votes["label"].astype(str), task.config).map(task.config.category_value())
    classes = votes.get("equivalence_class", pd.Series("", index=votes.index))
    frame = pd.DataFrame(
        {
            "fact": codes,
            "query_id": votes["query_id"].astype(str).to_numpy(),
            "answer": votes["answer"].astype(str).to_numpy(),
            "value": value.to_numpy(float),
            "annotator": votes["annotator"].fillna("").astype(str).to_numpy(),
            "equivalence_class": classes.fillna("").astype(str).to_numpy(),
        }
    )
    merged = merge_labels(frame, task.config.merge_rule, task.config.tie_policy)
    return set(uniques[merged.labels.index.to_numpy(np.int64)])


def _ignored_note(added: pd.DataFrame, labelled: set[str], task: Task):
    """A warning for facts this call voted on that the merge still gives no label."""
    keys = _fact_keys(added, task)
    only = sorted(set(keys[~keys.isin(labelled)]))
    if only:
        query_id, answer = only[0].split("\t", 1)
        yield (
            f"{len(only)} fact(s) still have no label after their votes (only 'ignore' votes, "
            f"or a tie the [merge] tie policy leaves unjudged; first: {query_id} {answer!r}): "
            "they stay in to_annotate.tsv until another vote decides them"
        )


def _outside_note(added: pd.DataFrame, task: Task):
    """A warning for votes on facts that no system output and no exhaustive unit holds: kept
    (they count once a run outputs the fact), but more often a mistyped answer, whose intended
    fact then stays pending."""
    known = task.facts["in_pool"].to_numpy().copy()
    known[task.exhaustive["fact"].to_numpy(np.int64)] = True
    probe = pd.DataFrame(
        {
            "query_id": added["query_id"].astype(str).to_numpy(),
            "answer": normalize_answers(
                added["answer"].astype(str), task.config.matching
            ).to_numpy(),
        }
    )
    facts = task.facts.loc[known, ["query_id", "answer"]]  # Arrow strings: no Python objects
    facts = facts[facts["query_id"].isin(probe["query_id"].unique())].astype(str)
    hits = probe.merge(
        facts.drop_duplicates().assign(_hit=True), how="left", on=["query_id", "answer"]
    )
    outside = hits["_hit"].isna().to_numpy()
    if outside.any():
        first = added[outside].iloc[0]
        yield (
            f"{int(outside.sum())} vote(s) on facts no system output (first: {first['source']}, "
            f"{first['query_id']} {first['answer']!r}): kept in judgments.tsv, they count for "
            "no system until a run outputs the fact; check for a mistyped answer"
        )


def _user_id_notes(files, frames: list[pd.DataFrame]):
    """Warnings for Label Studio exports that name annotators only by user id."""
    from receval.formats.label_studio import user_id_note

    for path, frame in zip(files, frames, strict=True):
        if frame.attrs.get("label_studio"):
            note = user_id_note(path, frame.loc[frame["label"] != "", "annotator"])
            if note:
                yield note


def _fact_keys(frame: pd.DataFrame, task: Task) -> pd.Series:
    """``query_id`` + tab + normalised answer of each row (the fact a vote is about)."""
    return (
        frame["query_id"].astype(str)
        + "\t"
        + normalize_answers(frame["answer"].astype(str), task.config.matching)
    )
