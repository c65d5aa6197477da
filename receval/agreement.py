"""Inter-annotator agreement per annotation round (Krippendorff's α).

Krippendorff's α (Krippendorff, *Content Analysis*, 2004, ch. 11; Hayes & Krippendorff 2007) for
nominal data, computed by the maintained ``krippendorff`` package: α = 1 − D_o / D_e, observed
over expected disagreement among the pairable votes (facts with at least two votes).  It handles
any number of annotators and missing votes, so it suits rounds where each fact is labelled by a
different subset of annotators.  α = 1 is perfect agreement, 0 agreement at chance level; α is
undefined (NaN, with a note) when no fact has two or more votes, or when every vote is the same
value (no expected disagreement).

Votes are the judgments' categories (correct, wrong, inexact); ``ignore`` votes are not
judgments of the fact and count as missing.  A round is the judgments' ``sample`` column when it
is filled in, else the first sample round that drew the fact (``samples.tsv``), else
``unsampled``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from receval.task import Task

__all__ = ["AGREEMENT_COLUMNS", "agreement_by_round", "krippendorff_alpha"]

#: Columns of :func:`agreement_by_round` (``agreement.csv``).
AGREEMENT_COLUMNS = [
    "round",
    "annotators",
    "facts",
    "facts_multiply_labelled",
    "votes",
    "percent_agreement",
    "alpha",
    "measure",
    "note",
]
_CODES = {"wrong": 0.0, "correct": 1.0, "inexact": 2.0}


def krippendorff_alpha(votes: pd.DataFrame) -> tuple[float, float, str]:
    """(α, observed pairwise agreement, note) of ``votes`` (``annotator, fact, category``).

    Nominal Krippendorff's α over the (annotator × fact) reliability matrix; percent agreement is
    the share of agreeing pairs among the pairable votes of each fact (pooled over facts).
    """
    import krippendorff

    votes = votes[votes["category"].isin(_CODES)]
    votes = votes.drop_duplicates(["annotator", "fact"], keep="last")
    per_fact = votes.groupby("fact", observed=True).size()
    pairable = per_fact.index[per_fact >= 2]
    if len(pairable) == 0:
        return np.nan, np.nan, "undefined: no fact labelled by two annotators"
    v = votes[votes["fact"].isin(pairable)]
    matrix = v.pivot(index="annotator", columns="fact", values="category").map(
        lambda c: _CODES.get(c, np.nan) if isinstance(c, str) else np.nan
    )
    counts = v.groupby(["fact", "category"], observed=True).size()
    n = v.groupby("fact", observed=True).size()
    agree = float((counts * (counts - 1)).sum())
    pairs = float((n * (n - 1)).sum())
    observed = agree / pairs if pairs else np.nan
    if v["category"].nunique() < 2:
        return (
            np.nan,
            observed,
            "undefined: every vote is the same value (no disagreement expected)",
        )
    alpha = krippendorff.alpha(
        reliability_data=matrix.to_numpy(dtype=float), level_of_measurement="nominal"
    )
    return float(alpha), observed, ""


def _rounds(task: Task) -> pd.Series:
    """The round of each judgment row (see the module docstring)."""
    judg = task.judgments
    given = judg["sample"].fillna("").astype(str).str.strip() if "sample" in judg else None
    first = pd.Series(dtype=object)
    if len(task.samples):
        first = task.samples.drop_duplicates("fact").set_index("fact")["sample"].astype(str)
    derived = judg["fact"].map(first).astype(object).fillna("unsampled")
    if given is None:
        return derived
    return given.where(given != "", derived)


def agreement_by_round(task: Task) -> pd.DataFrame:
    """Krippendorff's α per annotation round (one row per round, :data:`AGREEMENT_COLUMNS`).

    Only rounds with votes by at least two annotators are listed; an empty frame (with the
    columns) when no fact has votes by two annotators.
    """
    judg = task.judgments
    if not len(judg):
        return pd.DataFrame(columns=AGREEMENT_COLUMNS)
    annot = judg["annotator"].fillna("").astype(str).str.strip()
    if not (annot != "").any():  # no annotator named (e.g. TREC qrels): no round to list
        return pd.DataFrame([], columns=AGREEMENT_COLUMNS)
    votes = pd.DataFrame(
        {
            "round": _rounds(task).to_numpy(),
            "annotator": annot.to_numpy(),
            "fact": judg["fact"].to_numpy(),
            "category": judg["category"].to_numpy(),
        }
    )
    votes = votes[votes["annotator"] != ""]
    rows = []
    for name, group in votes.groupby("round", sort=True, observed=True):
        if group["annotator"].nunique() < 2:
            continue
        alpha, observed, note = krippendorff_alpha(group)
        per_fact = (
            group[group["category"].isin(_CODES)]
            .groupby("fact", observed=True)["annotator"]
            .nunique()
        )
        rows.append(
            {
                "round": name,
                "annotators": int(group["annotator"].nunique()),
                "facts": int(group["fact"].nunique()),
                "facts_multiply_labelled": int((per_fact >= 2).sum()),
                "votes": len(group),
                "percent_agreement": observed,
                "alpha": alpha,
                "measure": "Krippendorff's alpha (nominal)",
                "note": note,
            }
        )
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
