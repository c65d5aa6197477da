"""The official scorer's rules, shared by every census backend (pandas in
:mod:`receval.official.scores`, integer codes in :mod:`receval.official.coded`, SQL in
:mod:`receval.official.census`): the count columns, the right/wrong/ignore policy and its
choices, which queries count (hop 0) and which bundles the code and SQL backends cover
(:func:`fact_matched`), and the one function that turns counts into precision, recall and F1
(CS-Score's 0/0 = 0 convention)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.estimators.recall import f1_score
from receval.formats.tac_kbp import SINGLE_VALUED_SLOTS

if TYPE_CHECKING:
    from receval.task import Task

#: Count columns of :func:`official_per_query` / :func:`official_scores`, in output order.
COUNT_COLUMNS = [
    "outputs",
    "judged",
    "assessed_correct",
    "assessed_wrong",
    "assessed_inexact",
    "assessed_ignore",
    "unassessed",
    "duplicates",
    "right",
    "wrong",
    "ignored",
    "gt",
]


@dataclass(frozen=True)
class OfficialPolicy:
    """Right/Wrong/Ignore policy of the official scorer (CS-Score's ``-right/-wrong/-ignore``).

    Attributes
    ----------
    inexact : ``"right"``, ``"wrong"`` or ``"ignore"`` for INEXACT responses; None takes the
        bundle's ``[labels] inexact_policy`` (``correct`` meaning right).
    duplicate : where a second right response in an already-hit equivalence class goes
        (``"ignore"``, ``"wrong"`` or ``"right"``).
    unassessed : ``"ignore"`` or ``"wrong"`` for responses no assessment matches; None takes the
        bundle's ``[official] unjudged`` (``ignore`` when unset: CS-Score's rule; ``receval import
        trec`` records ``wrong``, trec_eval's rule).
    match_relation_provenance : also require equal relation provenance when matching a response
        to an assessment (CS-Score's ASSESSED discipline); False matches on (query, filler,
        filler provenance) only.
    nominal_rule : apply the 2016 rule that ignores a nominal right filler when its class has a
        named mention (only where the assessments carry mention types).
    """

    inexact: str | None = None
    duplicate: str = "ignore"
    unassessed: str | None = None
    match_relation_provenance: bool = True
    nominal_rule: bool = True

    def __post_init__(self) -> None:
        if self.inexact not in (None, "right", "wrong", "ignore"):
            raise ValueError(f"inexact must be right, wrong or ignore, not {self.inexact!r}")
        if self.duplicate not in ("right", "wrong", "ignore"):
            raise ValueError(f"duplicate must be right, wrong or ignore, not {self.duplicate!r}")
        if self.unassessed not in (None, "wrong", "ignore"):
            raise ValueError(f"unassessed must be wrong or ignore, not {self.unassessed!r}")

    def resolved_inexact(self, task: Task) -> str:
        if self.inexact is not None:
            return self.inexact
        return {"wrong": "wrong", "correct": "right", "ignore": "ignore"}[
            task.config.inexact_policy
        ]

    def resolved_unassessed(self, task: Task) -> str:
        if self.unassessed is not None:
            return self.unassessed
        return getattr(task.config, "unjudged", None) or "ignore"


#: The policy the CS-Score 2017 test suite was scored with (``IGNORE => UNASSESSED:DUPLICATE``).
CS_SCORE_TEST_SUITE = OfficialPolicy()
#: CS-Score's documented default for SF runs: duplicates count as wrong.
CS_SCORE_SF_DEFAULT = OfficialPolicy(duplicate="wrong")


ZERO_BY_ZERO = "CS-Score's convention: 0/0 is reported as 0"


def official_rates(frame: pd.DataFrame, denominator: np.ndarray | None = None) -> pd.DataFrame:
    """Add precision, recall, f1 and note from right, wrong and gt.

    A 0/0 ratio is 0, as CS-Score prints it (its ``get_line`` formats an undefined score as
    ``0.0000``), and ``note`` says so.  ``denominator`` replaces right + wrong (P@K: K per
    evaluated query).
    """
    right = frame["right"].to_numpy(dtype=float)
    wrong = frame["wrong"].to_numpy(dtype=float)
    gt = frame["gt"].to_numpy(dtype=float)
    den = right + wrong if denominator is None else np.asarray(denominator, dtype=float)
    p_undefined = den <= 0
    r_undefined = gt <= 0
    precision = right / np.where(p_undefined, 1.0, den) * ~p_undefined
    recall = right / np.where(r_undefined, 1.0, gt) * ~r_undefined
    f1 = f1_score(precision, recall)
    notes = []
    for p, r in zip(p_undefined, r_undefined, strict=True):
        why = []
        if p:
            why.append(f"precision 0/0 (no response counted right or wrong); {ZERO_BY_ZERO}")
        if r:
            why.append(f"recall 0/0 (no correct answer assessed, gt = 0); {ZERO_BY_ZERO}")
        notes.append("; ".join(why))
    frame = frame.copy()
    frame["precision"] = precision
    frame["recall"] = recall
    frame["f1"] = f1
    frame["note"] = notes
    return frame


def policy_words(task: Task, policy: OfficialPolicy | None) -> dict[str, str]:
    """The policy's ``inexact``, ``unassessed`` and ``duplicate`` choices (right, wrong or
    ignore), the bundle's defaults resolved."""
    policy = policy or CS_SCORE_TEST_SUITE
    return {
        "inexact": policy.resolved_inexact(task),
        "unassessed": policy.resolved_unassessed(task),
        "duplicate": policy.duplicate,
    }


def fact_matched(task: Task) -> bool:
    """True when the official scorer matches responses on facts and every class is one fact."""

    def filled(frame: pd.DataFrame, col: str) -> bool:
        if col not in frame.columns:
            return False
        values = frame[col]
        if isinstance(values.dtype, pd.CategoricalDtype):  # test the categories, then codes
            text = pd.Series(values.cat.categories).astype(str).str.strip()
            nonblank = np.flatnonzero((text != "").to_numpy())
            return bool(len(nonblank)) and bool(np.isin(values.cat.codes, nonblank).any())
        return bool((values.astype(str).str.strip() != "").any())

    judg, raw = task.judgments, task.raw_outputs
    if any(filled(judg, c) and filled(raw, c) for c in ("provenance", "relation_provenance")):
        return False
    if "equivalence_class" in judg.columns:
        ec = judg["equivalence_class"].astype(str).str.strip()
        if (~ec.isin(("", "0"))).any():
            return False
    return not filled(judg, "ec_mention_type") and "hop" not in raw.columns


def hop0_queries(task: Task) -> pd.DataFrame:
    """The hop-0 queries (all when there is no ``hop`` column) with ``single`` (0/1)."""

    queries = task.queries
    if "hop" in queries.columns:
        queries = queries[queries["hop"].fillna("").astype(str).str.strip().isin(("0", ""))]
    single = np.zeros(len(queries), dtype=np.int64)
    if "slot" in queries.columns:
        slot = queries["slot"].fillna("").astype(str).str.strip()
        single = slot.isin(SINGLE_VALUED_SLOTS).to_numpy().astype(np.int64)
    return pd.DataFrame({"query_id": queries["query_id"].to_numpy(), "single": single})
