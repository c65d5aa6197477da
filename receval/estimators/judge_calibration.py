"""Automatic judges calibrated and combined on the human labels (cross-fitted).

A judge gives every fact a grade on its own scale (``judge.tsv``, :mod:`receval.judge`): UMBRELA
grades 0–4, an LLM a probability, a heuristic a count.  What the prediction-powered estimators
need is the best fixed predictor g(x) of the human label f(x) that the judges allow; any fixed g
keeps them unbiased (:mod:`receval.estimators.ppi`), a better g narrows them.  This module fits
g on a set of labelled facts (the *other* fold's, in the estimator):

1. **Levels.**  A judge's grades are its levels when it has at most :data:`receval.judge.MAX_LEVELS` distinct
   values; otherwise its grades are cut into :data:`receval.judge.BINS` equal-count bins over the facts it
   graded (a function of the judge table only).  A fact the judge did not grade sits in a level
   of its own ("missing"), calibrated like any other.
2. **Per judge, globally:** the share of correct labelled facts in every level, shrunk towards
   the overall share with :data:`LEVEL_PRIOR` pseudo-labels, made monotone in the grade by the
   pool-adjacent-violators algorithm (weighted isotonic regression, Barlow et al. 1972), in the
   direction (increasing or decreasing) that fits the labels better — an inverted judge becomes
   a useful one.  Levels without a label take the nearest labelled level's value.
3. **Per query:** a logit offset δ_q per query, fitted by penalised maximum likelihood (penalty
   :data:`QUERY_PRIOR` · δ²/2, so a query with few labels stays at the global map) — a judge's
   grade means different things for an easy and a hard topic (TREC RAG 2025: prevalence per
   topic 0.1–0.9 at equal UMBRELA grade).
4. **Combination of several judges:** g = Σ_k w_k g_k with w on the simplex, fitted by least
   squares to *out-of-fold* calibrated scores (an inner :data:`INNER_FOLDS`-fold split of the
   labelled facts, so a judge's calibration never sees the label it is scored against) with a
   ridge penalty :data:`COMBINE_PRIOR` towards the equal weights 1/J; then, if the best single
   judge's out-of-fold error is smaller than the combination's, that judge alone (a useless or
   adversarial judge cannot pull the combination below the best judge by more than noise).

Cross-fitting and unbiasedness: the estimator splits every sampler's draws into two folds in
arrival order; fold a's control is built from g fitted on fold 1 − a's labels only, and the
control's per-sampler expectation is recomputed exactly for that g over every output.  Given
fold 1 − a, g is a fixed function of the fact, the draws of fold a are independent of fold
1 − a (i.i.d. draws, folds by arrival parity), so the control has mean exactly zero given fold
1 − a and the corrected sum stays exactly unbiased, whatever the labels did to g.  The labels
themselves are fixed (design-based inference): a fact drawn in both folds is no problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from receval.judge import judge_grades, judge_levels

#: pseudo-labels (at the overall share correct) added to every level before the isotonic fit
LEVEL_PRIOR = 1.0
#: ridge penalty of a query's logit offset (in log-likelihood units): ≈ labels of prior weight
QUERY_PRIOR = 4.0
#: inner folds over the labelled facts for the out-of-fold scores the combination is fitted to
INNER_FOLDS = 5
#: ridge penalty of the combination weights towards 1/J (in squared-error units)
COMBINE_PRIOR = 2.0


@dataclass(frozen=True)
class JudgeCalibration:
    """Calibrated scores of every fact: ``per_judge`` (F, J) probabilities, ``combined`` (F,)
    the weighted combination, ``weights`` (J,) the combination weights, ``direction`` (J,)
    +1 / −1 whether a judge's higher grades meant correct or wrong."""

    names: tuple[str, ...]
    per_judge: np.ndarray
    combined: np.ndarray
    weights: np.ndarray
    direction: np.ndarray


def _pav(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted isotonic (non-decreasing) regression by pool-adjacent-violators."""
    blocks: list[list[float]] = []  # [value, weight, size]
    for v, w in zip(values, weights, strict=True):
        blocks.append([float(v), float(w), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks[-1]
            total = w1 + w2
            blocks[-1] = [(v1 * w1 + v2 * w2) / total if total > 0 else v1, total, n1 + n2]
    return np.concatenate([np.full(int(n), v) for v, _, n in blocks]) if blocks else values


def level_map(levels: np.ndarray, n_levels: int, label: np.ndarray) -> tuple[np.ndarray, int]:
    """(calibrated value of every level incl. missing (n_levels + 1,), direction ±1) from the
    labelled facts' ``levels`` (n,) and ``label`` (n,) (step 2 of the module docstring)."""
    base = float(label.mean()) if label.size else 0.5
    n = np.bincount(levels, minlength=n_levels + 1).astype(float)
    y = np.bincount(levels, weights=label, minlength=n_levels + 1)
    raw = (y + LEVEL_PRIOR * base) / (n + LEVEL_PRIOR)
    graded = slice(0, n_levels)
    seen = n[graded] > 0
    best, direction = raw[graded].copy(), 1
    if seen.sum() >= 2:
        v, w = raw[graded][seen], n[graded][seen] + LEVEL_PRIOR
        up, down = _pav(v, w), -_pav(-v, w)
        sse_up = float(np.sum(w * (v - up) ** 2))
        sse_down = float(np.sum(w * (v - down) ** 2))
        fitted, direction = (up, 1) if sse_up <= sse_down else (down, -1)
        where = np.flatnonzero(seen)
        best[where] = fitted
        # unlabelled levels: the nearest labelled level's value
        nearest = where[np.abs(np.arange(n_levels)[:, None] - where[None, :]).argmin(axis=1)]
        best = best[nearest]
    elif seen.sum() == 1:
        best[:] = raw[graded][seen][0]
    else:
        best[:] = base
    return np.append(best, raw[n_levels]), direction


def query_offsets(
    logit: np.ndarray,
    label: np.ndarray,
    query: np.ndarray,
    n_queries: int,
    prior: float = QUERY_PRIOR,
) -> np.ndarray:
    """Per query the logit offset δ_q maximising Σ log-likelihood(label | σ(logit + δ_q)) −
    ``prior`` δ_q²/2 (Newton steps, all queries at once; 0 for a query without labels)."""
    delta = np.zeros(n_queries)
    for _ in range(20):
        p = 0.5 * (1.0 + np.tanh(0.5 * (logit + delta[query])))
        grad = np.bincount(query, weights=label - p, minlength=n_queries) - prior * delta
        hess = np.bincount(query, weights=p * (1 - p), minlength=n_queries) + prior
        step = grad / hess
        delta += step
        if np.abs(step).max(initial=0.0) < 1e-8:
            break
    return delta


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def _calibrate_judges(levels, counts, query, n_queries, train, label):
    """(F, J) calibrated probabilities of every fact from the labelled facts ``train``."""
    F, J = levels.shape
    out = np.empty((F, J))
    direction = np.ones(J, np.int64)
    for j in range(J):
        values, direction[j] = level_map(levels[train, j], int(counts[j]), label)
        z = _logit(values[levels[:, j]])
        delta = query_offsets(z[train], label, query[train], n_queries)
        out[:, j] = 0.5 * (1.0 + np.tanh(0.5 * (z + delta[query])))
    return out, direction


def simplex_weights(P: np.ndarray, y: np.ndarray, prior: float = COMBINE_PRIOR) -> np.ndarray:
    """w ≥ 0, Σ w = 1 minimising ‖y − P w‖² + prior ‖w − 1/J‖² (equality-constrained ridge,
    then negative weights dropped and the rest refitted)."""
    J = P.shape[1]
    active = np.ones(J, bool)
    w = np.full(J, 1.0 / J)
    for _ in range(J):
        k = int(active.sum())
        Pa = P[:, active]
        A = Pa.T @ Pa + prior * np.eye(k)
        b = Pa.T @ y + prior / J
        ones = np.ones(k)
        Ainv_b, Ainv_1 = np.linalg.solve(A, b), np.linalg.solve(A, ones)
        nu = (ones @ Ainv_b - 1.0) / (ones @ Ainv_1)
        wa = Ainv_b - nu * Ainv_1
        w = np.zeros(J)
        w[active] = wa
        if (wa >= 0).all():
            break
        active &= w > 0
    return w


def calibrate(
    grades: np.ndarray,
    query: np.ndarray,
    train: np.ndarray,
    label: np.ndarray,
    names: tuple[str, ...] = (),
) -> JudgeCalibration:
    """Every judge calibrated on the labelled facts ``train`` (ids) with labels ``label``, and
    their combination (module docstring, steps 1–4).

    Parameters
    ----------
    grades : (F, J) every judge's grade of every fact (NaN: not graded).
    query : (F,) query code of every fact.
    train, label : the labelled facts used for the fit and their labels in [0, 1].

    Returns
    -------
    :class:`JudgeCalibration`; with no labelled fact every score is 0.5 (no information).
    """
    grades = np.asarray(grades, float)
    levels, counts = judge_levels(grades)
    return calibrate_levels(levels, counts, query, train, label, names)


def calibrate_levels(
    levels: np.ndarray,
    counts: np.ndarray,
    query: np.ndarray,
    train: np.ndarray,
    label: np.ndarray,
    names: tuple[str, ...] = (),
) -> JudgeCalibration:
    """:func:`calibrate` from every row's judge levels (:func:`receval.judge.judge_levels`:
    ``levels`` (F, J), ``counts`` (J,)) instead of its grades: the rows may be facts or any
    keys the calibration is a function of (query and levels; the engine path's keys,
    :mod:`receval.engine.judge`), ``train`` indexing them (a row once per labelled fact)."""
    F, J = levels.shape
    train = np.asarray(train, np.int64)
    label = np.asarray(label, float)
    names = tuple(names) or tuple(str(j) for j in range(J))
    if train.size == 0:
        flat = np.full((F, J), 0.5)
        return JudgeCalibration(names, flat, flat[:, 0].copy(), np.full(J, 1.0 / J), np.ones(J))
    n_queries = int(query.max(initial=-1)) + 1
    per_judge, direction = _calibrate_judges(levels, counts, query, n_queries, train, label)
    weights = np.ones(1)
    if J > 1:
        weights = combination_weights(levels, counts, query, n_queries, train, label)
    combined = per_judge @ weights
    return JudgeCalibration(names, per_judge, combined, weights, direction.astype(float))


def combination_weights(levels, counts, query, n_queries, train, label) -> np.ndarray:
    """Simplex weights fitted to inner out-of-fold calibrated scores; the best single judge
    instead when its out-of-fold error is smaller (module docstring, step 4)."""
    J = levels.shape[1]
    n = train.size
    folds = np.arange(n) % INNER_FOLDS
    oof = np.empty((n, J))
    for k in range(min(INNER_FOLDS, n)):
        held = folds == k
        fitted, _ = (
            _calibrate_judges(levels, counts, query, n_queries, train[~held], label[~held])
            if (~held).any()
            else (np.full((levels.shape[0], J), label.mean()), None)
        )
        oof[held] = fitted[train[held]]
    w = simplex_weights(oof, label)
    err = ((label[:, None] - oof) ** 2).sum(axis=0)
    combined_err = float(((label - oof @ w) ** 2).sum())
    best = int(err.argmin())
    if err[best] <= combined_err:
        w = np.zeros(J)
        w[best] = 1.0
    return w


def fact_queries(task) -> np.ndarray:
    """(F,) integer query code of every fact of ``task``."""
    import pandas as pd

    return pd.factorize(task.facts["query_id"], sort=True)[0].astype(np.int64)


def task_calibration(task, train: np.ndarray, label: np.ndarray) -> JudgeCalibration | None:
    """:func:`calibrate` over the judge table of ``task`` (None without one): every judge's
    calibrated score of every fact of ``task`` and their combination, fitted on the labelled
    facts ``train`` (fact ids) with labels ``label``."""

    engine = getattr(task, "engine_judge", None)
    if engine is not None:  # the engine path: fitted over the judge's keys
        return engine.calibration(train, label)
    grades = judge_grades(task)
    if grades is None:
        return None
    return calibrate(
        class_grades(task, grades.grades), fact_queries(task), train, label, grades.names
    )


def class_grades(task, grades: np.ndarray) -> np.ndarray:
    """(F, J) grades with every equivalence class's canonical fact graded by the highest of its
    members' grades (per judge, over the members it graded; one of the judge's own grades, so
    its levels stay those of :func:`judge_levels`): the canonical fact may be a spelling no
    system output.  Unchanged without classes."""
    from receval.estimators.classes import canonical_facts

    canon = canonical_facts(task)
    if canon is None:
        return grades
    members = np.flatnonzero(canon != np.arange(canon.size))
    heads = np.unique(canon[members])
    group = np.concatenate([members, heads])
    out = grades.copy()
    for j in range(grades.shape[1]):
        g = grades[group, j]
        ok = ~np.isnan(g)
        best = np.full(canon.size, -np.inf)
        np.maximum.at(best, canon[group][ok], g[ok])
        have = heads[np.isfinite(best[heads])]
        out[have, j] = best[have]
    return out


def crossfit_judge_scores(task, folds: int = 5) -> JudgeCalibration | None:
    """Cross-fitted calibrated scores of every judge at every fact of ``task`` (the judge
    audit's input): a labelled fact's scores come from the calibration fitted on the *other*
    ``folds`` − 1 folds of the labelled facts (never its own label), an unlabelled fact's from
    the fit on every label.  ``weights`` are those of the fit on every label.  None without a
    judge table."""

    grades = judge_grades(task)
    if grades is None:
        return None
    labels = task.labels
    ids = labels.index.to_numpy(np.int64)
    y = labels.to_numpy(float)
    ok = np.isfinite(y)
    ids, y = ids[ok], y[ok]
    query = fact_queries(task)
    matrix = class_grades(task, grades.grades)
    full = calibrate(matrix, query, ids, y, grades.names)
    per_judge, combined = full.per_judge.copy(), full.combined.copy()
    fold = np.arange(ids.size) % max(int(folds), 2)
    for k in range(max(int(folds), 2)):
        held = fold == k
        if not held.any() or held.all():
            continue
        fit = calibrate(matrix, query, ids[~held], y[~held], grades.names)
        per_judge[ids[held]] = fit.per_judge[ids[held]]
        combined[ids[held]] = fit.combined[ids[held]]
    return JudgeCalibration(full.names, per_judge, combined, full.weights, full.direction)


#: the smallest stratum weight of a judge-strata design (relative to the largest)
STRATUM_WEIGHT_FLOOR = 0.05


def judge_strata_design(task) -> str:
    """The ``judge-strata`` design ``sample --by-judge`` draws from (:mod:`receval.design`):
    the strata are the levels of the judge whose cross-fitted calibration predicts the labels
    best (the only judge, before any label), with Neyman weights u_h = √(p_h(1 − p_h)), p_h the
    share correct of level h (isotonic over the labels so far, shrunk towards the overall
    share; before any label, the level's mean grade on the judge's scale), floored at
    :data:`STRATUM_WEIGHT_FLOOR` × the largest.  Written as ``judge-strata:<judge>:<u_0>,…``."""
    from receval.design import JUDGE_STRATA

    grades = judge_grades(task)
    if grades is None:
        raise ValueError("--by-judge needs the judge's scores (judge.tsv)")
    levels, counts = judge_levels(grades.grades)
    labels = task.labels
    ids = labels.index.to_numpy(np.int64)
    y = labels.to_numpy(float)
    ids, y = ids[np.isfinite(y)], y[np.isfinite(y)]
    j = 0
    if len(grades.names) > 1 and ids.size >= 2 * INNER_FOLDS:
        fit = crossfit_judge_scores(task)
        err = ((fit.per_judge[ids] - y[:, None]) ** 2).mean(axis=0)
        j = int(err.argmin())
    L = int(counts[j])
    if ids.size:
        p, _ = level_map(levels[ids, j], L, y)
    else:  # the judge's own opinion: its mean normalised grade per level
        norm = grades.normalised[:, j]
        n = np.bincount(levels[:, j], minlength=L + 1).astype(float)
        total = np.bincount(levels[:, j], weights=np.nan_to_num(norm, nan=0.5), minlength=L + 1)
        p = np.where(n > 0, total / np.maximum(n, 1), 0.5)
    u = np.sqrt(np.clip(p * (1 - p), 0.0, 0.25))
    u = np.maximum(u, STRATUM_WEIGHT_FLOOR * max(u.max(), 1e-12))
    return f"{JUDGE_STRATA}:{grades.names[j]}:" + ",".join(f"{w:.4g}" for w in u / u.max())
