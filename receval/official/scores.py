"""Official-compatible closed-world scores: the TAC Cold Start scorer's hop-0 P/R/F1 (micro and
macro) and trec_eval's set and rank-cutoff precision and recall.

This is the *pooled* ("closed-world") baseline of Chaganty et al. (EMNLP 2017, §2 and the
"pooling" baseline of §6.1): every response is looked up in the assessments; responses nobody
assessed are ignored (TAC) or counted wrong (TREC); recall is measured against the equivalence classes that some assessed
response was found to belong to.  It is a census of the assessments, so it has **no sampling
uncertainty** (no interval), but as an estimate of true precision and recall it is **biased**:
answers outside the pool count as absent, which under-states the recall denominator (recall is
over-estimated) and an unpooled system's correct but unassessed answers earn no credit.  The
statistical estimators in :mod:`receval.estimators` improve on it.

What is computed, per system and hop-0 query, as CS-Score 2017 does (``CS-Score-MASTER.pl``,
``SF-ALL-Micro`` at hop 0; checked against the scorer's test suite to 4 decimals):

1. **Matching.**  A response (a run row) is matched to an assessment with the same query, the same
   filler string (exact, not the bundle's fact normalisation), the same filler provenance and, by
   default, the same relation provenance (strings compared after stripping surrounding
   whitespace); provenance lists compare in canonical form
   (:func:`receval.formats.tac_kbp.normalize_provenance`).  When several assessments match, a
   correct one is preferred, else the first in file order.  A provenance column takes part only
   when both the runs and the judgments fill it in.  Bundles without provenance (not TAC) match
   on the bundle's fact instead: (query, answer normalised by ``[matching]``), as every other
   receval estimator does.
2. **Pre-policy class.**  The assessment's category (correct, wrong, inexact, ignore), or
   *unassessed* when nothing matches.
3. **Post-policy class** (``-right/-wrong/-ignore``; :class:`OfficialPolicy`): correct -> right,
   wrong -> wrong, ignore -> ignored, inexact -> ``policy.inexact`` (default: the bundle's
   ``inexact_policy``, wrong for TAC), unassessed -> ``policy.unassessed`` (default: the bundle's
   ``[official] unjudged``; ignored when unset, as CS-Score does).
4. **Duplicates.**  Within one equivalence class of one query, only one right response counts
   (a named mention is preferred over a nominal one, then the first in file order); the others are
   *duplicates* and go to ``policy.duplicate`` (default ignored, the policy the 2017 test suite
   was scored with; ``"wrong"`` is CS-Score's documented SF-run default).  For a single-valued slot
   (:data:`~receval.formats.tac_kbp.SINGLE_VALUED_SLOTS`) at most one right response counts in the
   whole query.
5. **Nominal rule (2016–2017 assessments).**  A right response whose filler is a nominal mention
   (``filler_mention_type`` NOM) in a class with a named mention (``ec_mention_type`` not NOM) is
   ignored.
6. **Ground truth** ``gt`` of a query = the number of distinct equivalence classes named by its
   correct or inexact assessments (1 at most for a single-valued slot).  A correct assessment
   without a class (non-TAC bundles) is its own class, keyed by its fact.
7. **Micro average** over all hop-0 queries: precision = Σright / (Σright + Σwrong),
   recall = Σright / Σgt, F1 = 2PR / (P + R).  ``gt`` sums over every hop-0 query, answered or not.
   **Macro average** (``average="macro"``): the mean of the per-query precision, recall and F1
   over the queries the system answered that have a judgment (CS-Score's ``SF-ALL-Macro``;
   trec_eval's average over the topics of a run that the qrels judge).

A 0/0 ratio (precision without any response counted right or wrong, recall when ``gt`` is 0) is
reported as 0, as CS-Score prints it (``0.0000``), and the ``note`` column says so.

TREC conventions (trec_eval, ``receval import trec``; see the README's "TAC and TREC
conventions"): the bundle's ``[official] unjudged = "wrong"`` counts an unassessed response wrong
(``policy.unassessed``), which makes precision trec_eval's ``set_P``; a query nobody judged is not
evaluated (trec_eval skips topics absent from the qrels); ``cutoff`` K keeps each system's top K
responses per query in trec_eval's order (:func:`~receval.official.responses.trec_eval_rank`: score as a single-precision
float, decreasing, then document id decreasing) and, with unjudged responses wrong, divides
precision by K per evaluated query (``P_K``, also when a run returns fewer than K).  Checked
against ``pytrec_eval`` (``P_K``, ``recall_K``, ``set_P``, ``set_recall``, per query and
averaged) in ``tests/test_official_trec.py``.

Only hop-0 queries count (bundle queries whose ``hop`` column is ``0``; all queries when there is
no ``hop`` column).  Hop-1 scoring is out of scope.

Known difference: CS-Score 2017 puts filler assessments S and L (inexact short/long) in none of
right, wrong or ignored, so they move neither precision nor recall; the TAC vocabulary of
:mod:`receval.formats.tac_kbp` maps them to *inexact*, which counts wrong under the default policy.
The scorer's test suite has no S or L filler assessment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.leaderboard import replicate_ranks
from receval.official.census import default_engine, official_census
from receval.official.coded import in_process, per_query_counts
from receval.official.responses import ground_truth, per_query_counts_pandas
from receval.official.rules import (
    COUNT_COLUMNS,
    CS_SCORE_SF_DEFAULT,
    CS_SCORE_TEST_SUITE,
    ZERO_BY_ZERO,
    OfficialPolicy,
    fact_matched,
    official_rates,
)
from receval.task import Task

if TYPE_CHECKING:
    from receval.engine.base import Engine

__all__ = [
    "AVERAGES",
    "COUNT_COLUMNS",
    "CS_SCORE_SF_DEFAULT",
    "CS_SCORE_TEST_SUITE",
    "OfficialPolicy",
    "describe_official",
    "official_leaderboard",
    "official_per_query",
    "official_scores",
]

#: What the official estimator reports where a ratio is 0/0 (CS-Score prints 0.0000).
AVERAGES = ("micro", "macro")


def _check_options(average: str, cutoff: int | None) -> None:
    if average not in AVERAGES:
        raise ValueError(f"average must be micro or macro, not {average!r}")
    if cutoff is not None and (isinstance(cutoff, bool) or int(cutoff) != cutoff or cutoff < 1):
        raise ValueError(f"cutoff must be a positive integer, not {cutoff!r}")


def _per_query_counts(task: Task, policy: OfficialPolicy, cutoff: int | None) -> pd.DataFrame:
    """Counts per (system, hop-0 query), with ``evaluated`` (answered and judged query)."""

    if fact_matched(task):  # counted over integer codes (the same numbers)
        return per_query_counts(task, policy, cutoff)
    return per_query_counts_pandas(task, policy, cutoff)


def _precision_at_k(frame: pd.DataFrame, cutoff: int | None, unjudged: str) -> np.ndarray | None:
    """P@K's denominator (K per evaluated query, trec_eval's P_K) when it applies, else None."""
    if cutoff is None or unjudged != "wrong":
        return None
    return cutoff * frame["evaluated"].to_numpy(dtype=float)


def official_per_query(
    task: Task, policy: OfficialPolicy = CS_SCORE_TEST_SUITE, cutoff: int | None = None
) -> pd.DataFrame:
    """Official counts and P/R/F1 for every (system, hop-0 query) pair.

    One row per system and hop-0 query (queries a system did not answer included, with zero
    counts), columns ``system, team, query_id`` + :data:`COUNT_COLUMNS` + ``evaluated`` (1 when
    the system answered the query and the query has a judgment: the queries trec_eval scores) +
    ``precision, recall, f1, note``; these are CS-Score's per-query ``.sf`` lines at hop 0.  With
    ``cutoff`` K only each system's top K responses (:func:`~receval.official.responses.trec_eval_rank`) count, and when
    unjudged responses count wrong precision is trec_eval's ``P_K`` (right / K, also when fewer
    than K were returned).  Exact census of the assessments, biased as an estimate of true
    precision/recall (see the module docstring).
    """
    _check_options("micro", cutoff)
    out = _per_query_counts(task, policy, cutoff)
    den = _precision_at_k(out, cutoff, policy.resolved_unassessed(task))
    return official_rates(out[["system", "team", "query_id", *COUNT_COLUMNS, "evaluated"]], den)


def official_scores(
    task: Task,
    policy: OfficialPolicy = CS_SCORE_TEST_SUITE,
    *,
    average: str = "micro",
    cutoff: int | None = None,
    engine: Engine | None = None,
) -> pd.DataFrame:
    """Official-compatible hop-0 precision, recall and F1 per system (CS-Score ``SF-ALL-Micro``).

    Returns one row per system with ``system, team`` + :data:`COUNT_COLUMNS` + ``queries`` (the
    evaluated queries: answered, with a judgment) + ``precision, recall, f1, note``, where

    * ``outputs``: hop-0 responses (run rows, duplicates included; the top K with ``cutoff``);
    * ``judged``: responses an assessment matched; ``assessed_*``: their pre-policy categories;
      ``unassessed``: responses nothing matched;
    * ``duplicates``: right responses beyond the first in an equivalence class (CS-Score's Dup);
    * ``right, wrong, ignored``: post-policy counts;
    * ``gt``: equivalence classes found correct by anyone, summed over all hop-0 queries;
    * ``average="micro"``: precision = Σright / Σ(right + wrong), recall = Σright / Σgt,
      F1 = 2PR/(P+R) (CS-Score's SF-ALL-Micro); ``"macro"``: the mean over the evaluated queries
      of the per-query precision, recall and F1 (:func:`official_per_query`; trec_eval's average
      over the topics a run answered that the qrels judge);
    * ``cutoff`` K: each system's top K responses per query (:func:`~receval.official.responses.trec_eval_rank`); precision
      divides by K per evaluated query when unjudged responses count wrong (trec_eval's ``P_K``).

    A 0/0 ratio is 0, CS-Score's convention, and ``note`` says so.  This is a census of the
    assessed pool (no sampling uncertainty) and the closed-world baseline of Chaganty et al.
    (2017): biased for true precision and recall (unassessed answers are ignored or counted wrong,
    the pool bounds recall's denominator).  See the module docstring for every rule.

    ``engine`` (:mod:`receval.engine`) counts a fact-matched micro census in SQL (the same
    numbers); None: in process over integer codes
    (:mod:`receval.official.coded`), or the task's own embedded DuckDB for a task
    of more than :data:`~receval.official.coded.IN_PROCESS_ROWS` run rows.
    """
    _check_options(average, cutoff)
    if average == "micro" and cutoff is None:
        if fact_matched(task) and (engine is not None or not in_process(task)):
            return official_census(task, engine or default_engine(task), policy)
    return official_scores_pandas(task, policy, average=average, cutoff=cutoff)


def official_scores_pandas(
    task: Task,
    policy: OfficialPolicy = CS_SCORE_TEST_SUITE,
    *,
    average: str = "micro",
    cutoff: int | None = None,
) -> pd.DataFrame:
    """:func:`official_scores` response by response in pandas (every bundle, every option)."""
    _check_options(average, cutoff)
    unjudged = policy.resolved_unassessed(task)
    per_query = _per_query_counts(task, policy, cutoff)
    if average == "macro":
        rows = per_query[per_query["evaluated"] > 0]
        rated = official_rates(rows, _precision_at_k(rows, cutoff, unjudged))
        means = rated.groupby("system", observed=True)[["precision", "recall", "f1"]].mean()
        totals = per_query.groupby("system", observed=True)[COUNT_COLUMNS].sum()
        totals["queries"] = per_query.groupby("system", observed=True)["evaluated"].sum()
        totals = totals.reindex(task.systems, fill_value=0)
        totals.index.name = "system"
        out = totals.reset_index()
        out.insert(1, "team", out["system"].map(task.teams))
        means = means.reindex(task.systems)
        empty = means["precision"].isna().to_numpy()
        for col in ("precision", "recall", "f1"):
            out[col] = means[col].fillna(0.0).to_numpy()
        out["note"] = np.where(
            empty,
            f"no evaluated query (none answered with a judgment): 0/0; {ZERO_BY_ZERO}",
            "",
        )
    else:
        totals = per_query.groupby("system", observed=True)[[*COUNT_COLUMNS, "evaluated"]].sum()
        totals = totals.reindex(task.systems, fill_value=0)
        totals.index.name = "system"
        totals["gt"] = int(ground_truth(task).sum())
        out = totals.reset_index()
        out.insert(1, "team", out["system"].map(task.teams))
        out = official_rates(out, _precision_at_k(out, cutoff, unjudged))
        out = out.rename(columns={"evaluated": "queries"})
    cols = ["system", "team", *COUNT_COLUMNS, "queries", "precision", "recall", "f1", "note"]
    return out[cols].reset_index(drop=True)


def describe_official(
    task: Task,
    policy: OfficialPolicy = CS_SCORE_TEST_SUITE,
    *,
    average: str = "micro",
    cutoff: int | None = None,
) -> str:
    """One sentence saying what the official numbers are (for the leaderboard's ``note``)."""
    unjudged = policy.resolved_unassessed(task)
    what = (
        "micro-averaged (pooled counts over all queries)"
        if average == "micro"
        else "macro-averaged (mean over the queries each system answered that have judgments)"
    )
    rule = (
        "unjudged responses count wrong (trec_eval)"
        if unjudged == "wrong"
        else "unjudged responses ignored (TAC CS-Score; precision is over judged responses)"
    )
    depth = f"; top {cutoff} per query, P@{cutoff} divides by {cutoff}" if cutoff else ""
    if cutoff and unjudged != "wrong":
        depth = f"; top {cutoff} per query"
    return f"official census, {what}; {rule}{depth}"


def official_leaderboard(
    task: Task,
    policy: OfficialPolicy = CS_SCORE_TEST_SUITE,
    *,
    average: str = "micro",
    cutoff: int | None = None,
    rank_by: str = "f1",
    engine: Engine | None = None,
) -> pd.DataFrame:
    """:func:`official_scores` in the ``leaderboard.csv`` contract columns (docs/contracts.md).

    The one place the official leaderboard is built (``receval score --estimator official``
    adds its run notes to it).  The official scores have no sampling uncertainty, so every
    ``_lo``/``_hi`` column is empty (NaN), as are ``rank_lo, rank_hi, tier``.  ``pooled_recall``
    and ``recall`` both hold the official recall: closed-world scoring assumes the pool holds every
    correct answer (pool coverage θ = 1).  ``rank`` is 1 + the number of systems with a strictly
    larger ``rank_by`` (precision, recall, pooled_recall or f1; ties share the better rank;
    systems without a value come last, unranked).  ``estimator`` is ``official`` and ``note``
    explains missing numbers.
    """

    scores = official_scores(task, policy, average=average, cutoff=cutoff, engine=engine)
    nan = np.nan
    board = pd.DataFrame({c: scores[c] for c in ("system", "team", "outputs", "judged")})
    for metric, column in (
        ("precision", "precision"),
        ("pooled_recall", "recall"),
        ("recall", "recall"),
        ("f1", "f1"),
    ):
        board[metric] = scores[column].to_numpy()
        board[f"{metric}_lo"] = nan
        board[f"{metric}_hi"] = nan
    key = rank_by if rank_by in ("precision", "recall", "f1", "pooled_recall") else "f1"
    board["rank"] = replicate_ranks(board[key].to_numpy(float)[None, :])[0]
    board["rank_lo"] = nan
    board["rank_hi"] = nan
    board["tier"] = ""
    board["estimator"] = "official"
    board["note"] = scores["note"] if "note" in scores else ""
    return board.sort_values(["rank", "system"], na_position="last", kind="stable").reset_index(
        drop=True
    )
