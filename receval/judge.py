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

**Judges as they come.**  The table may hold several judges (the ``judge`` column names them;
one grade per judge and fact) and graded scores on a scale ``task.toml`` declares
(``[judge] scale = [0, 3]`` for every judge, ``[judge.scales] umbrela = [0, 4]`` for one).  A
grade outside its judge's scale, or one judge grading a fact twice differently, is a
:class:`BundleError` naming the file and line.  Without a declared scale the scores are
probabilities in [0, 1] as before; a bundle with one such judge scores exactly as it always did.
With several judges or a declared scale, ``--estimator ppi`` calibrates every judge on the human
labels and combines them (:mod:`receval.estimators.judge_calibration`); :func:`judge_grades`
gives the grades as a (facts × judges) matrix, and :func:`fact_scores` the judges' mean
normalised grade (the design ``judge-uncertainty`` and the anytime control read it).
"""

from __future__ import annotations

from dataclasses import dataclass
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

#: a judge with at most this many distinct grades is calibrated grade by grade
MAX_LEVELS = 12
#: otherwise its grades are cut into this many equal-count bins
BINS = 10


def check_judge_table(src, known: set[str], config=None) -> pd.DataFrame | None:
    """The judge table of a bundle source, checked (``None`` when the bundle has none).

    Raises :class:`BundleError` naming the file and line for a missing column, an empty
    ``query_id``/``answer``, a score that is not a number or lies outside its judge's declared
    scale (``config``'s ``[judge]``; [0, 1] without one), or a query that is not in ``queries``.
    """
    from receval.formats.checks import check_queries_known, nonempty, require_columns

    if src is None:
        return None
    frame, path = src.frame, src.path
    require_columns(src, ("query_id", "answer", "judge_score"), JUDGE_RESERVED)
    nonempty(frame, path, ("query_id", "answer"))
    check_queries_known(frame, path, known)
    frame["judge"] = frame["judge"].astype(str).str.strip() if "judge" in frame.columns else ""
    score = judge_scores(frame, path, " (the judge's probability that the fact is correct)", config)
    frame["judge_score"] = score.astype(float)
    frame["_file"] = str(path)
    return frame[[*JUDGE_COLUMNS, "_file", LINE]]


def dedupe_judge(frame: pd.DataFrame | None, path: Path | str) -> pd.DataFrame | None:
    """One row per (judge, fact) (facts attached): a judge grading a fact twice with different
    scores is an error naming the second row; repeated rows with the same score collapse to the
    first."""
    if frame is None:
        return None
    frame = frame.reset_index(drop=True)
    if "judge" not in frame.columns:
        frame["judge"] = ""
    keys = [frame["judge"].astype(str), frame["fact"]]
    first = frame.groupby(keys, sort=False)["judge_score"].transform("first")
    clash = (frame["judge_score"] != first).to_numpy()
    if clash.any():
        i = int(np.flatnonzero(clash)[0])
        fact = frame["fact"].iloc[i]
        other = float(first.iloc[i])
        who = str(frame["judge"].iloc[i])
        by = f" from judge {who!r}" if who else ""
        raise BundleError(
            path,
            int(frame[LINE].iloc[i]),
            f"the fact ({frame['query_id'].iloc[i]!r}, {frame['answer'].iloc[i]!r}) already has "
            f"judge_score {other!r}{by} (fact {int(fact)}); one judge gives one score per fact",
        )
    return frame.drop_duplicates(["judge", "fact"]).reset_index(drop=True)


@dataclass(frozen=True)
class JudgeGrades:
    """Every judge's grade of every fact: ``grades`` (F, J), NaN where the judge gave none;
    ``names`` the judges (sorted; "" for an unnamed one), ``scales`` (J, 2) their declared
    [lo, hi]."""

    names: tuple[str, ...]
    scales: np.ndarray
    grades: np.ndarray

    @property
    def normalised(self) -> np.ndarray:
        """(F, J) grades mapped linearly onto [0, 1] by the declared scales (NaN kept)."""
        lo, hi = self.scales[:, 0], self.scales[:, 1]
        return (self.grades - lo) / (hi - lo)

    def missing(self, facts: np.ndarray | None = None) -> dict[str, int]:
        """Per judge, how many of ``facts`` (default: all) it did not grade."""
        g = self.grades if facts is None else self.grades[np.asarray(facts, np.int64)]
        return {n: int(np.isnan(g[:, j]).sum()) for j, n in enumerate(self.names)}


def judge_levels(grades: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(levels (F, J) int, number of levels per judge (J,) without the missing level).

    Level L_j = number of non-missing levels is "missing" (the judge did not grade the fact)."""
    F, J = grades.shape
    levels = np.zeros((F, J), np.int64)
    counts = np.zeros(J, np.int64)
    for j in range(J):
        g = grades[:, j]
        ok = ~np.isnan(g)
        values = np.unique(g[ok])
        if values.size <= MAX_LEVELS:
            lev = np.searchsorted(values, g[ok])
            n = max(values.size, 1)
        else:
            ranks = np.argsort(np.argsort(g[ok], kind="stable"), kind="stable")
            lev = (ranks * BINS) // ok.sum()
            n = BINS
        levels[ok, j] = lev
        levels[~ok, j] = n
        counts[j] = n
    return levels, counts


def judge_grades(task: Task) -> JudgeGrades | None:
    """The judge table of ``task`` as a (facts × judges) grade matrix (None without one; on
    the engine path, over the small tables' facts: :mod:`receval.engine.judge`)."""
    engine = getattr(task, "engine_judge", None)
    if engine is not None:
        return engine.grades()
    judge = getattr(task, "judge", None)
    if judge is None or not len(judge):
        return None
    who = judge["judge"].astype(str) if "judge" in judge.columns else pd.Series("", judge.index)
    names = tuple(sorted(set(who)))
    col = pd.Index(names).get_indexer(who)
    grades = np.full((len(task.facts), len(names)), np.nan)
    grades[judge["fact"].to_numpy(np.int64), col] = judge["judge_score"].to_numpy(float)
    config = task.config
    scales = np.array([config.scale_of(n) for n in names], float).reshape(len(names), 2)
    return JudgeGrades(names, scales, grades)


def calibrates(task: Task) -> bool:
    """Whether ``--estimator ppi`` calibrates and combines the judges on the human labels:
    several judges, or a declared grade scale (one probability judge keeps the linear map)."""
    engine = getattr(task, "engine_judge", None)
    if engine is not None:
        return engine.calibrated
    grades = judge_grades(task)
    return grades is not None and (len(grades.names) > 1 or task.config.judge_graded)


def fact_scores(task: Task) -> tuple[np.ndarray, np.ndarray]:
    """(score s(x) of every fact id of ``task`` (F,), whether a judge scored it (F,) bool).

    With one judge on [0, 1] the score is its probability; with several judges or a declared
    scale it is the mean of the judges' grades mapped onto [0, 1] (over the judges that graded
    the fact; an uncalibrated summary: ``--estimator ppi`` calibrates each judge itself).
    Facts without a score get the mean over the scored facts some system output (the
    pool), or 0.5 when none was scored.  The imputed value is a constant of the fact, so
    the prediction-powered estimators stay unbiased; it only narrows them less.
    """
    n = len(task.facts)
    scores = np.full(n, np.nan)
    judge = getattr(task, "judge", None)
    if judge is not None and len(judge):
        several = "judge" in judge.columns and judge["judge"].nunique() > 1
        if not several and not task.config.judge_graded:  # one probability judge, as before
            scores[judge["fact"].to_numpy(np.int64)] = judge["judge_score"].to_numpy(float)
        else:
            norm = judge_grades(task).normalised
            some = ~np.isnan(norm).all(axis=1)
            scores[some] = np.nanmean(norm[some], axis=1)
    scored = ~np.isnan(scores)
    pooled = scored & task.facts["in_pool"].to_numpy(bool)
    fill = float(scores[pooled].mean()) if pooled.any() else 0.5
    return np.where(scored, scores, fill), scored


def judge_names(task: Task) -> list[str]:
    """The distinct non-empty ``judge`` names of the judge table."""
    engine = getattr(task, "engine_judge", None)
    if engine is not None:
        return [n for n in engine.names if n.strip()]
    judge = getattr(task, "judge", None)
    if judge is None or "judge" not in judge.columns:
        return []
    return sorted({str(j) for j in judge["judge"] if str(j).strip()})


def read_judge_files(paths, scale: tuple[float, float] | None = None) -> pd.DataFrame | None:
    """The judge table of ``receval import ... --judge FILE [--judge FILE ...]`` (None without a
    file): each file read by :func:`read_judge_file` with ``scale`` the declared grade scale
    ([0, 1] when None).  A file without a ``judge`` column names its judge by its stem when
    several files are given (one file keeps the judge unnamed, as before)."""
    if paths is None:
        return None
    paths = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    if not paths:
        return None
    frames = []
    for path in paths:
        frame = read_judge_file(path, scale)
        if "judge" not in frame.columns and len(paths) > 1:
            frame["judge"] = path.name.split(".")[0]
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    if "judge" in table.columns:
        table["judge"] = table["judge"].fillna("").astype(str)
    return table


def read_judge_file(path: Path, scale: tuple[float, float] | None = None) -> pd.DataFrame:
    """A judge's scores for ``receval import ... --judge FILE``: ``query_id, answer,
    judge_score [, judge]`` (grades on ``scale`` when one is declared, else in [0, 1]).

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
    from receval.config import TaskConfig

    score = judge_scores(frame, path, "", TaskConfig(judge_scale=scale) if scale else None)
    frame["judge_score"] = score.astype(float)
    keep = [c for c in ("query_id", "answer", "judge_score", "judge") if c in frame.columns]
    return frame[keep].reset_index(drop=True)


def attach_judge_scores(outputs: pd.DataFrame, task_like) -> None:
    """Add ``judge_score`` to ``outputs`` in place: each output's fact score as in
    :func:`fact_scores` (the ``judge-uncertainty`` sampling design reads it), and every judge's
    level ``judge_level:<name>`` (the ``judge-strata`` designs' strata).  ``task_like`` has
    ``facts``, ``judge`` and ``config`` (a :class:`Task` or a namespace during loading)."""
    from receval.design import LEVEL_COLUMN

    fact = outputs["fact"].to_numpy(np.int64)
    scores, _ = fact_scores(task_like)
    outputs["judge_score"] = scores[fact]
    grades = judge_grades(task_like)
    levels, _ = judge_levels(grades.grades)
    for j, name in enumerate(grades.names):  # the strata of the judge-strata designs
        outputs[LEVEL_COLUMN + name] = levels[fact, j].astype(np.int16)


def judge_scores(frame: pd.DataFrame, path, why: str = "", config=None) -> pd.Series:
    """The ``judge_score`` column as finite floats within each row's judge scale (``config``'s
    ``[judge]``, [0, 1] without one); ``BundleError`` naming the line of the first that is not
    (``why`` ends the message when no scale is declared)."""
    from receval.formats.checks import numbers

    score = numbers(frame, path, "judge_score", allow_empty=False)
    who = frame["judge"].astype(str) if "judge" in frame.columns else pd.Series("", frame.index)
    declared = config is not None and config.judge_graded
    if not declared:
        lo, hi = np.zeros(len(frame)), np.ones(len(frame))
    else:
        names = pd.unique(who)
        table = np.array([config.scale_of(n) for n in names], float).reshape(len(names), 2)
        at = pd.Index(names).get_indexer(who)
        lo, hi = table[at, 0], table[at, 1]
        why = " (its declared scale, task.toml [judge])"
    values = score.to_numpy(float)
    bad = (values < lo) | (values > hi)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        name = str(who.iloc[i])
        of = f" of judge {name!r}" if name and declared else ""
        raise BundleError(
            path,
            int(frame[LINE].iloc[i]),
            f"judge_score {float(values[i])!r}{of} is outside [{lo[i]:g}, {hi[i]:g}]{why}",
        )
    return score
