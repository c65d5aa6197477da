"""Diagnostics written next to the leaderboard: pooling bias, per-query breakdown, annotation spend."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from receval.task import Task

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


def pooling_bias(task: Task, joint: pd.DataFrame | None = None) -> pd.DataFrame:
    """Leave-one-team-out effect on the official closed-world scores, per team.

    For each team, the facts that only its systems output are removed from the judged pool (their
    judgments dropped, so they count as unassessed: ignored for precision, and their equivalence
    classes leave the recall denominator unless another team also found them) and the official
    scores of the team's systems are recomputed.  ``delta_f1 = official_f1_lto − official_f1``
    (mean over the team's systems) is how much a team that had not contributed to the pool would
    be misjudged — Chaganty et al. (2017, §2) report a median of 17.9% precision and 17.0% recall
    on TAC KBP 2015 (macro, relative).  ``joint_f1`` is the team's mean joint estimate, which does
    not depend on who was pooled.
    """
    from receval.estimators.official import official_scores

    base = official_scores(task).set_index("system")
    outputs = task.outputs
    team_of = outputs[["system", "team"]].drop_duplicates().set_index("system")["team"]
    teams_per_fact = outputs.groupby("fact")["team"].nunique()
    team_first = outputs.drop_duplicates("fact").set_index("fact")["team"]
    judged_facts = set(task.labels.index)
    rows = []
    for team in sorted(outputs["team"].unique()):
        members = sorted(team_of.index[team_of == team])
        unique = teams_per_fact.index[
            (teams_per_fact == 1) & (team_first.reindex(teams_per_fact.index) == team)
        ]
        unique_set = set(unique)
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
        lto = official_scores(reduced).set_index("system")
        row = {
            "team": team,
            "systems": len(members),
            "unique_facts": len(unique_set),
            "unique_judged": len(unique_set & judged_facts),
        }
        for metric in ("precision", "recall", "f1"):
            row[f"official_{metric}"] = float(base.loc[members, metric].mean())
            row[f"official_{metric}_lto"] = float(lto.loc[members, metric].mean())
        row["delta_f1"] = row["official_f1_lto"] - row["official_f1"]
        row["joint_f1"] = (
            float(joint.set_index("system").loc[members, "f1"].mean())
            if joint is not None
            else np.nan
        )
        notes = []
        if row["unique_judged"] == 0:
            notes.append("no judged fact is unique to this team: removing it changes nothing")
        if joint is None:
            notes.append("no joint estimate in this run")
        for key, what in (
            ("official_f1", "official scores"),
            ("official_f1_lto", "leave-team-out scores"),
        ):
            if np.isnan(row[key]):
                notes.append(
                    f"{what} undefined: no response of this team's runs was counted right or wrong"
                )
        row["note"] = "; ".join(notes)
        rows.append(row)
    return pd.DataFrame(rows, columns=POOLING_BIAS_COLUMNS)


def per_query(task: Task) -> pd.DataFrame:
    """One row per query: outputs, answering systems, judged facts, judged correct, conflicts, exhaustive facts."""
    out = task.outputs
    labels = task.labels
    q = task.queries[["query_id"]].copy()
    by = out.groupby("query_id")
    q["outputs"] = q["query_id"].map(by.size()).fillna(0).astype(int)
    q["systems"] = q["query_id"].map(by["system"].nunique()).fillna(0).astype(int)
    pool = task.facts[task.facts["in_pool"]]
    judged = pool[pool.index.isin(labels.index)]
    q["judged"] = q["query_id"].map(judged.groupby("query_id").size()).fillna(0).astype(int)
    value = labels.reindex(judged.index)
    correct = judged.assign(v=value.to_numpy()).groupby("query_id")["v"].sum()
    q["judged_correct"] = q["query_id"].map(correct).fillna(0.0)
    conflicts = task.merged.conflicts
    q["conflicts"] = q["query_id"].map(conflicts.groupby("query_id").size()).fillna(0).astype(int)
    ex = (
        task.exhaustive.drop_duplicates(["unit", "fact"])
        if len(task.exhaustive)
        else task.exhaustive
    )
    q["exhaustive_facts"] = (
        q["query_id"].map(ex.groupby("query_id").size()).fillna(0).astype(int) if len(ex) else 0
    )
    return q.sort_values(
        ["conflicts", "judged", "query_id"], ascending=[False, False, True], ignore_index=True
    )


def annotation_spend(task: Task) -> pd.DataFrame:
    """Labels per system: draws, distinct drawn facts, and how many of those other systems share.

    ``drawn_facts_shared`` counts drawn facts that some other system also output: their one label
    serves every system that output them (labels belong to facts).
    """
    samples = task.samples
    systems = task.systems
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
    shared = task.facts["systems"].to_numpy() > 1
    labelled = np.zeros(len(task.facts), bool)
    labelled[task.labels.index.to_numpy(np.int64)] = True
    g = samples.groupby("system")
    distinct = samples.drop_duplicates(["system", "fact"])
    frame = pd.DataFrame({"system": systems})
    frame["draws"] = frame["system"].map(g.size()).fillna(0).astype(int)
    frame["drawn_facts"] = (
        frame["system"].map(distinct.groupby("system").size()).fillna(0).astype(int)
    )
    distinct = distinct.assign(
        shared=shared[distinct["fact"].to_numpy()], labelled=labelled[distinct["fact"].to_numpy()]
    )
    frame["drawn_facts_shared"] = (
        frame["system"].map(distinct.groupby("system")["shared"].sum()).fillna(0).astype(int)
    )
    frame["labelled"] = (
        frame["system"].map(distinct.groupby("system")["labelled"].sum()).fillna(0).astype(int)
    )
    return frame
