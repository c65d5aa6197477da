"""Curves of a task's systems: the next batch of items to label, and the estimated curve.

The library side of ``receval curve plan`` and ``receval curve estimate``: one system's ranked
list (:func:`~receval.curves.ranked.system_ranked_list`), the labels the task already has for it
(reused whichever method or system asked for them), the method's plan, and the curve table with
its record (kind, guarantee, flags) for ``FILE.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from receval.curves.base import CurveEstimate

#: columns of a curve batch file (``curve_to_annotate.tsv``)
BATCH_COLUMNS = ["rank", "query_id", "answer", "system", "method"]


def plan_batch(task, system: str, method: str, params: dict[str, Any]) -> tuple[pd.DataFrame, int]:
    """The items ``method`` needs labelled next for ``system`` (``BATCH_COLUMNS``), and how many
    labels it reuses.  Empty when the method has every label it needs.

    ``task`` is a :class:`~receval.task.Task` or a :class:`~receval.curves.sources.CurveBundle`
    (the ranked list then comes from the engine: only N, the ranks of labelled facts and the
    planned items are read)."""
    from receval.curves.sources import ranked_system

    ranked = ranked_system(task, system)
    known = ranked.known
    need = known.missing(curve_method(method, params, ranked).plan(ranked.size, known))
    rows = ranked.items(need)
    batch = pd.DataFrame(
        {
            "rank": need,
            "query_id": rows["query_id"].to_numpy(),
            "answer": rows["answer"].to_numpy(),
            "system": system,
            "method": method,
        }
    )
    return batch, len(known)


def curve_method(method: str, params: dict[str, Any], ranked):
    """The method ``method`` with ``params``; ``judge=True`` (TailBand only) stratifies by the
    task's judge scores of ``ranked`` (a rank without a score counts as judged wrong: the band
    holds whatever the classes).  Raises ``ValueError`` when there are none."""
    from receval.curves import make_method

    params = dict(params)
    if params.pop("judge", False):
        if method != "tailband":
            raise ValueError(f"judge stratification is a tailband option, not {method}'s")
        if ranked.judge is None:
            raise ValueError(
                "no judge scores for this system: add a judge table (judge.tsv: query_id, "
                "answer, judge_score) to the task; an engine-ranked run has none"
            )
        from receval.curves.judged import JudgeScores

        params["judge"] = JudgeScores(np.nan_to_num(ranked.judge, nan=0.0))
    return make_method(method, **params)


def merge_batches(pending: pd.DataFrame | None, batch: pd.DataFrame) -> pd.DataFrame:
    """Pending rows of an existing batch file followed by the new batch (one row per system and
    rank; the new row wins)."""
    if pending is None or not len(pending):
        return batch[BATCH_COLUMNS].reset_index(drop=True)
    merged = pd.concat([pending, batch], ignore_index=True)
    merged = merged.drop_duplicates(subset=["system", "rank"], keep="last")
    merged["rank"] = merged["rank"].astype("int64")
    return merged[BATCH_COLUMNS].reset_index(drop=True)


def unlabelled_rows(task, batch: pd.DataFrame) -> pd.DataFrame:
    """The rows of a batch file that still have no label in ``task`` (other tasks' systems kept)."""
    from receval.curves.sources import ranked_system

    keep = []
    for system, rows in batch.groupby("system", sort=False, observed=True):
        if system not in task.systems:
            keep.append(rows)
            continue
        known = ranked_system(task, system).known
        keep.append(rows[~rows["rank"].isin(known.ranks)])
    return pd.concat(keep, ignore_index=True) if keep else batch.iloc[:0]


@dataclass(frozen=True)
class SystemCurve:
    """A system's estimated curve: the table (``curve_frame``), the estimate and its record."""

    frame: pd.DataFrame
    estimate: CurveEstimate
    record: dict[str, Any]


def estimate_system_curve(
    task,
    system: str,
    method: str,
    params: dict[str, Any],
    *,
    true_facts: tuple[float, tuple[float, float] | None, str] | None = None,
) -> SystemCurve:
    """Estimate ``system``'s precision curve with ``method`` from the task's labels.

    Parameters
    ----------
    task : Task or CurveBundle
        The loaded task, or the parts of it the curve commands read (engine-ranked lists).
    system, method : str
        The system and the curve method (``random, logstrat, paula, adastrat, stratband``).
    params : dict
        The method's parameters (see :func:`receval.curves.make_method`).
    true_facts : (T, (T⁻, T⁺) or None, source), optional
        The number of correct facts for the recall axis, its interval when estimated, and where
        it came from.

    Returns
    -------
    SystemCurve
        Raises ``ValueError`` when the method still needs labels (plan and annotate first).
    """
    from receval.curves.sources import ranked_system
    from receval.curves.table import curve_frame

    ranked = ranked_system(task, system)
    known = ranked.known
    algo = curve_method(method, params, ranked)
    missing = known.missing(algo.plan(ranked.size, known))
    if missing.size:
        raise ValueError(
            f"{method} still needs {missing.size} labels for {system}: run `receval curve plan` "
            "and annotate"
        )
    est = algo.estimate(ranked.size, known)
    total, interval, source = true_facts if true_facts is not None else (None, None, None)
    recall = None
    if total:
        recall = {"true_facts": total, "from": source}
        if interval is not None:
            recall["true_facts_lower"], recall["true_facts_upper"] = interval
    record = {
        "system": system,
        "method": method,
        "kind": est.kind,
        "guarantee": est.guarantee,
        "size": est.size,
        "annotations": est.annotations,
        "exact_prefix": est.exact_prefix,
        "queried": len(est.queried),
        "flags": list(est.flags),
        "duplicate_rows": ranked.duplicate_rows,
        "recall": recall,
        "parameters": params,
        **halfwidths(algo, est),
    }
    return SystemCurve(curve_frame(est, total, interval), est, record)


def halfwidths(algo, est: CurveEstimate) -> dict[str, float | None]:
    """``designed_halfwidth``: the largest half-width the design allows at any rank before any
    label (None when the method has no such figure); ``realised_max_halfwidth``: the largest
    (upper − lower)/2 of this curve beyond the exactly labelled prefix (0 when none)."""
    designer = getattr(algo, "designed_halfwidth", None)
    designed = designer(est.size) if designer is not None else None
    ranks = np.asarray(est.ranks)
    beyond = ranks > est.exact_prefix
    width = (np.asarray(est.upper, float) - np.asarray(est.lower, float))[beyond] / 2.0
    width = width[np.isfinite(width)]
    realised = float(width.max()) if width.size else 0.0
    return {"designed_halfwidth": designed, "realised_max_halfwidth": realised}
