"""The official census response by response, in pandas: every hop-0 response matched to its
assessment and classed by the rules (:mod:`receval.official.scores` states them, numbered
1-7), for every bundle — TAC's provenance matching, equivalence classes spanning facts and
mention types included.  The backend of last resort and the reference the others
(:mod:`receval.official.coded`, :mod:`receval.official.census`) are tested against.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from receval.formats.tac_kbp import SINGLE_VALUED_SLOTS, normalize_provenance
from receval.official.rules import CS_SCORE_TEST_SUITE, OfficialPolicy
from receval.task import Task

_POST = ("right", "wrong", "ignored")


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    if name in frame.columns:
        return frame[name].fillna("").astype(str).str.strip()
    return pd.Series("", index=frame.index, dtype=object)


def _canonical(values: pd.Series) -> pd.Series:
    """Canonical provenance strings (computed once per distinct value)."""
    uniques = pd.unique(values.to_numpy())
    table = {u: normalize_provenance(u) for u in uniques}
    return values.map(table)


def _hop0(task: Task) -> tuple[pd.DataFrame, set[str]]:
    queries = task.queries
    if "hop" in queries.columns:
        queries = queries[_column(queries, "hop").isin(("0", ""))]
    return queries, set(queries["query_id"])


def _single_valued(queries: pd.DataFrame) -> set[str]:
    if "slot" not in queries.columns:
        return set()
    slot = _column(queries, "slot")
    return set(queries.loc[slot.isin(SINGLE_VALUED_SLOTS), "query_id"])


def _post_policy_label(choice: str) -> str:
    return {"right": "right", "wrong": "wrong", "ignore": "ignored"}[choice]


def trec_eval_rank(runs: pd.DataFrame) -> np.ndarray:
    """1-based rank of each response within its (system, query), as trec_eval orders a run.

    trec_eval sorts by score compared as single-precision floats (``float sim``), decreasing, and
    breaks ties by document id decreasing (``strcmp``, i.e. code-point order); the rank column of a
    run file is not used.  Responses without a score come last; a run without any score keeps its
    row order.
    """
    if not len(runs):
        return np.zeros(0, dtype=np.int64)
    score = pd.to_numeric(runs["score"], errors="coerce") if "score" in runs else None
    frame = pd.DataFrame(
        {
            "system": runs["system"].astype(str).to_numpy(),
            "query_id": runs["query_id"].astype(str).to_numpy(),
            "_order": np.arange(len(runs)),
        }
    )
    if score is None or score.isna().all():
        keys, ascending = ["system", "query_id", "_order"], [True, True, True]
    else:
        # float32 as trec_eval stores it; NaN stays NaN and sorts last
        frame["_score"] = score.to_numpy(dtype=float).astype(np.float32)
        frame["_doc"] = runs["answer_raw"].astype(str).to_numpy()
        keys, ascending = ["system", "query_id", "_score", "_doc"], [True, True, False, False]
    order = frame.sort_values(keys, ascending=ascending, kind="stable", na_position="last")
    rank = (
        order.groupby(["system", "query_id"], sort=False, observed=True).cumcount().to_numpy() + 1
    )
    out = np.empty(len(frame), dtype=np.int64)
    out[order.index.to_numpy()] = rank
    return out


def categorize_responses(
    task: Task, policy: OfficialPolicy = CS_SCORE_TEST_SUITE, cutoff: int | None = None
) -> pd.DataFrame:
    """Every hop-0 response with its official pre- and post-policy class.

    Returns one row per hop-0 run row (``task.raw_outputs`` order) with ``system, query_id,
    answer_raw, rank`` (:func:`trec_eval_rank`), ``judged`` (an assessment matched), ``pre``
    (correct, wrong, inexact, ignore, unassessed), ``equivalence_class`` (the class credited; empty
    when none), ``duplicate`` (bool) and ``post`` (right, wrong, ignored).  With ``cutoff`` only
    each system's top ``cutoff`` responses per query are kept.  See the module docstring for the
    rules.
    """
    queries, keep = _hop0(task)
    raw = task.raw_outputs
    runs = raw[raw["query_id"].isin(keep)]
    if "hop" in runs.columns:
        runs = runs[_column(runs, "hop").isin(("0", ""))]
    runs = runs.reset_index(drop=True)
    rank = trec_eval_rank(runs)
    if cutoff is not None:
        runs = runs[rank <= cutoff].reset_index(drop=True)
        rank = rank[rank <= cutoff]
    judg = task.judgments
    judg = judg[judg["query_id"].isin(keep)].reset_index(drop=True)

    def keys(frame: pd.DataFrame) -> pd.DataFrame:
        # TAC bundles (with provenance) match exact strings as CS-Score does; other bundles
        # match on the bundle's facts, i.e. its [matching] normalisation
        answer = (
            frame["answer_raw"].astype(str).str.strip()
            if key_provenance
            else frame["fact"].astype(str)
        )
        out = pd.DataFrame(
            {"q": frame["query_id"].astype(str).str.strip(), "a": answer},
            index=frame.index,
        )
        for name, col in key_provenance:
            out[name] = _canonical(_column(frame, col))
        return out

    # a provenance column takes part in matching when both sides fill it in somewhere
    candidates = [("p", "provenance")]
    if policy.match_relation_provenance:
        candidates.append(("rp", "relation_provenance"))
    key_provenance = [
        (name, col)
        for name, col in candidates
        if (_column(judg, col) != "").any() and (_column(runs, col) != "").any()
    ]

    jk = keys(judg)
    key_cols = list(jk.columns)
    jk["category"] = judg["category"].to_numpy()
    ec = _column(judg, "equivalence_class")
    ec = ec.where(ec != "0", "")
    classed = judg["category"].isin(("correct", "inexact"))
    ec = ec.where(ec != "", "fact:" + judg["fact"].astype(str))
    jk["ec"] = ec.where(classed, "")
    jk["filler_mention_type"] = _column(judg, "filler_mention_type").to_numpy()
    jk["ec_mention_type"] = _column(judg, "ec_mention_type").to_numpy()
    jk["_order"] = np.arange(len(jk))
    jk["_correct"] = (jk["category"] == "correct").astype(np.int8)
    chosen = jk.sort_values(["_correct", "_order"], ascending=[False, True]).drop_duplicates(
        key_cols, keep="first"
    )

    rk = keys(runs)
    rk["_row"] = np.arange(len(rk))
    merged = rk.merge(chosen.drop(columns=["_order", "_correct"]), on=key_cols, how="left")
    merged = merged.sort_values("_row", kind="stable").reset_index(drop=True)

    judged = merged["category"].notna().to_numpy()
    pre = merged["category"].fillna("unassessed").to_numpy(dtype=object)
    inexact = _post_policy_label(policy.resolved_inexact(task))
    unassessed = _post_policy_label(policy.resolved_unassessed(task))
    duplicate_to = _post_policy_label(policy.duplicate)
    post_map = {
        "correct": "right",
        "wrong": "wrong",
        "ignore": "ignored",
        "inexact": inexact,
        "unassessed": unassessed,
    }
    post = np.array([post_map[p] for p in pre], dtype=object)
    # a query nobody judged is not evaluated (trec_eval skips topics absent from the qrels)
    post[(pre == "unassessed") & ~runs["query_id"].isin(set(judg["query_id"])).to_numpy()] = (
        "ignored"
    )
    ec_credit = merged["ec"].fillna("").to_numpy(dtype=object)
    nominal = (merged["filler_mention_type"].fillna("") == "NOM").to_numpy()

    out = pd.DataFrame(
        {
            "system": runs["system"].to_numpy(),
            "query_id": runs["query_id"].to_numpy(),
            "answer_raw": runs["answer_raw"].to_numpy(),
            "rank": rank,
            "judged": judged,
            "pre": pre,
            "equivalence_class": ec_credit,
            "duplicate": np.zeros(len(runs), dtype=bool),
            "post": post,
            "_nominal": nominal,
            "_order": np.arange(len(runs)),
        }
    )

    def mark_duplicates(mask: np.ndarray, group: list[str]) -> None:
        """Among rows in ``mask``, keep the first (named mentions first) of each group."""
        if not mask.any():
            return
        sub = out[mask].sort_values(["_nominal", "_order"])
        extra = sub.duplicated(group, keep="first")
        idx = sub.index[extra.to_numpy()]
        out.loc[idx, "duplicate"] = True
        out.loc[idx, "post"] = duplicate_to

    # 4a. one right response per equivalence class (and system, query)
    right = (out["post"] == "right").to_numpy() & (out["equivalence_class"] != "").to_numpy()
    mark_duplicates(
        right & ~out["duplicate"].to_numpy(), ["system", "query_id", "equivalence_class"]
    )
    # 4b. one right response per single-valued query
    single = out["query_id"].isin(_single_valued(queries)).to_numpy()
    right = (out["post"] == "right").to_numpy()
    mark_duplicates(single & right & ~out["duplicate"].to_numpy(), ["system", "query_id"])
    # 5. nominal filler in a class with a named mention
    if policy.nominal_rule:
        ec_type = merged["ec_mention_type"].fillna("").to_numpy(dtype=object)
        has_types = (merged["filler_mention_type"].fillna("") != "").to_numpy() & (ec_type != "")
        named_class = ec_type != "NOM"
        drop = (out["post"] == "right").to_numpy() & has_types & nominal & named_class
        out.loc[drop, "post"] = "ignored"
    return out.drop(columns=["_nominal", "_order"])


def ground_truth(task: Task) -> pd.Series:
    """Hop-0 query_id -> number of correct equivalence classes (CS-Score's GT)."""
    queries, keep = _hop0(task)
    judg = task.judgments
    judg = judg[judg["query_id"].isin(keep) & judg["category"].isin(("correct", "inexact"))]
    ec = _column(judg, "equivalence_class")
    ec = ec.where(~ec.isin(("", "0")), "fact:" + judg["fact"].astype(str))
    gt = ec.groupby(judg["query_id"], observed=True).nunique()
    gt = gt.reindex(queries["query_id"], fill_value=0).astype(np.int64)
    single = list(_single_valued(queries))
    gt.loc[single] = np.minimum(gt.loc[single], 1)
    gt.index.name = "query_id"
    return gt.rename("gt")


def _counts(cat: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            **{c: cat[c] for c in by},
            "outputs": 1,
            "judged": cat["judged"].astype(np.int64),
            "assessed_correct": (cat["pre"] == "correct").astype(np.int64),
            "assessed_wrong": (cat["pre"] == "wrong").astype(np.int64),
            "assessed_inexact": (cat["pre"] == "inexact").astype(np.int64),
            "assessed_ignore": (cat["pre"] == "ignore").astype(np.int64),
            "unassessed": (cat["pre"] == "unassessed").astype(np.int64),
            "duplicates": cat["duplicate"].astype(np.int64),
            "right": (cat["post"] == "right").astype(np.int64),
            "wrong": (cat["post"] == "wrong").astype(np.int64),
            "ignored": (cat["post"] == "ignored").astype(np.int64),
        }
    )
    return frame.groupby(by, observed=True).sum()


def per_query_counts_pandas(task: Task, policy: OfficialPolicy, cutoff: int | None) -> pd.DataFrame:
    """The per-query counts response by response (:func:`categorize_responses`): every bundle,
    TAC's provenance matching and equivalence classes included."""
    queries, keep = _hop0(task)
    cat = categorize_responses(task, policy, cutoff)
    counts = _counts(cat, ["system", "query_id"])
    index = pd.MultiIndex.from_product(
        [task.systems, queries["query_id"].tolist()], names=["system", "query_id"]
    )
    counts = counts.reindex(index, fill_value=0)
    gt = ground_truth(task)
    qids = counts.index.get_level_values("query_id")
    counts["gt"] = gt.reindex(qids).to_numpy()
    judged_queries = set(task.judgments.loc[task.judgments["query_id"].isin(keep), "query_id"])
    counts["evaluated"] = ((counts["outputs"] > 0) & qids.isin(judged_queries)).astype(np.int64)
    out = counts.reset_index()
    out.insert(1, "team", out["system"].map(task.teams))
    return out
