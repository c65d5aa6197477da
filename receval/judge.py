"""An automatic judge's scores: the optional ``judge.tsv`` table of a bundle, checked.

``judge.tsv`` (or ``.csv`` / ``.parquet``) holds ``query_id``, ``answer`` and ``judge_score`` —
a number in [0, 1], the judge's probability that the fact is correct — and optionally ``judge``
(the judge's name).  Answers are matched to facts exactly as judgments are (the bundle's
``[matching]`` normalisation), so one score row speaks for every system that output the fact.

A fact may be listed on several rows (e.g. one per spelling) only with the same score; a fact
no row scores is **imputed** with the judge's mean over the scored facts the systems output
(:func:`fact_scores`).  Any fixed score function keeps the prediction-powered estimators
unbiased (:mod:`receval.estimators.ppi`): the human draws correct whatever the judge says,
and the imputed value enters the known totals and the draws' correction terms alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.errors import BundleError
from receval.formats.tables import LINE

if TYPE_CHECKING:
    from receval.task import Task

#: columns the loader derives for the judge table (an input column of that name is an error)
JUDGE_RESERVED = ("answer_raw", "fact", "_file")

#: columns of a checked judge table (before ``fact`` and ``answer_raw`` are attached)
JUDGE_COLUMNS = ("query_id", "answer", "judge_score", "judge")


def check_judge_table(src, known: set[str]) -> pd.DataFrame | None:
    """The judge table of a bundle source, checked (``None`` when the bundle has none).

    Raises :class:`BundleError` naming the file and line for a missing column, an empty
    ``query_id``/``answer``, a score that is not a number or lies outside [0, 1], or a query
    that is not in ``queries``.
    """
    from receval.formats.checks import check_queries_known, nonempty, require_columns

    if src is None:
        return None
    frame, path = src.frame, src.path
    require_columns(src, ("query_id", "answer", "judge_score"), JUDGE_RESERVED)
    nonempty(frame, path, ("query_id", "answer"))
    check_queries_known(frame, path, known)
    score = judge_scores(frame, path, " (the judge's probability that the fact is correct)")
    frame["judge_score"] = score.astype(float)
    frame["judge"] = frame["judge"].astype(str).str.strip() if "judge" in frame.columns else ""
    frame["_file"] = str(path)
    return frame[[*JUDGE_COLUMNS, "_file", LINE]]


def dedupe_judge(frame: pd.DataFrame | None, path: Path | str) -> pd.DataFrame | None:
    """One row per fact (facts attached): a fact scored twice with different scores is an error
    naming the second row; repeated rows with the same score collapse to the first."""
    if frame is None:
        return None
    frame = frame.reset_index(drop=True)
    first = frame.groupby("fact", sort=False)["judge_score"].transform("first")
    clash = (frame["judge_score"] != first).to_numpy()
    if clash.any():
        i = int(np.flatnonzero(clash)[0])
        fact = frame["fact"].iloc[i]
        other = float(first.iloc[i])
        raise BundleError(
            path,
            int(frame[LINE].iloc[i]),
            f"the fact ({frame['query_id'].iloc[i]!r}, {frame['answer'].iloc[i]!r}) already has "
            f"judge_score {other!r} (fact {int(fact)}); one fact takes one score",
        )
    return frame.drop_duplicates("fact").reset_index(drop=True)


def fact_scores(task: Task) -> tuple[np.ndarray, np.ndarray]:
    """(score s(x) of every fact id of ``task`` (F,), whether the judge scored it (F,) bool).

    Facts without a score get the judge's mean over the scored facts some system output (the
    pool), or 0.5 when it scored none of them.  The imputed value is a constant of the fact, so
    the prediction-powered estimators stay unbiased; it only narrows them less.
    """
    n = len(task.facts)
    scores = np.full(n, np.nan)
    judge = getattr(task, "judge", None)
    if judge is not None and len(judge):
        scores[judge["fact"].to_numpy(np.int64)] = judge["judge_score"].to_numpy(float)
    scored = ~np.isnan(scores)
    pooled = scored & task.facts["in_pool"].to_numpy(bool)
    fill = float(scores[pooled].mean()) if pooled.any() else 0.5
    return np.where(scored, scores, fill), scored


def judge_names(task: Task) -> list[str]:
    """The distinct non-empty ``judge`` names of the judge table."""
    judge = getattr(task, "judge", None)
    if judge is None or "judge" not in judge.columns:
        return []
    return sorted({str(j) for j in judge["judge"] if str(j).strip()})


def read_judge_file(path: Path) -> pd.DataFrame:
    """A judge's scores for ``receval import ... --judge FILE``: ``query_id, answer,
    judge_score [, judge]``.

    Either a table with a header naming ``query_id``, ``answer`` and ``judge_score`` (``.tsv``,
    ``.csv`` or ``.parquet``, as in a bundle), or a qrels-like text file with four
    whitespace-separated fields per line, ``query_id iteration answer score`` (for TREC the
    answer is the document id).  Scores must be numbers in [0, 1]; :class:`BundleError` names
    the file and line otherwise.
    """
    from receval.formats.tables import read_input_text, read_table

    path = Path(path)
    text = None if path.suffix.lower() == ".parquet" else read_input_text(path, "judge file")
    first = "" if text is None else (text.splitlines() or [""])[0]
    if text is None or "judge_score" in first:
        frame = read_table(path, ("judge_score",))
        missing = [c for c in ("query_id", "answer", "judge_score") if c not in frame.columns]
        if missing:
            raise BundleError(path, 1, f"missing required column(s) {', '.join(missing)}")
    else:
        rows, lines = [], []
        for number, line in enumerate(text.splitlines(), start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 4:
                raise BundleError(
                    path,
                    number,
                    f"expected 4 fields (query_id iteration answer score), found {len(fields)}",
                )
            rows.append((fields[0], fields[2], fields[3]))
            lines.append(number)
        frame = pd.DataFrame(rows, columns=["query_id", "answer", "judge_score"], dtype=object)
        frame[LINE] = np.asarray(lines, np.int64)
    score = judge_scores(frame, path)
    frame["judge_score"] = score.astype(float)
    keep = [c for c in ("query_id", "answer", "judge_score", "judge") if c in frame.columns]
    return frame[keep].reset_index(drop=True)


def attach_judge_scores(outputs: pd.DataFrame, facts: pd.DataFrame, judge: pd.DataFrame) -> None:
    """Add ``judge_score`` to ``outputs`` in place: each output's fact score, imputed as in
    :func:`fact_scores` (the ``judge-uncertainty`` sampling design reads it)."""
    scores = np.full(len(facts), np.nan)
    scores[judge["fact"].to_numpy(np.int64)] = judge["judge_score"].to_numpy(float)
    scored = ~np.isnan(scores)
    pooled = scored & facts["in_pool"].to_numpy(bool)
    fill = float(scores[pooled].mean()) if pooled.any() else 0.5
    outputs["judge_score"] = np.where(scored, scores, fill)[outputs["fact"].to_numpy(np.int64)]


def judge_scores(frame: pd.DataFrame, path, why: str = "") -> pd.Series:
    """The ``judge_score`` column as finite floats in [0, 1] (``BundleError`` naming the line of
    the first that is not; ``why`` ends its message)."""
    from receval.formats.checks import numbers

    score = numbers(frame, path, "judge_score", allow_empty=False)
    bad = ((score < 0) | (score > 1)).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise BundleError(
            path,
            int(frame[LINE].iloc[i]),
            f"judge_score {float(score.iloc[i])!r} is outside [0, 1]{why}",
        )
    return score
