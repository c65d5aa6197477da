"""Diagnostics written next to the leaderboard: pooling bias, per-query breakdown, annotation spend."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.official.rules import fact_matched
from receval.task import Task

if TYPE_CHECKING:
    from receval.engine import Engine

POOLING_BIAS_COLUMNS = [
    "team",
    "systems",
    "unique_facts",
    "unique_judged",
    "official_precision",
    "official_precision_lto",
    "official_recall",
    "official_recall_lto",
    "official_f1",
    "official_f1_lto",
    "delta_f1",
    "joint_f1",
    "note",
]


def pooling_bias(
    task: Task, joint: pd.DataFrame | None = None, engine: Engine | None = None
) -> pd.DataFrame:
    """Leave-one-team-out effect on the official closed-world scores, per team.

    For each team, the facts that only its systems output are removed from the judged pool (their
    judgments dropped, so they count as unassessed: ignored for precision under TAC's rule, wrong
    under the bundle's ``[official] unjudged = "wrong"`` (trec_eval's), and their equivalence
    classes leave the recall denominator unless another team also found them) and the official
    scores (micro-averaged) of the team's systems are recomputed.  ``delta_f1 = official_f1_lto − official_f1``
    (mean over the team's systems) is how much a team that had not contributed to the pool would
    be misjudged — Chaganty et al. (2017, §2) report a median of 17.9% precision and 17.0% recall
    on TAC KBP 2015 (macro, relative).  ``joint_f1`` is the team's mean joint estimate, which does
    not depend on who was pooled.

    Bundles matched on facts (no provenance, no equivalence classes, no single-valued slots) are
    done in one pass: per-fact team counts give each team's unique facts, and each system's
    right/wrong counts and the recall denominator lose exactly the responses and classes on
    those facts.  TAC bundles, whose classes span facts, re-score once per team.  With an
    ``engine`` (:mod:`receval.engine`), fact-matched bundles are counted in SQL by the engine
    (:func:`receval.official.census.official_census`, :func:`receval.official.census.leave_team_out`); without
    one, in process over integer codes
    (:func:`receval.official.coded.leave_team_out_coded`); the numbers are the same.
    """
    from receval.official.scores import official_scores

    team_of = pd.Series(task.teams, dtype=object)  # systems with outputs only
    team_of = team_of[team_of.index.isin(task.outputs["system"].unique())]
    unique, owner = unique_facts(task)
    if engine is not None and fact_matched(task):
        from receval.official.census import leave_team_out, official_census

        base = official_census(task, engine).set_index("system")
        lto = leave_team_out(task, engine)
    elif fact_matched(task):  # in process over integer codes: the engine's numbers
        from receval.official.coded import leave_team_out_coded

        base = official_scores(task).set_index("system")
        lto = leave_team_out_coded(task)
    else:
        base = official_scores(task).set_index("system")
        lto = leave_team_out_one_pass(task, base, unique, owner)
        if lto is None:
            lto = leave_team_out_rescore(task, unique, owner)
    judged = np.zeros(len(task.facts), dtype=bool)
    judged[task.labels.index.to_numpy(np.int64)] = True
    teams = sorted(task.outputs["team"].unique())
    unique_count = np.bincount(owner.codes[unique], minlength=len(owner.categories))
    unique_judged = np.bincount(owner.codes[unique & judged], minlength=len(owner.categories))
    categories = list(owner.categories)
    return pooling_bias_frame(
        team_of,
        pd.Series(unique_count, index=categories).reindex(teams, fill_value=0),
        pd.Series(unique_judged, index=categories).reindex(teams, fill_value=0),
        base,
        lto,
        joint,
    )


def pooling_bias_frame(
    team_of: pd.Series,
    unique_count: pd.Series,
    unique_judged: pd.Series,
    base: pd.DataFrame,
    lto: pd.DataFrame,
    joint: pd.DataFrame | None,
) -> pd.DataFrame:
    """``pooling_bias.csv`` from its parts: ``team_of`` (system -> team, systems with outputs),
    per team (every team, sorted) the facts only it output and the judged ones among them,
    the official and leave-team-out scores (indexed by system) and the joint leaderboard."""
    teams = list(unique_count.index)
    metrics = ("precision", "recall", "f1")
    columns = {
        **{f"official_{m}": (base.index, base[m].to_numpy(float)) for m in metrics},
        **{f"official_{m}_lto": (lto.index, lto[m].to_numpy(float)) for m in metrics},
    }
    if joint is not None:
        columns["joint_f1"] = (pd.Index(joint["system"]), joint["f1"].to_numpy(float))
    rows = []
    for team in teams:
        members = sorted(team_of.index[team_of == team])
        row = {
            "team": team,
            "systems": len(members),
            "unique_facts": int(unique_count[team]),
            "unique_judged": int(unique_judged[team]),
        }
        for name, (index, values) in columns.items():
            row[name] = _mean(values[index.get_indexer(members)])
        row["delta_f1"] = row["official_f1_lto"] - row["official_f1"]
        row.setdefault("joint_f1", np.nan)
        row["note"] = _bias_note(row, joint is None)
        rows.append(row)
    return pd.DataFrame(rows, columns=POOLING_BIAS_COLUMNS)


def _mean(values: np.ndarray) -> float:
    """The mean of the values that are not NaN, summed as pandas' ``Series.mean`` sums them
    (NaN when none is)."""
    known = ~np.isnan(values)
    count = int(known.sum())
    return float(np.where(known, values, 0.0).sum() / count) if count else np.nan


def _bias_note(row: dict, no_joint: bool) -> str:
    notes = []
    if row["unique_judged"] == 0:
        notes.append("no judged fact is unique to this team: removing it changes nothing")
    if no_joint:
        notes.append("no joint estimate in this run")
    for key, what in (
        ("official_f1", "official scores"),
        ("official_f1_lto", "leave-team-out scores"),
    ):
        if np.isnan(row[key]):
            notes.append(
                f"{what} undefined: no response of this team's runs was counted right or wrong"
            )
    return "; ".join(notes)


def unique_facts(task: Task) -> tuple[np.ndarray, pd.Categorical]:
    """Per fact: output by exactly one team (bool), and the team of its first output (the owner
    of a unique fact; NaN for facts nobody output).  One pass over (fact, team) codes."""
    outputs = task.outputs
    team = pd.Categorical(outputs["team"], categories=sorted(outputs["team"].unique()))
    fact = outputs["fact"].to_numpy(np.int64)
    n_facts = len(task.facts)
    codes = np.full(n_facts, -1, dtype=np.int64)
    codes[fact[::-1]] = team.codes[::-1]  # reversed: the first output's team wins
    # a fact is unique to its owner's team when no output of it has another team (no sort)
    shared = np.zeros(n_facts, dtype=bool)
    shared[fact[team.codes != codes[fact]]] = True
    owner = pd.Categorical.from_codes(codes, categories=team.categories)
    return (codes >= 0) & ~shared, owner


def _single_valued_queries(task: Task) -> set[str]:
    from receval.formats.tac_kbp import SINGLE_VALUED_SLOTS

    queries = task.queries
    if "slot" not in queries.columns:
        return set()
    slot = queries["slot"].fillna("").astype(str).str.strip()
    return set(queries.loc[slot.isin(SINGLE_VALUED_SLOTS), "query_id"])


def _distinct(*codes: np.ndarray) -> np.ndarray:
    """Row index of the first occurrence of each distinct tuple of integer codes."""
    key = np.zeros(len(codes[0]), dtype=np.int64)
    for c in codes:
        key = key * (int(c.max(initial=0)) + 1) + c
    return np.unique(key, return_index=True)[1]


def leave_team_out_one_pass(
    task: Task, base: pd.DataFrame, unique: np.ndarray, owner: pd.Categorical
) -> pd.DataFrame | None:
    """Leave-team-out official P/R/F1 per system in one pass (fact-matched bundles; else None).

    When every class is one fact, dropping a team's unique facts from the judgments turns exactly
    its responses on those facts into unassessed ones (ignored) and removes those facts' classes
    from ``gt``.  Right responses are then recounted as the scorer counts them: one per (system,
    fact), or one per (system, query) for a single-valued slot (where ``gt`` is at most 1).
    Checked against ``base`` (nothing left out must give the official counts), else None.
    """
    from receval.official.responses import categorize_responses
    from receval.official.rules import official_rates

    if not fact_matched(task):
        return None
    cat = categorize_responses(task)
    raw = task.raw_outputs
    hop0 = task.queries
    if "hop" in hop0.columns:
        hop0 = hop0[hop0["hop"].fillna("").astype(str).str.strip().isin(("0", ""))]
    hop0_ids = set(hop0["query_id"])
    keep = raw["query_id"].isin(hop0_ids).to_numpy()
    if int(keep.sum()) != len(cat):
        return None
    systems = list(base.index)
    fact = raw["fact"].to_numpy(np.int64)[keep]
    sys_code = pd.Categorical(cat["system"], categories=systems).codes.astype(np.int64)
    team_code = pd.Categorical(cat["system"].map(task.teams), categories=owner.categories).codes
    single_ids = _single_valued_queries(task) & hop0_ids
    query_code, _ = pd.factorize(cat["query_id"])
    single = cat["query_id"].isin(single_ids).to_numpy()
    # one right per (system, fact), or per (system, query) for single-valued slots
    unit = np.where(single, query_code.astype(np.int64), fact + len(hop0_ids) + 1)
    post = cat["post"].to_numpy()
    eligible = (post == "right") | cat["duplicate"].to_numpy()
    lost = unique[fact] & (owner.codes[fact] == team_code)

    def rights(mask: np.ndarray) -> np.ndarray:
        rows = np.flatnonzero(mask)
        firsts = rows[_distinct(sys_code[rows], unit[rows])] if len(rows) else rows
        return np.bincount(sys_code[firsts], minlength=len(systems)).astype(float)

    wrong_all = np.bincount(sys_code[post == "wrong"], minlength=len(systems)).astype(float)
    if not np.array_equal(rights(eligible), base["right"].to_numpy(float)) or not np.array_equal(
        wrong_all, base["wrong"].to_numpy(float)
    ):
        return None  # a policy this shortcut does not model: re-score instead
    right = rights(eligible & ~lost)
    wrong = wrong_all - np.bincount(sys_code[(post == "wrong") & lost], minlength=len(systems))
    gt = (
        base["gt"].to_numpy(float)
        - _gt_lost(task, hop0_ids, single_ids, unique, owner)[
            pd.Categorical([task.teams[s] for s in systems], categories=owner.categories).codes
        ]
    )
    rated = official_rates(pd.DataFrame({"right": right, "wrong": wrong, "gt": gt}))
    rated.index = pd.Index(systems, name="system")
    return rated[["precision", "recall", "f1"]]


def _gt_lost(
    task: Task, hop0_ids: set, single_ids: set, unique: np.ndarray, owner: pd.Categorical
) -> np.ndarray:
    """Per team: how many recall-denominator classes disappear when its unique facts do.

    A class is a correct or inexact judged fact of a hop-0 query; a single-valued query counts
    one class at most, so it is lost only when every class of the query is the team's."""
    judg = task.judgments
    classed = judg["category"].isin(("correct", "inexact")) & judg["query_id"].isin(hop0_ids)
    pairs = judg.loc[classed, ["query_id", "fact"]].drop_duplicates("fact")
    facts = pairs["fact"].to_numpy(np.int64)
    is_single = pairs["query_id"].isin(single_ids).to_numpy()
    gone = unique[facts]
    n_teams = len(owner.categories)
    lost = np.bincount(owner.codes[facts[gone & ~is_single]], minlength=n_teams).astype(float)
    if is_single.any():
        sub = pd.DataFrame(
            {
                "q": pairs["query_id"].to_numpy()[is_single],
                "t": owner.codes[facts[is_single]],
                "u": gone[is_single],
            }
        )
        per_query = sub.groupby("q", observed=True).agg(
            n=("u", "size"), teams=("t", "nunique"), u=("u", "all")
        )
        # every class of the query unique to one and the same team
        whole = per_query[(per_query["teams"] == 1) & per_query["u"]]
        team_of_query = sub.drop_duplicates("q").set_index("q")["t"]
        lost += np.bincount(team_of_query.loc[whole.index].to_numpy(), minlength=n_teams)
    return lost


def leave_team_out_rescore(task: Task, unique: np.ndarray, owner: pd.Categorical) -> pd.DataFrame:
    """Leave-team-out official scores by re-scoring each team without its unique facts."""
    from receval.official.scores import official_scores

    outputs = task.outputs
    parts = []
    for team in sorted(outputs["team"].unique()):
        members = sorted(outputs.loc[outputs["team"] == team, "system"].unique())
        unique_set = np.flatnonzero(unique & (np.asarray(owner) == team))
        kept = task.judgments[~task.judgments["fact"].isin(unique_set)].reset_index(drop=True)
        # only the team's own scores are needed; the recall denominator comes from the judgments
        reduced = dataclasses.replace(
            task,
            judgments=kept,
            outputs=outputs[outputs["team"] == team].reset_index(drop=True),
            raw_outputs=task.raw_outputs[task.raw_outputs["system"].isin(members)].reset_index(
                drop=True
            ),
        )
        parts.append(official_scores(reduced).set_index("system")[["precision", "recall", "f1"]])
    return pd.concat(parts)


def per_query(task: Task) -> pd.DataFrame:
    """One row per query: outputs, answering systems, judged facts, judged correct, conflicts, exhaustive facts."""
    labels = task.labels
    q = task.queries[["query_id"]].copy()
    outputs, systems = _outputs_and_systems_per_query(task.outputs)
    q["outputs"] = q["query_id"].map(outputs).fillna(0).astype(int)
    q["systems"] = q["query_id"].map(systems).fillna(0).astype(int)
    pool = task.facts[task.facts["in_pool"]]
    judged_columns(q, pool[pool.index.isin(labels.index)], labels, task.merged.conflicts)
    exhaustive_columns(q, task.exhaustive)
    return sort_per_query(q)


def exhaustive_columns(q: pd.DataFrame, exhaustive: pd.DataFrame) -> None:
    """Add ``exhaustive_facts`` per query to ``q`` (in place): the distinct (unit, fact) pairs
    of ``exhaustive`` (its ``query_id`` and ``fact`` columns).  Shared by the in-memory and the
    engine path (:mod:`receval.engine.score`)."""
    ex = exhaustive.drop_duplicates(["unit", "fact"]) if len(exhaustive) else exhaustive
    q["exhaustive_facts"] = (
        q["query_id"].map(ex.groupby("query_id", observed=True).size()).fillna(0).astype(int)
        if len(ex)
        else 0
    )


def judged_columns(
    q: pd.DataFrame, judged: pd.DataFrame, labels: pd.Series, conflicts: pd.DataFrame
) -> None:
    """Add ``judged``, ``judged_correct`` and ``conflicts`` per query to ``q`` (in place):
    ``judged`` the judged pool facts (a ``query_id`` column, indexed by fact), ``labels`` the
    merged labels by fact, ``conflicts`` the merge's conflicts.  Shared by the in-memory and
    the engine path (:mod:`receval.engine.score`)."""
    q["judged"] = (
        q["query_id"].map(judged.groupby("query_id", observed=True).size()).fillna(0).astype(int)
    )
    value = labels.reindex(judged.index)
    correct = judged.assign(v=value.to_numpy()).groupby("query_id", observed=True)["v"].sum()
    q["judged_correct"] = q["query_id"].map(correct).fillna(0.0)
    q["conflicts"] = (
        q["query_id"].map(conflicts.groupby("query_id", observed=True).size()).fillna(0).astype(int)
    )


def sort_per_query(q: pd.DataFrame) -> pd.DataFrame:
    """per_query.csv's order: most conflicts, then most judged, then query."""
    return q.sort_values(
        ["conflicts", "judged", "query_id"], ascending=[False, False, True], ignore_index=True
    )


#: Rows counted at a time by :func:`_outputs_and_systems_per_query` (bounded temporaries).
CHUNK_ROWS = 1 << 22


def _outputs_and_systems_per_query(outputs: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(outputs, distinct systems) per query id, counted over integer codes a few million rows
    at a time: no temporary array as long as the outputs (a groupby's ``nunique`` holds
    several)."""
    from receval.formats.coded import system_codes

    qcodes, queries = system_codes(outputs["query_id"])
    scodes, systems = system_codes(outputs["system"])
    n_q, n_s = len(queries), max(len(systems), 1)
    if n_q * n_s > 50_000_000:  # too many pairs for a table of flags
        by = outputs.groupby("query_id", observed=True)
        return by.size(), by["system"].nunique()
    counts = np.zeros(n_q, dtype=np.int64)
    seen = np.zeros(n_q * n_s, dtype=bool)
    for lo in range(0, len(qcodes), CHUNK_ROWS):
        q = np.asarray(qcodes[lo : lo + CHUNK_ROWS], dtype=np.int64)
        counts += np.bincount(q, minlength=n_q)
        seen[q * n_s + scodes[lo : lo + CHUNK_ROWS]] = True
    pairs = seen.reshape(n_q, n_s).sum(axis=1)
    return pd.Series(counts, index=queries), pd.Series(pairs, index=queries)


def annotation_spend(task: Task) -> pd.DataFrame:
    """Labels per system: draws, distinct drawn facts, and how many of those other systems share.

    ``drawn_facts_shared`` counts drawn facts that some other system also output: their one label
    serves every system that output them (labels belong to facts).
    """
    if task.samples.empty:
        return annotation_frame(task.samples, task.systems, np.zeros(0, bool), np.zeros(0, bool))
    shared = task.facts["systems"].to_numpy() > 1
    labelled = np.zeros(len(task.facts), bool)
    labelled[task.labels.index.to_numpy(np.int64)] = True
    return annotation_frame(task.samples, task.systems, shared, labelled)


def annotation_frame(
    samples: pd.DataFrame, systems: list[str], shared: np.ndarray, labelled: np.ndarray
) -> pd.DataFrame:
    """``annotation.csv`` from the draws and, per fact id, whether several systems output it
    (``shared``) and whether it has a label (``labelled``)."""
    if samples.empty:
        return pd.DataFrame(
            {
                "system": systems,
                "draws": 0,
                "drawn_facts": 0,
                "drawn_facts_shared": 0,
                "labelled": 0,
            }
        )
    g = samples.groupby("system", observed=True)
    distinct = samples.drop_duplicates(["system", "fact"])
    frame = pd.DataFrame({"system": systems})
    frame["draws"] = frame["system"].map(g.size()).fillna(0).astype(int)
    frame["drawn_facts"] = (
        frame["system"].map(distinct.groupby("system", observed=True).size()).fillna(0).astype(int)
    )
    distinct = distinct.assign(
        shared=shared[distinct["fact"].to_numpy()], labelled=labelled[distinct["fact"].to_numpy()]
    )
    frame["drawn_facts_shared"] = (
        frame["system"]
        .map(distinct.groupby("system", observed=True)["shared"].sum())
        .fillna(0)
        .astype(int)
    )
    frame["labelled"] = (
        frame["system"]
        .map(distinct.groupby("system", observed=True)["labelled"].sum())
        .fillna(0)
        .astype(int)
    )
    return frame
