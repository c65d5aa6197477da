"""Annotator votes -> one label per fact; every disagreement is reported, nothing is dropped.

A label belongs to the *fact* (``query_id`` + normalised answer), not to the system that output
it, so every system that output the fact shares it: annotations are reused across systems.

Rules (``[merge] rule`` in ``task.toml``):

* ``majority``: correct when more non-ignored votes say correct than wrong, wrong when fewer;
  a tie is decided by ``[merge] tie``: ``half`` (label 0.5, the default: the fact counts half
  correct in every estimator), ``wrong``, ``correct`` or ``unjudged`` (the fact stays unlabelled).
* ``any-correct``: correct when at least one vote says correct.
* ``unanimous``: correct only when every vote says correct.

Votes are the annotation values after the ``[labels]`` vocabulary and the inexact policy;
ignored annotations do not vote.  The conflicts table lists every fact whose votes disagree
(``kind`` = ``tie`` when the majority rule met equal counts and the tie policy decided,
``disagreement`` otherwise), every fact whose annotations name two equivalence classes
(``kind`` = ``equivalence-class``), and facts whose every annotation was ignored
(``kind`` = ``all-ignored``), with the votes and the decision taken.  An annotator votes once per
fact: several rows of one annotator for one fact count as one vote (the last row) and are listed
as ``kind`` = ``duplicate-vote``.  A fact can appear under
several kinds (a tie *and* two equivalence classes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from receval.config import MERGE_RULES, TIE_POLICIES

CONFLICT_COLUMNS = ["fact", "query_id", "answer", "kind", "votes", "decision"]


@dataclass(frozen=True)
class MergeResult:
    """Merged labels.

    Attributes
    ----------
    labels : Series indexed by fact id, label value in {0, 0.5, 1} (0.5 only for ties under the
        ``half`` policy).  Facts without a usable vote are absent.
    votes : one row per annotated fact: ``fact, query_id, answer, correct, wrong, ignored,
        equivalence_class, decision``.
    conflicts : ``fact, query_id, answer, kind, votes, decision`` (see module docstring).
    """

    labels: pd.Series
    votes: pd.DataFrame
    conflicts: pd.DataFrame

    @property
    def equivalence_class(self) -> pd.Series:
        """Fact id -> equivalence class (empty string when none was given)."""
        return self.votes.set_index("fact")["equivalence_class"]


def decide_labels(correct: np.ndarray, wrong: np.ndarray, rule: str, tie: str) -> np.ndarray:
    """Label per fact from vote counts (NaN = no label)."""
    votes = correct + wrong
    out = np.full(correct.shape, np.nan)
    if rule == "majority":
        out[correct > wrong] = 1.0
        out[wrong > correct] = 0.0
        is_tie = (correct == wrong) & (votes > 0)
        out[is_tie] = {"half": 0.5, "wrong": 0.0, "correct": 1.0, "unjudged": np.nan}[tie]
    elif rule == "any-correct":
        out[votes > 0] = 0.0
        out[correct > 0] = 1.0
    elif rule == "unanimous":
        out[votes > 0] = 0.0
        out[(correct > 0) & (wrong == 0)] = 1.0
    else:
        raise ValueError(f"unknown merge rule {rule!r}")
    return out


def _describe(value: float) -> str:
    if np.isnan(value):
        return "unjudged"
    return {1.0: "correct", 0.0: "wrong", 0.5: "half (tie)"}[float(value)]


def _describe_all(decision: np.ndarray) -> np.ndarray | list[str]:
    """:func:`_describe` of every decision, vectorised (the loop only for a value it lacks)."""
    known = [np.isnan(decision), decision == 1.0, decision == 0.0, decision == 0.5]
    if not np.logical_or.reduce(known).all():
        return [_describe(v) for v in decision]
    return np.select(known, ["unjudged", "correct", "wrong", "half (tie)"], default="")


def _one_vote_per_annotator(
    judgments: pd.DataFrame, value: np.ndarray
) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """Keep one vote per (annotator, fact): the annotator's last row in file order.

    Rows without an annotator name stay separate votes (nothing says they come from one person).
    Returns the kept rows, their values and a conflicts frame (``kind`` = ``duplicate-vote``) that
    lists every (annotator, fact) with more than one row: how many rows, their values and which
    was kept.
    """
    empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in CONFLICT_COLUMNS})
    if "annotator" not in judgments.columns:
        return judgments, value, empty
    who = judgments["annotator"].fillna("").astype(str).str.strip().to_numpy()
    named = who != ""
    if not named.any():  # no annotator named: every row its own vote
        return judgments, value, empty
    frame = pd.DataFrame({"fact": judgments["fact"].to_numpy(), "who": who})
    dup_any = frame.duplicated(["fact", "who"], keep=False).to_numpy() & named
    if not dup_any.any():
        return judgments, value, empty
    drop = frame.duplicated(["fact", "who"], keep="last").to_numpy() & named
    text = np.where(np.isnan(value), "ignored", np.where(value == 1.0, "correct", "wrong"))
    rows = frame[dup_any].assign(v=text[dup_any], q=judgments["query_id"].to_numpy()[dup_any])
    rows["a"] = judgments["answer"].to_numpy()[dup_any]
    grouped = rows.groupby(["fact", "who"], sort=True, observed=True)
    summary = grouped.agg(
        query_id=("q", "first"), answer=("a", "first"), values=("v", list)
    ).reset_index()
    duplicates = pd.DataFrame(
        {
            "fact": summary["fact"].to_numpy(),
            "query_id": summary["query_id"].to_numpy(),
            "answer": summary["answer"].to_numpy(),
            "kind": "duplicate-vote",
            "votes": [
                f"annotator={w} rows={len(v)} values={','.join(v)}"
                for w, v in zip(summary["who"], summary["values"], strict=True)
            ],
            "decision": [f"one vote: {v[-1]} (the last row)" for v in summary["values"]],
        }
    )
    keep = ~drop
    return judgments[keep], value[keep], duplicates


def merge_labels(judgments: pd.DataFrame, rule: str = "majority", tie: str = "half") -> MergeResult:
    """Merge annotations into one label per fact.

    Parameters
    ----------
    judgments : frame with ``fact, query_id, answer, value`` (1 correct, 0 wrong, NaN ignored) and
        ``equivalence_class`` (empty string when absent).
    rule, tie : see the module docstring.

    Returns
    -------
    MergeResult
        A deterministic function of the votes (no estimation involved).

    Raises
    ------
    ValueError
        For an unknown ``rule`` or ``tie``, or a ``value`` other than 0, 1 or NaN.
    """
    if rule not in MERGE_RULES:
        raise ValueError(f"unknown merge rule {rule!r} (known: {', '.join(MERGE_RULES)})")
    if tie not in TIE_POLICIES:
        raise ValueError(f"unknown tie policy {tie!r} (known: {', '.join(TIE_POLICIES)})")
    if judgments.empty:
        empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in CONFLICT_COLUMNS})
        votes = pd.DataFrame(
            {
                "fact": pd.Series([], dtype=np.int64),
                "query_id": pd.Series([], dtype=object),
                "answer": pd.Series([], dtype=object),
                "correct": pd.Series([], dtype=np.int64),
                "wrong": pd.Series([], dtype=np.int64),
                "ignored": pd.Series([], dtype=np.int64),
                "equivalence_class": pd.Series([], dtype=object),
                "decision": pd.Series([], dtype=float),
            }
        )
        return MergeResult(pd.Series([], dtype=float, name="label"), votes, empty)
    value = judgments["value"].to_numpy(dtype=float)
    odd = ~(np.isnan(value) | (value == 0.0) | (value == 1.0))
    if odd.any():
        raise ValueError(
            f"judgment values must be 1 (correct), 0 (wrong) or NaN (ignored), not {value[odd][0]!r}"
        )
    judgments, value, duplicates = _one_vote_per_annotator(judgments, value)
    frame = pd.DataFrame(
        {
            "fact": judgments["fact"].to_numpy(),
            "correct": (value == 1.0).astype(np.int64),
            "wrong": (value == 0.0).astype(np.int64),
            "ignored": np.isnan(value).astype(np.int64),
        }
    )
    counts = frame.groupby("fact", observed=True)[["correct", "wrong", "ignored"]].sum()
    first = judgments.drop_duplicates("fact").set_index("fact")[["query_id", "answer"]]
    counts = counts.join(first)

    if "equivalence_class" in judgments.columns:
        cls = judgments["equivalence_class"].fillna("").astype(str).str.strip()
    else:
        cls = pd.Series("", index=judgments.index)
    named = judgments.loc[(cls != "") & (cls != "0"), ["fact"]].assign(
        cls=cls[(cls != "") & (cls != "0")]
    )
    classes = named.drop_duplicates().groupby("fact", observed=True)["cls"].agg(lambda s: sorted(s))
    counts["equivalence_class"] = ""
    counts.loc[classes.index, "equivalence_class"] = classes.map(lambda v: v[0]).to_numpy()

    c = counts["correct"].to_numpy()
    w = counts["wrong"].to_numpy()
    decision = decide_labels(c, w, rule, tie)
    counts["decision"] = decision
    votes = counts.reset_index()[
        [
            "fact",
            "query_id",
            "answer",
            "correct",
            "wrong",
            "ignored",
            "equivalence_class",
            "decision",
        ]
    ]

    def vote_text(sub: pd.DataFrame) -> pd.Series:  # only for the facts listed
        return (
            "correct="
            + sub["correct"].astype(str)
            + " wrong="
            + sub["wrong"].astype(str)
            + " ignored="
            + sub["ignored"].astype(str)
        )

    decided = pd.Series(_describe_all(decision), index=counts.index)
    parts = []
    tie_mask = (c == w) & (c > 0) & (rule == "majority")
    disagree = (c > 0) & (w > 0) & ~tie_mask
    all_ignored = (c + w) == 0
    for mask, kind in ((tie_mask, "tie"), (disagree, "disagreement"), (all_ignored, "all-ignored")):
        if mask.any():
            sub = counts[mask]
            parts.append(
                pd.DataFrame(
                    {
                        "fact": sub.index.to_numpy(),
                        "query_id": sub["query_id"].to_numpy(),
                        "answer": sub["answer"].to_numpy(),
                        "kind": kind,
                        "votes": vote_text(sub).to_numpy(),
                        "decision": decided[mask].to_numpy(),
                    }
                )
            )
    multi = classes[classes.map(len) > 1]
    if len(multi):
        sub = counts.loc[multi.index]
        parts.append(
            pd.DataFrame(
                {
                    "fact": multi.index.to_numpy(),
                    "query_id": sub["query_id"].to_numpy(),
                    "answer": sub["answer"].to_numpy(),
                    "kind": "equivalence-class",
                    "votes": ["classes=" + ",".join(v) for v in multi],
                    "decision": [f"class {v[0]} (first in sort order)" for v in multi],
                }
            )
        )
    if len(duplicates):
        parts.append(duplicates)
    if parts:
        conflicts = pd.concat(parts, ignore_index=True).sort_values(
            ["fact", "kind"], ignore_index=True
        )
    else:
        conflicts = pd.DataFrame({col: pd.Series([], dtype=object) for col in CONFLICT_COLUMNS})
    labels = counts["decision"].dropna().rename("label")
    return MergeResult(labels=labels, votes=votes, conflicts=conflicts)
