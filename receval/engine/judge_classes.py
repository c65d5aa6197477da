"""The judge's sums with equivalence classes on the engine path (issue 38 × issue 35):
``score --estimator ppi`` where the judgments put aliases into classes.

The in-memory path (:func:`receval.estimators.ppi.judge_totals`) sees the task through the
class view (:func:`receval.estimators.classes.class_view`): a system's outputs are its
distinct canonical facts, a class c is drawn from system k's uniform sampler with its members'
summed probability m_k(c)/|X_k| (m_k(c) the class's strings k output, |X_k| counting every
string), the judge's score of a class is the mean of its graded strings
(:func:`receval.estimators.ppi.class_scores`), and the precision control counts each system's
own strings of the class: G_i(c) = Σ of their scores, m_i(c) their number
(:func:`receval.estimators.ppi._class_strings`).  The pool sums of
:mod:`receval.engine.judge_stream` then read, over the view's facts,

    GS[i, k] = Σ_c A_i(c) s(c) m_k(c)/q₀(c),        G1[i, k] = Σ_c A_i(c) m_k(c)/q₀(c),
    PS[i, k] = Σ_c A_i(c) t_i(c) G_i(c) m_k(c)/q₀(c), PM[i, k] = Σ_c A_i(c) t_i(c) m_i(c) m_k(c)/q₀(c),

q₀(c) = Σ_k c_k m_k(c), t_i counting a class once; outside classes m = A and G = s, the sums
the runs' pass computes.  Every class member is a judged fact of the small tables, so the
engine leaves the facts of classes of two or more out of that pass (``judge_classed``) and
this module adds their terms from the small facts' memberships
(:attr:`receval.engine.summary.RunSummary.members`): Python holds per-class arrays only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from receval.engine.judge_stream import PoolSums
    from receval.engine.sampled_data import SmallTables
    from receval.engine.summary import RunSummary


@dataclass(frozen=True)
class JudgeClasses:
    """The classes of two or more facts, over the small tables' facts: ``canon`` the canonical
    fact of every small fact; ``group`` the small facts in such classes and ``of`` the class of
    each (0 … n − 1, ``heads`` their canonical facts, ``query`` their query codes); ``count``
    (n, m) the class's strings each system output; ``rows`` (fact, system code) of those
    memberships; ``view`` the runs' aggregates with each class counted once (|X_i|, cells:
    :func:`receval.engine.sampled_data.class_tables`)."""

    canon: np.ndarray
    group: np.ndarray
    of: np.ndarray
    heads: np.ndarray
    query: np.ndarray
    count: np.ndarray
    rows: tuple[np.ndarray, np.ndarray]
    view: RunSummary


def judge_classes(
    small: SmallTables, summary: RunSummary, queries: pd.Index
) -> JudgeClasses | None:
    """:class:`JudgeClasses` of the judgments (None when no class holds two facts)."""
    from receval.engine.sampled_data import Classes, class_canon, class_tables, collapse_members

    canon = class_canon(small)
    if canon is None:
        return None
    moved = np.flatnonzero(canon != np.arange(canon.size))
    group = np.union1d(moved, canon[moved])
    heads, of = np.unique(canon[group], return_inverse=True)
    members = summary.members
    fact = members["fact"].to_numpy(np.int64)
    code = pd.Index(summary.systems).get_indexer(members["system"]).astype(np.int64)
    keep = np.isin(fact, group) & (code >= 0)
    fact, code = fact[keep], code[keep]
    m = len(summary.systems)
    cls = of[np.searchsorted(group, fact)]
    count = np.zeros((heads.size, m))
    np.add.at(count, (cls, code), 1.0)
    found = Classes(canon, collapse_members(members, canon), pd.Series(dtype=np.int64))
    view = class_tables(small, summary, found)[1]
    return JudgeClasses(
        canon=canon,
        group=group,
        of=of,
        heads=heads,
        query=queries.get_indexer(small.facts["query_id"].to_numpy()[heads]).astype(np.int64),
        count=count,
        rows=(fact, code),
        view=view,
    )


def class_values(
    classes: JudgeClasses, strings: np.ndarray, scored: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(C, F) values and (F,) graded flags of the small facts with each class's canonical
    fact taking the mean of its graded members (:func:`receval.estimators.ppi.class_scores`);
    ``strings`` (C, F) each map's value of every small fact."""
    w = scored[classes.group].astype(float)
    n = np.bincount(classes.of, weights=w, minlength=classes.heads.size)
    values = strings.copy()
    ok = n > 0
    for c in range(strings.shape[0]):
        total = np.bincount(
            classes.of, weights=w * strings[c, classes.group], minlength=classes.heads.size
        )
        values[c, classes.heads[ok]] = total[ok] / n[ok]
    graded = scored.copy()
    graded[classes.heads[ok]] = True
    return values, graded


def class_sums(
    classes: JudgeClasses,
    c: np.ndarray,
    targets: np.ndarray,
    strings: np.ndarray,
    values: np.ndarray,
    graded: np.ndarray,
    by_query: bool = False,
) -> PoolSums:
    """The classes' terms of the pool sums (module docstring) for the maps ``strings`` (C, F)
    (per small fact) with class values ``values`` and flags ``graded``
    (:func:`class_values`); ``c`` (m,) the mixture's c_k, ``targets`` (m, Q) t_i per query
    with classes counted once; with ``by_query`` also each query's terms."""

    def terms(rows):
        return _class_terms(classes, c, targets, strings, values, graded, rows)

    return sums_by_query(classes, terms, (targets.shape[1], c.size, strings.shape[0], c.size),
                         by_query)  # fmt: skip


def sums_by_query(classes: JudgeClasses, terms, shape: tuple, by_query: bool, mass_of=None):
    """The pool sums of every class (``terms(rows)``: the dict of one set of classes' g1, pm,
    gs, ps, jp, scored) and, with ``by_query``, each query's (``shape`` (Q, m, C, width) of the
    per-query arrays; ``mass_of(rows)``, when given, each query's design mass (width,))."""
    from receval.engine.judge_stream import PoolSums

    everything = terms(slice(None))
    if not by_query:
        return PoolSums(**everything)
    Q, m, C, width = shape
    per = {"g1": np.zeros((Q, m, width)), "pm": np.zeros((Q, m, width))}
    per |= {"gs": np.zeros((C, Q, m, width)), "ps": np.zeros((C, Q, m, width))}
    mass_q = np.zeros((Q, width)) if mass_of is not None else None
    for q in np.unique(classes.query[classes.query >= 0]):
        rows = classes.query == q
        part = terms(rows)
        per["g1"][q], per["pm"][q] = part["g1"], part["pm"]
        per["gs"][:, q], per["ps"][:, q] = part["gs"], part["ps"]
        if mass_q is not None:
            mass_q[q] = mass_of(rows)
    extra = {"mass_q": mass_q} if mass_q is not None else {}
    queries = PoolSums(**per, jp=everything["jp"], scored=everything["scored"], **extra)
    return PoolSums(**everything, by_query=queries)


def _class_terms(classes, c, targets, strings, values, graded, rows) -> dict[str, np.ndarray]:
    """The terms of :func:`class_sums` of the classes ``rows`` (a mask or slice)."""
    M = classes.count[rows]  # (n, m)
    A = (M > 0).astype(float)
    q0 = M @ c
    with np.errstate(divide="ignore"):
        inv = np.where(q0 > 0, 1.0 / q0, 0.0)
    t = targets[:, classes.query[rows]].T * A  # (n, m)
    fact, code = classes.rows
    cls = classes.of[np.searchsorted(classes.group, fact)]
    keep = np.zeros(classes.heads.size, bool)
    keep[rows] = True
    at = np.cumsum(keep) - 1  # class number among ``rows``
    fact, code, cls = fact[keep[cls]], code[keep[cls]], at[cls[keep[cls]]]
    heads = classes.heads[rows]
    gs, ps, jp = [], [], []
    for j in range(strings.shape[0]):
        G = np.zeros_like(M)
        np.add.at(G, (cls, code), strings[j, fact])
        s = values[j, heads]
        gs.append(A.T @ (M * (s * inv)[:, None]))
        ps.append((t * G).T @ (M * inv[:, None]))
        jp.append((t * s[:, None]).sum(axis=0))
    return {
        "g1": A.T @ (M * inv[:, None]),
        "pm": (t * M).T @ (M * inv[:, None]),
        "gs": np.stack(gs),
        "ps": np.stack(ps),
        "jp": np.stack(jp),
        "scored": (A * graded[heads][:, None]).sum(axis=0),
    }


def drawn_class_strings(
    classes: JudgeClasses, drawn: np.ndarray, strings: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(G_i at the drawn facts (D, m), m_i there (D, m)) for one map's ``strings`` (F,): a
    system's own strings of a drawn class, their summed value and number; elsewhere the drawn
    fact's own value and 1 (:func:`receval.estimators.ppi._class_strings`)."""
    m = classes.count.shape[1]
    G = np.broadcast_to(strings[drawn][:, None], (drawn.size, m)).copy()
    count = np.ones((drawn.size, m))
    fact, code = classes.rows
    cls = classes.of[np.searchsorted(classes.group, fact)]
    total = np.zeros_like(classes.count)
    np.add.at(total, (cls, code), strings[fact])
    at = np.searchsorted(classes.heads, drawn)
    inside = (at < classes.heads.size) & (
        classes.heads[np.minimum(at, classes.heads.size - 1)] == drawn
    )
    rows = np.flatnonzero(inside)
    own = classes.count[at[rows]] > 0  # (r, m)
    G[rows] = np.where(own, total[at[rows]], G[rows])
    count[rows] = np.where(own, classes.count[at[rows]], 1.0)
    return G, count
