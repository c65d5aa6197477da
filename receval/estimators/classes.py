"""Equivalence classes counted once: the task seen with one fact per class (TAC's counting).

TAC assessors put correct answers that name the same thing (aliases: "Barack Obama",
"Obama") into one *equivalence class* of their query, and the official scorer credits a class
once: a system that outputs two aliases gets one right answer, the other is a redundant
duplicate (ignored), and recall counts classes.  Every sample-based estimator estimates the
same quantities when it sees the task through :func:`class_view`: the facts of one class are
merged into one *canonical* fact (the smallest fact id of the class), so

* a system's outputs are its distinct canonical facts (|X_i| counts a class once, redundant
  aliases leave numerator and denominator, as CS-Score's default ``duplicate = ignore``);
* the pool, ν̂'s denominator and θ̂ count classes (an exhaustive unit finding two aliases finds
  one class);
* a draw of an alias is a draw of its class, with probability the sum of the member facts'
  probabilities under the recorded design (:func:`class_probabilities`), so the importance
  weights stay exact.

Classes come from the judgments (``equivalence_class`` of facts whose merged label is
correct).  The merge is exact for every class whose aliases the judgments name; it needs no
class label for undrawn facts, because a class no draw reached contributes nothing to any
estimate, but it does need, for every *drawn* correct fact, every alias the systems output (TAC
assessors see a query's responses together and class them all; a sampled round must do the
same: judge the drawn answer and list the outputs of its query that name the same thing, with
the same ``equivalence_class``).  :func:`unresolved_outputs` counts the outputs that could be
aliases nobody classed, for the run's warning.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from receval.design import sampling_probabilities


def canonical_facts(task) -> np.ndarray | None:
    """Canonical fact id of every fact id (identity outside classes), or None when no class of
    the judgments holds two facts (then every estimate is the same with or without classes).

    A class is (query, ``equivalence_class``) over facts whose merged label is above 0.
    """
    votes = task.merged.votes
    if votes.empty or "equivalence_class" not in votes:
        return None
    label = task.labels.reindex(votes["fact"].to_numpy()).to_numpy(float)
    cls = votes["equivalence_class"].astype(str).str.strip()
    named = votes[(cls != "") & (label > 0)]
    return _canonical(named, cls[named.index], len(task.facts))


def truth_classes(task) -> np.ndarray | None:
    """Canonical fact ids from ``truth.tsv``'s optional ``equivalence_class`` column (classes of
    true facts; None without the column or without a class of two facts)."""
    truth = task.truth
    if truth is None or "equivalence_class" not in truth.columns:
        return None
    cls = truth["equivalence_class"].fillna("").astype(str).str.strip()
    named = truth[(cls != "") & (truth["value"].to_numpy(float) > 0)]
    return _canonical(named, cls[named.index], len(task.facts))


def _canonical(named: pd.DataFrame, cls: pd.Series, n_facts: int) -> np.ndarray | None:
    """Smallest fact id of each (query, class) of ``named`` for its facts; identity elsewhere."""
    if named.empty:
        return None
    keys = [named["query_id"].to_numpy(), cls.to_numpy()]
    first = named.groupby(keys, observed=True)["fact"].transform("min").to_numpy(np.int64)
    facts = named["fact"].to_numpy(np.int64)
    if not (first != facts).any():
        return None
    canon = np.arange(n_facts, dtype=np.int64)
    canon[facts] = first
    return canon


def _collapse_outputs(outputs: pd.DataFrame, canon: np.ndarray) -> pd.DataFrame:
    """One row per (system, canonical fact): the first row of each, ``copies`` summed."""
    out = outputs.assign(fact=canon[outputs["fact"].to_numpy(np.int64)])
    keep = ~out.duplicated(["system", "fact"])
    if keep.all():
        return out.reset_index(drop=True)
    collapsed = out[keep].copy()
    if "copies" in out.columns:
        copies = out.groupby(["system", "fact"], sort=False, observed=True)["copies"].sum()
        index = pd.MultiIndex.from_frame(collapsed[["system", "fact"]])
        collapsed["copies"] = copies.reindex(index).to_numpy()
    return collapsed.reset_index(drop=True)


def _remap(frame: pd.DataFrame | None, canon: np.ndarray):
    """``frame`` with its ``fact`` column mapped to canonical facts."""
    if frame is None or not len(frame) or "fact" not in frame.columns:
        return frame
    return frame.assign(fact=canon[frame["fact"].to_numpy(np.int64)])


def class_view(task, canon: np.ndarray):
    """``task`` with every fact of a class replaced by its canonical fact (module docstring).

    Outputs are collapsed per (system, canonical fact); judgments, samples, exhaustive rows and
    truth are remapped (an exhaustive unit finding two aliases finds the class once; truth
    keeps the class's largest value); ``facts.in_pool``/``systems`` are recounted, so an alias
    is no longer a pooled fact of its own.
    """
    outputs = _collapse_outputs(task.outputs, canon)
    facts = task.facts.copy()
    per_fact = np.bincount(outputs["fact"].to_numpy(np.int64), minlength=len(facts))
    facts["in_pool"] = per_fact > 0
    if "systems" in facts.columns:
        facts["systems"] = per_fact
    truth = task.truth
    if truth is not None and len(truth):
        truth = _remap(truth, canon).sort_values("value", ascending=False)
        truth = truth.drop_duplicates("fact").sort_index()
    exhaustive = task.exhaustive
    if len(exhaustive):
        exhaustive = _remap(exhaustive, canon)
        if "documents" in exhaustive.columns:
            d = pd.to_numeric(exhaustive["documents"], errors="coerce")
            exhaustive = exhaustive.assign(
                documents=d.groupby(exhaustive["fact"].to_numpy(), observed=True)
                .transform("max")
                .to_numpy()
            )
        exhaustive = exhaustive.drop_duplicates(["unit", "fact"])
    return dataclasses.replace(
        task,
        outputs=outputs,
        facts=facts,
        judgments=_remap(task.judgments, canon),
        samples=_remap(task.samples, canon),
        exhaustive=exhaustive,
        truth=truth,
    )


def class_probabilities(task, view, canon: np.ndarray, design: str) -> np.ndarray:
    """s_j of every row of ``view.outputs``: the recorded design's probability of each member
    fact in the system's *full* output (``task.outputs``), summed over the class."""
    s = sampling_probabilities(task.outputs, task.queries, design).to_numpy(float)
    full = pd.DataFrame(
        {
            "system": task.outputs["system"].to_numpy(),
            "fact": canon[task.outputs["fact"].to_numpy(np.int64)],
            "s": s,
        }
    )
    summed = full.groupby(["system", "fact"], sort=False, observed=True)["s"].sum()
    index = pd.MultiIndex.from_frame(view.outputs[["system", "fact"]])
    return summed.reindex(index).to_numpy(float)


def unresolved_outputs(task, canon: np.ndarray | None) -> int:
    """Outputs nobody judged in the queries where some class holds two facts: each could be an
    alias no judgment names (then it still counts as a fact of its own)."""
    if canon is None:
        return 0
    moved = np.flatnonzero(canon != np.arange(canon.size))
    queries = pd.unique(task.facts["query_id"].to_numpy()[moved])
    out = task.outputs
    in_query = out["query_id"].isin(queries).to_numpy()
    judged = out["fact"].isin(task.labels.index).to_numpy()
    return int(out.loc[in_query & ~judged, "fact"].nunique())
