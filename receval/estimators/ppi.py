"""Prediction-powered precision and recall: human draws correct an automatic judge.

Every output x carries a judge score s(x) ∈ [0, 1] (``judge.tsv``, :mod:`receval.judge`), and
the sampling design is recorded, so the expectation of any function of one draw is *known*:
for sampler j, E_j[h] = Σ_x s_j(x) h(x) over every output.  The joint estimator's per-draw
terms (Chaganty et al. 2017, §3) are, for each quantity (system i's precision, its pooled-recall
numerator, the pool's correct facts),

    Y_k = c_k f(x_k)   (human label),   S_k = c_k s(x_k)   (judge),   M_k = c_k   (mass),

with c_k the importance weight (t_i/q_i · w_ij/n_j, or 1/(N q0)).  The judge's control
A_k = S_k − E_j(k)[S] has mean exactly zero within every sampler, so for any fixed λ

    Ŷ = Σ_k Y_k − λ Σ_k A_k

is unbiased, and with λ the regression coefficient of Y on A its variance is that of the
human-only sum times (1 − ρ²) (prediction-powered inference, Angelopoulos, Bates, Fannjiang,
Jordan & Zrnic, Science 2023, eq. 1; PPI++ power tuning, Angelopoulos, Duchi & Zrnic 2024, §2,
here with the exact per-sampler means as the "unlabelled" side: every output is scored).
λ is chosen from the data, but **cross-fitted**: each sampler's draws are split in arrival
order into two folds, each fold's correction Σ_{k∈a} A_k uses the λ estimated from the other
fold, and draws of different folds are independent, so

    Ŷ = Σ_k Y_k − λ_1 Σ_{k∈0} A_k − λ_0 Σ_{k∈1} A_k

is **exactly unbiased** whatever the judge (useless, inverted, partly missing, biased for some
systems): tests/estimators/test_ppi_exact.py enumerates every sample of a small task.
Precision is Ŷ itself; pooled recall is the ratio of two such estimates (consistent, as the
joint estimator's ν̂ is); true recall θ̂·ν̂_i.  In each fold λ is the least-squares slope of
Y on A (uncentred sums: A has mean zero within samplers, so they estimate the within-sampler
covariances the variance is made of), clipped to [0, 1] and multiplied by the positive-part
factor max(0, 1 − 1/F), F = ν R²/(1 − R²) (ν effective draws, R² the share of Y's spread the
judge explains): a judge that explains little in a small fold is not used, and the estimator
falls back to the joint estimator's unbiased sum.

The coefficients are computed inside the statistic from fold moment totals, so every
bootstrap replicate re-estimates them; a replicate's correction is λ̂ C + λ* (C* − C) (the
full-sample coefficient on the observed control plus the replicate's coefficient on the
control's resampling deviation), which adds the coefficient's estimation noise to the interval
once.  (Using λ* C* counted it twice: intervals ~3 % wider than the estimator's true spread at
n = 10; holding λ̂ fixed dropped it: coverage 0.89 against the joint estimator's 0.91 with a
strong judge at n = 10.)

**Calibration** (``CALIBRATE = "linear"``).  The control is not the raw judge but the judge
calibrated on the labels: each fold b fits label ≈ α_b + β_b s by least squares over all its
draws (every system's: the labels are shared), and fold a's control is
c (α_{1−a} + β_{1−a} s) centred, i.e. A'_a = β_{1−a} A + α_{1−a} B, a fixed (given fold 1 − a)
combination of the judge and mass controls; λ_a then comes from fold 1 − a's moments of the
same control.  Everything fold a's correction uses is a function of fold 1 − a, and A'_a has
mean zero within every sampler for fixed (α, β), so the estimator stays **exactly unbiased**
(test_ppi_exact.py enumerates it).  Why: a single
λ on c·s cannot cancel a judge's offset (E[f | s] = α + β s with α ≠ 0), the gap issue 21
measured (0.77× against ≈ 0.6× in theory); estimating α per system (the mass as a second
control with its own coefficient, below) costs two noisy coefficients per system and fold,
while one (α, β) pooled over every system's labels is nearly free.  An inverted judge (β < 0)
becomes a useful one.  bench/ppi.py, simulated world, median width ratio ppi/joint before →
after: strong judge precision n = 10/30 0.79/0.70 → 0.75/0.63, pooled recall 0.81/0.70 →
0.74/0.63, true recall 0.86/0.87 → 0.82/0.84; weak judge n = 10 1.000 [max 1.025] → 0.993
[1.016]; inverted judge n = 30 1.00 → 0.65; useless judge 0.995–0.999.
A logistic map σ(a + b logit s) (:func:`logistic_calibration`, penalised towards the judge's
own scores, the judge's totals recomputed for each fold's map) narrows further, but used for
every quantity (``CALIBRATE = "logistic"``) it failed in the TREC-like world (prevalence
≈ 0.04): precision coverage 0.84 against joint's 0.89 at n = 30, and pooled recall 1.35× joint's
width at n = 10 (a map fitted to a handful of positives).  So the default uses it for pooled
recall only, and only when the other fold holds ``RECALL_LOGISTIC_MIN`` = 20 correct draws (a
function of that fold: still exactly unbiased given it): a rare-positive ratio needs the judge's
low scores mapped to ≈ 0, which a line cannot do.  TREC-like world, strong judge, n = 30:
pooled recall 0.87 → 0.57, true recall 0.87 → 0.59 (coverage 0.93 / 0.96, joint 0.92 / 0.93);
n = 10 falls back to the line (0.99).

**Several judges, graded scales** (``judge.tsv`` with a ``judge`` column, ``task.toml [judge]
scale``): fold a's control is c·g_{1−a}(x) centred, g_{1−a} the judges calibrated per grade
level (isotonic), per query (a shrunk logit offset) and combined (simplex weights on inner
out-of-fold scores, or the best single judge), all fitted on fold 1 − a's labelled draws only
(:mod:`receval.estimators.judge_calibration`); the control's per-sampler expectation is
recomputed exactly for g_{1−a} over every output.  Given fold 1 − a, g_{1−a} is a fixed
function of the fact and fold a's draws are independent of fold 1 − a, so E[A_k | fold 1 − a]
= 0 for every draw k of fold a and the estimator stays exactly unbiased
(tests/estimators/test_judge_calibration.py enumerates it).  bench/judges.py, TREC RAG 2025
pairs, UMBRELA (ρ = 0.44 with NIST), 30 labels per system: width ratio ppi/joint precision
0.76 → 0.74, pooled recall 0.90 → 0.69 (the grade-by-grade map sends grade 0 to ≈ 0, which a
line through the raw grade cannot).

**Equivalence classes** (TAC aliases): the judge scores output strings, and an output nobody
classed may be an alias, so the class view's own totals would count such an alias twice (a
bias of λ·(aliases)/|X_i|: +0.048 for the worst system in bench/judges.py's class world).  The
precision control instead uses, at a drawn class c, G_i(c) = Σ s over the strings of c that
system i output (every drawn class is resolved by its annotation), whose known total
t_i Σ_{x ∈ X_i} s(x) is string-level and exact whatever the true classes are; the
self-normalised form's denominator is corrected by the string mass (Σ M − (Σ M_s − t_i
|strings of X_i|), M_s = t_i m_i(c)/q_i(c)), so precision keeps the judge's known totals
(:func:`_class_strings`).  Class world, 8 systems, 30 labels, judge ρ ≈ 0.83: width ratio
ppi/joint 0.84 → 0.69 (worst bias 0.048 → 0.030, joint's 0.024).

Where the rest went (same world, 60 runs, B = 200; the population bound √(1 − ρ_V²) of the
string-level control is 0.51–0.60 per system, so the loss was estimation, not the control):
the self-normalised coefficient was fitted to V = Y − π M, the *class* mass, whose weights vary
(cv ≈ 0.6: uniform over queries, then answers), while the estimator divides by the
string-corrected mass M − B (nearly constant): the fold moments of the products now use that
mass (median width ratio 0.680 → 0.649, but coverage 0.932 → 0.915: λ rose from ≈ 0.5 to
≈ 0.8 per system, estimated from ≈ 15 draws per fold); and the coefficient is now **pooled over
the systems** (:func:`pooled_slope`, ``POOL_SELF``): the control is the judge calibrated on every
system's labels, so its slope is ≈ the same for every system, and one slope per fold from all
of them has almost no noise: 0.637 (SE 0.007), coverage 0.950 (joint 0.950); per-system slopes
shrunk towards the pooled one with 30 pseudo-draws: 0.631 but coverage 0.935; λ = 1 fixed
(PPI without tuning): 0.669, coverage 0.910.

A coefficient the full sample sets to 0 (the other fold's judge explained too little) stays 0
in every replicate (``GATE_REPLICATES``): the point estimate does not use it, and
re-estimating it per replicate only added noise, widening a weak judge's intervals at n = 10
(median ratio 1.007 in the last round's study) while the point estimate was the joint one.
Pooled recall's shrinkage counts the effective number of *correct* draws (the Kish size of the
pool's terms Y_D), where the ratio's information is (``RATIO_DRAWS``): counting every draw
under-shrank at low prevalence (TREC-like world, strong judge, n = 10: width ratio 1.07 before
calibration, 1.11 [max 1.35] with it; 1.00 [1.02] counting the correct draws).

The bootstrap resamples each sampler's draws as for the joint
estimator (a draw keeps its fold; the controls have mean zero whatever the folds' sizes).
``--precision-form`` applies as for the joint estimator (the choice is made on the same human
terms): the self-normalised form is (Σ Y − λ Σ A) / Σ M with λ for the linearised ratio.

**True recall** r̂_i = θ̂ ν̂_i: the judge narrows ν̂_i, not θ̂ (pool coverage from the
exhaustive units, Σ_u a_u / Σ_u b_u), whose share of the variance grows with n (simulated
world, strong judge: true-recall width ratio 0.82/0.84/0.93 at n = 10/30/100).  Could the judge's
scores over the pool facts of every unit serve as a control for θ̂ (J_u = Σ_{x ∈ pool ∩ u} s(x),
known for every unit when units are queries)?  θ̂'s linearised terms are
V_u = a_u − θ b_u = b_u (θ_u − θ), the unit's coverage deviation times its size, while J_u
tracks a_u; in the TREC-like world of bench/ppi.py (units = queries, all 50 queries known)
J_u and the pool size together explain R² = 0.09 (strong judge) / 0.10 (consensus judge) of
V_u's variance in-sample, i.e. ≤ 5 % of θ̂'s standard error with the 12 units drawn, so it is
not built; and θ̂, ν̂ come from independent samples, so the product's bootstrap (or delta)
interval has nothing left to combine.  More exhaustive units are the lever
(``receval budget`` reports the floor).

With ``--cluster-queries`` the queries are resampled as clusters too (the superpopulation of
queries).  A control centred by the sampler-wide mean E_j[S] would then absorb the
between-query variation of the labels, which belongs to the estimand, and understate it; so the
controls are centred within every (sampler, query) instead, A_k = S_k − E_j[S | q(k)], with
E_j[S | q] = Σ_{x∈q} s_j(x) S(x) / Σ_{x∈q} s_j(x).  E[A_k] = E[E[S_k | q(k)] − E_j[S | q(k)]]
= 0, so the estimator stays exactly unbiased for any λ given by the other fold
(tests/estimators/test_ppi_exact.py enumerates it); the judge then narrows only the
within-query part of the variance, and precision's t_i = 1/|X_i| follows the resampled query
sizes as for the joint estimator.

The known output mass (B_k = M_k − E_j[M], mean zero too) can serve as a second control
variate (a regression estimator, Särndal, Swensson & Wretman 1992, §6.4): ``USE_MASS``.  It is
off: in bench/ppi.py it widened the intervals at n = 10 per system (sd ratio 1.02–1.07 with a
weak judge in simulated worlds, and with the ParaBank NLL judge).  This round it was retried as
a per-fold model choice (judge alone, or judge and mass where the final prediction error
RSS (ν + p)/(ν − p) of the other fold is smaller, and only from ``MASS_MIN_DRAWS`` effective
draws): strong judge at n = 30 precision 0.699 → 0.672, but a weak judge at n = 10 went from
1.000 to 1.009–1.020 and at n = 30 from 0.976 to 0.981–0.993, so it stays off.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from receval.errors import BundleError
from receval.estimators.base import (
    ContextCache,
    Estimator,
    ScoringContext,
    Statistic,
    TermLayout,
    clustered_terms,
    metric_dict,
    unit_layout,
    unit_terms,
)
from receval.estimators.bootstrap import QUERY_STAGE
from receval.estimators.joint import JointEstimator, unsupported_precision_notes
from receval.estimators.precision import joint_precision_terms
from receval.estimators.recall import pooled_recall_terms
from receval.estimators.sample_data import SampleData
from receval.run_record import JudgeBlock

#: the per-fold moment blocks of one quantity: raw M, Y and the centred controls A = S̃, B = M̃
MOMENTS = ("MM", "MY", "YY", "M", "AA", "AB", "BB", "AY", "BY")
#: the per-fold correction blocks: Σ S̃, Σ M̃, Σ Y over the fold's draws
CORRECTIONS = ("CA", "CB", "CY")
#: per-fold cross moments of each system's pooled-recall numerator (n) with the pool (d), m wide
CROSS = ("AnYd", "AdYn", "AnAd", "YnYd", "AM")


@dataclass(frozen=True)
class JudgeTotals:
    """The judge at the drawn facts and the *known* per-sampler expectations of the controls.

    Quantities are laid out as columns ``[precision (m) | pooled numerator (m) | pool (1)]``.
    For sampler j and quantity c, ``expected_score[j, c]`` = E_j[S_c] and ``expected_mass[j, c]``
    = E_j[M_c]: the expectation of one draw's judge and mass terms under s_j, computed exactly
    over every output (the judge scores every output, the design is recorded).  Subtracting
    them from each draw's terms gives controls of mean exactly zero within every sampler.
    """

    score_drawn: np.ndarray  # (D,)
    scored_drawn: np.ndarray  # (D,) bool: the judge scored the drawn fact (not imputed)
    expected_score: np.ndarray  # (J, 2m + 1)
    expected_mass: np.ndarray  # (J, 2m + 1)
    scored_share: np.ndarray  # (m,) share of each system's outputs the judge scored
    judge_precision: np.ndarray  # (m,) A_i = Σ t_i s: the judge's own precision of system i
    #: with queries resampled as clusters: E_j[S_c | q] and E_j[M_c | q], each (J, Q, 2m + 1)
    expected_score_q: np.ndarray | None = None
    expected_mass_q: np.ndarray | None = None
    #: with equivalence classes, per drawn class and system i: G_i = Σ s over the class's
    #: strings system i output, and their number m_i (D, m); None without classes
    class_sum_drawn: np.ndarray | None = None
    class_count_drawn: np.ndarray | None = None


def _sampler_matrix(view, probabilities, data: SampleData, fact: np.ndarray, sys_codes):
    """s_j(x) as a sparse (facts × J) matrix from the view's output rows."""
    from scipy import sparse

    n_facts = len(view.facts)
    rows, cols, vals = [], [], []
    by_design: dict[str, np.ndarray] = {}
    for j in range(data.J):
        design = data.sampler_design[j]
        if design not in by_design:
            by_design[design] = np.asarray(probabilities(design), float)
        mine = np.flatnonzero(sys_codes == data.sampler_system[j])
        rows.append(fact[mine])
        cols.append(np.full(mine.size, j))
        vals.append(by_design[design][mine])
    if not rows:
        return sparse.csr_matrix((n_facts, 0))
    return sparse.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_facts, data.J),
    )


def judge_totals(
    task,
    data: SampleData,
    target: str = "micro",
    weighting: str = "size",
    by_query: bool = False,
    transform=None,
):
    """The judge's scores at the drawn facts and the controls' per-sampler expectations.

    For the precision of system i with mixture weights w_ij (:func:`mixture_weights`) and
    q_i = Σ_j w_ij s_j:  E_j[S_i] = (w_ij/n_j) Σ_x s_j(x) t_i(x) s(x)/q_i(x) and E_j[M_i] the
    same without s; for pooled recall with q0 = Σ_j (n_j/N) s_j:  E_j[g_i s/(N q0)],
    E_j[g_i/(N q0)], E_j[s/(N q0)], E_j[1/(N q0)].  Facts of one equivalence class count once,
    as in :class:`SampleData` (a class takes its canonical fact's score); unscored facts take
    the imputed score of :func:`receval.judge.fact_scores`.  With ``by_query`` also the
    expectations given the drawn fact's query (:func:`_query_expectations`); ``transform`` maps
    the fact scores first (the logistic calibration of :func:`logistic_calibration`).
    """
    engine = getattr(task, "engine_judge", None)
    if engine is not None:  # the engine path: the same sums in SQL (receval.engine.judge)
        return engine.totals(data, target, transform, by_query)
    from scipy import sparse

    from receval.estimators.precision import mixture_weights
    from receval.estimators.sample_data import design_probabilities, query_targets
    from receval.formats.coded import codes_in
    from receval.judge import fact_scores

    scores, scored = fact_scores(task)
    if transform is not None:  # a calibration map of the judge's scores (fixed given the fold)
        scores = transform(scores)
    strings = scores
    scores, scored = class_scores(task, scores, scored)
    view, probabilities, _ = design_probabilities(task, True)
    out = view.outputs
    m, J = data.m, data.J
    sys_codes = codes_in(out["system"], pd.Index(data.systems)).astype(np.int64)
    fact = out["fact"].to_numpy(np.int64)
    s = scores[fact]
    per_class = _class_strings(task, data, strings, sys_codes, fact)
    s_prec, m_prec = (s, 1.0) if per_class is None else per_class[:2]
    t = query_targets(view, target).to_numpy(float)
    P = _sampler_matrix(view, probabilities, data, fact, sys_codes)  # (F, J)
    w = mixture_weights(data, weighting)  # (m, J)
    P_rows = P[fact]  # (R, J)
    q_rows = np.asarray(P_rows.multiply(w[sys_codes]).sum(axis=1)).ravel()  # q_i(x) per row
    N = data.sampler_n.sum()
    q0 = np.asarray(P @ (data.sampler_n / N if N > 0 else np.zeros(J))).ravel()  # (F,)
    R = len(fact)
    with np.errstate(invalid="ignore", divide="ignore"):
        inv_q = np.where(q_rows > 0, t / q_rows, 0.0)
        inv_q0 = np.where(q0 > 0, 1.0 / (q0 * N), 0.0)
        scale = np.where(data.sampler_n > 0, w / data.sampler_n, 0.0)  # (m, J)

    def per_system(values: np.ndarray) -> np.ndarray:  # Σ_rows of system i: values · s_j(x)
        G = sparse.csr_matrix((values, (np.arange(R), sys_codes)), shape=(R, m))
        return np.asarray((G.T @ P_rows).todense())  # (m, J)

    prec_s = per_system(inv_q * s_prec) * scale
    prec_m = per_system(inv_q * m_prec) * scale
    num_s = per_system(inv_q0[fact] * s)
    num_m = per_system(inv_q0[fact])
    den_s = np.asarray(P.T @ (inv_q0 * scores)).ravel()
    den_m = np.asarray(P.T @ inv_q0).ravel()
    size = np.bincount(sys_codes, minlength=m).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.bincount(sys_codes, weights=scored[fact], minlength=m) / size
    by_q: dict[str, np.ndarray] = {}
    if by_query:
        rows = (sys_codes, codes_in(out["query_id"], pd.Index(data.queries)).astype(np.int64))
        fact_q = codes_in(view.facts["query_id"], pd.Index(data.queries)).astype(np.int64)
        parts = (inv_q * s_prec, inv_q * m_prec, inv_q0[fact] * s, inv_q0[fact])
        parts = (*parts, inv_q0 * scores, inv_q0)
        e_s, e_m = _query_expectations(P, P_rows, rows, fact_q, scale, parts)
        by_q = {"expected_score_q": e_s, "expected_mass_q": e_m}
    return JudgeTotals(
        score_drawn=scores[data.facts],
        scored_drawn=scored[data.facts],
        expected_score=np.concatenate([prec_s.T, num_s.T, den_s[:, None]], axis=1),
        expected_mass=np.concatenate([prec_m.T, num_m.T, den_m[:, None]], axis=1),
        scored_share=share,
        judge_precision=np.bincount(sys_codes, weights=t * s, minlength=m),
        class_sum_drawn=None if per_class is None else per_class[2],
        class_count_drawn=None if per_class is None else per_class[3],
        **by_q,
    )


def _class_strings(task, data: SampleData, strings: np.ndarray, sys_codes, fact):
    """With equivalence classes, (G per view row, m per view row, G at the drawn classes (D, m),
    m there (D, m)); None without classes.

    G_i(c) = Σ s(x) over the strings x ∈ c that system i output, m_i(c) their number.  The
    precision control t_i G_i(c)/q_i(c) then has the *string-level* known total
    t_i Σ_{x ∈ X_i} s(x) whatever the true classes are (every drawn class is resolved by its
    annotation, as TAC assessors class a query's responses together), and so has the string
    mass t_i m_i(c)/q_i(c), total t_i |strings of X_i|: controls of mean exactly zero even
    where outputs nobody classed are aliases (the view's own totals would count such an alias
    twice).  The ratio form's denominator is corrected by the string mass (Σ M − (Σ M_s −
    its known total)), so precision keeps the judge's known totals with classes."""
    from receval.estimators.classes import canonical_facts
    from receval.formats.coded import codes_in

    canon = canonical_facts(task)
    if canon is None:
        return None
    original = task.outputs
    o_sys = codes_in(original["system"], pd.Index(data.systems)).astype(np.int64)
    o_fact = original["fact"].to_numpy(np.int64)
    F = canon.size
    key = o_sys * F + canon[o_fact]
    keys, inverse = np.unique(key, return_inverse=True)
    total = np.bincount(inverse, weights=strings[o_fact], minlength=keys.size)
    count = np.bincount(inverse, minlength=keys.size).astype(float)

    def lookup(want: np.ndarray, values: np.ndarray, default: np.ndarray) -> np.ndarray:
        at = np.clip(np.searchsorted(keys, want), 0, max(keys.size - 1, 0))
        hit = keys.size > 0 and True
        found = (keys[at] == want) if hit else np.zeros(want.shape, bool)
        return np.where(found, values[at] if hit else 0.0, default)

    row_key = sys_codes * F + fact
    g_row = lookup(row_key, total, strings[fact])
    m_row = lookup(row_key, count, np.ones(fact.size))
    drawn = np.arange(data.m)[None, :] * F + data.facts[:, None]  # (D, m)
    g_drawn = lookup(drawn, total, np.broadcast_to(strings[data.facts][:, None], drawn.shape))
    m_drawn = lookup(drawn, count, np.ones(drawn.shape))
    return g_row, m_row, g_drawn, m_drawn


def class_scores(task, scores: np.ndarray, scored: np.ndarray):
    """(scores, scored) with every equivalence class's canonical fact scored by the mean over
    its scored members (the judge scores output strings; a class's canonical fact, its
    smallest fact id, may be a spelling no system output and the judge never saw).  Unchanged
    without classes.  A fixed function of the facts: the estimators stay unbiased."""
    from receval.estimators.classes import canonical_facts

    canon = canonical_facts(task)
    if canon is None:
        return scores, scored
    members = np.flatnonzero(canon != np.arange(canon.size))
    heads = np.unique(canon[members])
    group = np.concatenate([members, heads])
    to = canon[group]
    w = scored[group].astype(float)
    n = np.bincount(to, weights=w, minlength=canon.size)
    total = np.bincount(to, weights=w * scores[group], minlength=canon.size)
    scores, scored = scores.copy(), scored.copy()
    ok = heads[n[heads] > 0]
    scores[ok] = total[ok] / n[ok]
    scored[ok] = True
    return scores, scored


def _query_expectations(P, P_rows, rows, fact_q, scale, parts):
    """E_j[S_c | q] and E_j[M_c | q] (each (J, Q, 2m + 1)): one draw's judge and mass terms
    given that sampler j drew a fact of query q, Σ_{x∈q} s_j(x) h(x) / Σ_{x∈q} s_j(x).

    ``rows`` = (system, query) codes of the output rows, ``fact_q`` the facts' query codes,
    ``parts`` the per-row values (t s/q_i, t/q_i, s/(N q0), 1/(N q0)) and per-fact pool values
    (s/(N q0), 1/(N q0)).  A draw's query is random, so the centred control S − E_j[S | q] has
    mean zero within every sampler too, and within every query: resampling queries as
    clusters then leaves it centred (it explains within-query variation only)."""
    from scipy import sparse

    sys_codes, q_codes = rows
    m, J = scale.shape
    Q = int(max(fact_q.max(initial=-1), q_codes.max(initial=-1)) + 1)
    R, F = len(sys_codes), len(fact_q)

    def per_system_query(values: np.ndarray) -> np.ndarray:  # (J, Q, m)
        G = sparse.csr_matrix((values, (np.arange(R), sys_codes * Q + q_codes)), shape=(R, m * Q))
        dense = np.asarray((G.T @ P_rows).todense()).reshape(m, Q, J)
        return dense.transpose(2, 1, 0)

    def pool(values: np.ndarray) -> np.ndarray:  # (J, Q, 1)
        H = sparse.csr_matrix((values, (np.arange(F), fact_q)), shape=(F, Q))
        return np.asarray((P.T @ H).todense())[:, :, None]

    mass_q = pool(np.ones(F))[:, :, 0]  # (J, Q): Σ_{x∈q} s_j(x)
    prec_s, prec_m, num_s, num_m, den_s, den_m = parts
    with np.errstate(invalid="ignore", divide="ignore"):
        inv = np.where(mass_q > 0, 1.0 / mass_q, 0.0)[:, :, None]
    sc = scale.T[:, None, :]
    score = np.concatenate(
        [per_system_query(prec_s) * sc, per_system_query(num_s), pool(den_s)], axis=2
    )
    mass = np.concatenate(
        [per_system_query(prec_m) * sc, per_system_query(num_m), pool(den_m)], axis=2
    )
    return score * inv, mass * inv


def draw_folds(data: SampleData) -> np.ndarray:
    """The cross-fitting fold of every draw (K,): 0, 1 alternating in arrival order within
    each sampler (a sampler's only draw is in fold 0)."""
    K = data.K
    if not K:
        return np.zeros(0, np.int64)
    row = data.draw_row if data.draw_row.size == K else np.arange(K)
    order = np.lexsort((row, data.draw_sampler))
    sampler = data.draw_sampler[order]
    start = np.r_[0, np.flatnonzero(sampler[1:] != sampler[:-1]) + 1]
    first = np.repeat(start, np.diff(np.r_[start, K]))
    folds = np.empty(K, np.int64)
    folds[order] = (np.arange(K) - first) % 2
    return folds


def _quantity_terms(data: SampleData, judge: JudgeTotals, weighting: str, strings=False):
    """Per-draw (Y, S, M), each K × (2m + 1): human, judge and mass terms of every quantity;
    with ``strings`` also M_s, the string mass (M itself without classes): with classes the
    precision columns of S and M_s count the strings each system output in the drawn class
    (:func:`_class_strings`)."""
    with_score = dataclasses.replace(data, label=judge.score_drawn)
    with_one = dataclasses.replace(data, label=np.ones_like(data.label))
    y_num, y_den = pooled_recall_terms(data)
    s_num, s_den = pooled_recall_terms(with_score)
    m_num, m_den = pooled_recall_terms(with_one)
    Y = np.concatenate([joint_precision_terms(data, weighting), y_num, y_den[:, None]], axis=1)
    if judge.class_sum_drawn is None:
        s_prec = joint_precision_terms(with_score, weighting)
    else:
        s_prec = _precision_terms_of(data, weighting, judge.class_sum_drawn)
    S = np.concatenate([s_prec, s_num, s_den[:, None]], 1)
    M = np.concatenate(
        [joint_precision_terms(data, weighting, label=False), m_num, m_den[:, None]], axis=1
    )
    if not strings:
        return Y, S, M
    Ms = M
    if judge.class_count_drawn is not None:
        Ms = M.copy()
        Ms[:, : data.m] = _precision_terms_of(data, weighting, judge.class_count_drawn)
    return Y, S, M, Ms


def _precision_terms_of(data: SampleData, weighting: str, values: np.ndarray) -> np.ndarray:
    """:func:`joint_precision_terms` with a per-(drawn fact, system) value (D, m) in place of
    the label: (w_ij/n_j) t_i(x) v_i(x)/q_i(x) per draw (K × m)."""
    from receval.estimators.precision import mixture_weights, precision_support

    w = mixture_weights(data, weighting)
    q = data.proposal @ w.T
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(data.target > 0, data.target * values / q, 0.0)
        scale = np.where(data.sampler_n > 0, 1.0 / data.sampler_n, 0.0)
    terms = (w.T[data.draw_sampler] * scale[data.draw_sampler, None]) * ratio[data.draw_fact]
    terms[:, ~precision_support(data, weighting)] = np.nan
    return terms


def _products(A: np.ndarray, B: np.ndarray, Y: np.ndarray, M: np.ndarray, m: int) -> dict:
    """Per draw, the products whose fold sums give the coefficients (MOMENTS, CROSS) and the
    fold's corrections (CORRECTIONS), for judge control A, mass control B, labels Y, mass M."""
    num, den = slice(m, 2 * m), slice(2 * m, 2 * m + 1)
    return {
        "MM": M * M,
        "MY": M * Y,
        "YY": Y * Y,
        "M": M,
        "AA": A * A,
        "AB": A * B,
        "BB": B * B,
        "AY": A * Y,
        "BY": B * Y,
        "CA": A,
        "CB": B,
        "CY": Y,
        "AM": A[:, :m] * M[:, :m],
        "AnYd": A[:, num] * Y[:, den],
        "AdYn": A[:, den] * Y[:, num],
        "AnAd": A[:, num] * A[:, den],
        "YnYd": Y[:, num] * Y[:, den],
    }


def _centred(data: SampleData, judge: JudgeTotals, S: np.ndarray, M: np.ndarray):
    """(A, B): the judge and mass terms minus their known expectation under the draw's sampler
    (within the draw's query too when queries are resampled as clusters): mean zero."""
    if judge.expected_score_q is None:
        return (
            S - judge.expected_score[data.draw_sampler],
            M - judge.expected_mass[data.draw_sampler],
        )
    at = (data.draw_sampler, data.draw_query)
    return S - judge.expected_score_q[at], M - judge.expected_mass_q[at]


def logistic_calibration(score: np.ndarray, label: np.ndarray, ridge: float = 1.0):
    """The map s ↦ σ(a + b·logit s) fitted to one fold's labelled draws by penalised maximum
    likelihood (penalty ridge/2 · (a² + (b − 1)²): with few labels it stays near the judge's own
    scores, and it exists when the labels separate).  Newton steps on two parameters."""
    ok = np.isfinite(score) & np.isfinite(label)

    def logit(x: np.ndarray) -> np.ndarray:
        x = np.clip(x, 1e-4, 1 - 1e-4)
        return np.log(x / (1 - x))

    z, y = logit(score[ok]), label[ok]
    X = np.stack([np.ones_like(z), z], axis=1)
    theta = np.array([0.0, 1.0])
    prior = np.array([0.0, 1.0])
    for _ in range(25):
        p = 0.5 * (1.0 + np.tanh(0.5 * (X @ theta)))  # σ without overflow
        grad = X.T @ (p - y) + ridge * (theta - prior)
        hess = (X * (p * (1 - p))[:, None]).T @ X + ridge * np.eye(2)
        step = np.linalg.solve(hess, grad)
        theta = theta - step
        if np.abs(step).max() < 1e-8:
            break
    a, b = float(theta[0]), float(theta[1])

    def mapped(s: np.ndarray) -> np.ndarray:
        return 0.5 * (1.0 + np.tanh(0.5 * (a + b * logit(s))))

    return mapped


def linear_calibration(score: np.ndarray, label: np.ndarray) -> tuple[float, float]:
    """(α, β) of the least-squares line label ≈ α + β·score over one fold's draws (α = mean
    label, β = 0 when the scores do not vary or the fold has fewer than 3 labelled draws)."""
    ok = np.isfinite(score) & np.isfinite(label)
    s, f = score[ok], label[ok]
    if s.size == 0:
        return 0.0, 1.0
    if s.size < 3 or s.var() <= 1e-12:
        return float(f.mean()), 0.0
    beta = float(np.mean((s - s.mean()) * (f - f.mean())) / s.var())
    return float(f.mean() - beta * s.mean()), beta


#: with "linear" calibration, pooled recall's control is the logistic map from this many correct
#: draws in the other fold (math.inf: never)
RECALL_LOGISTIC_MIN = 20.0

#: which draws count for pooled recall's shrinkage: the "correct" ones or "all"
RATIO_DRAWS = "correct"

#: how the judge is calibrated on the other fold's labels (of every system) before it serves as
#: the control: "linear" (label ≈ α + β s: c (α + β s) = α·mass + β·judge), "logistic"
#: (σ(a + b logit s), :func:`logistic_calibration`) or "" (the raw judge)
CALIBRATE = "linear"

#: the positive-part shrinkage of the coefficients is max(0, 1 − (SHRINK + SMALL/ν) · p / F)
SHRINK = 1.0
SMALL = 0.0
#: whether a replicate re-estimates only the coefficients the full sample uses (λ̂ ≠ 0)
GATE_REPLICATES = True
#: the range the judge coefficient is clipped to
LAMBDA_RANGE = (0.0, 1.0)
#: whether the known output mass is used as a second control variate
USE_MASS = False
#: whether the self-normalised precision's coefficient is pooled over the systems
#: (:func:`pooled_slope`) rather than estimated per system (:func:`shrunk_slope`)
POOL_SELF = True
#: ... and from how many effective draws in the fold that estimates its coefficient
MASS_MIN_DRAWS = 0.0


def shrunk_slope(zy: np.ndarray, zz: np.ndarray, yy: np.ndarray, n_eff: np.ndarray) -> np.ndarray:
    """The judge coefficient from a fold's sums: clip(Σzy/Σzz, 0, 1) times the positive-part
    factor max(0, 1 − SHRINK/F), F = ν R²/(1 − R²), R² = λ Σzy / Σyy, ν = ``n_eff``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = zz > 0
        lam = np.where(ok, np.clip(zy / np.where(ok, zz, 1.0), *LAMBDA_RANGE), 0.0)
        r2 = np.clip(np.where(yy > 0, lam * zy / yy, 0.0), 0.0, 1.0)
        F = np.where(r2 < 1.0, n_eff * r2 / (1.0 - r2), np.inf)
        c = SHRINK + SMALL / np.maximum(n_eff, 1e-12)
        shrink = np.where(n_eff > 0, np.clip(1.0 - c / F, 0.0, 1.0), 0.0)
        lam = lam * np.where(np.isfinite(shrink), shrink, 0.0)
    return np.where(np.isfinite(lam), lam, 0.0)


def pooled_slope(zv: np.ndarray, zz: np.ndarray, vv: np.ndarray, n_eff: np.ndarray) -> np.ndarray:
    """One coefficient for every system (..., m) from a fold's sums: the slope of the
    linearised terms V on the control A pooled over the systems, each system's sums scaled by
    its own Σ V² (scale-free: Σ_i (ΣAV/ΣV²)_i / Σ_i (ΣA²/ΣV²)_i), clipped to ``LAMBDA_RANGE``
    and multiplied by max(0, 1 − 1/F), F = ν R²/(1 − R²) with ν = Σ_i ν_i effective draws and
    R² = λ · mean_i (ΣAV/ΣV²)_i.  The calibration the control carries is fitted on every
    system's labels, so its coefficient is ≈ the same for every system: pooling removes the
    noise of a per-system slope from ≈ 15 draws per fold (``POOL_SELF``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = (vv > 0) & (zz > 0) & np.isfinite(zv) & np.isfinite(n_eff)
        a = np.where(ok, zv / np.where(ok, vv, 1.0), 0.0)
        b = np.where(ok, zz / np.where(ok, vv, 1.0), 0.0)
        count = ok.sum(axis=-1, keepdims=True)
        slope = a.sum(axis=-1, keepdims=True) / b.sum(axis=-1, keepdims=True)
        lam = np.where(np.isfinite(slope), np.clip(slope, *LAMBDA_RANGE), 0.0)
        r2 = np.clip(lam * a.sum(axis=-1, keepdims=True) / np.maximum(count, 1), 0.0, 1.0)
        nu = np.where(ok, n_eff, 0.0).sum(axis=-1, keepdims=True)
        F = np.where(r2 < 1.0, nu * r2 / (1.0 - r2), np.inf)
        shrink = np.where(nu > 0, np.clip(1.0 - SHRINK / F, 0.0, 1.0), 0.0)
        lam = lam * np.where(np.isfinite(shrink), shrink, 0.0)
    return np.where(ok, lam, 0.0)


def ratio_coefficient(moments: dict[str, np.ndarray], m: int) -> np.ndarray:
    """λ_i of system i's pooled recall ν_i = N_i / D from one fold's sums (..., m).

    The correction is applied to the estimating function Σ (Y_N − ν Y_D) − λ Σ (A_N − ν A_D)
    (PPI++ for an M-estimator, Angelopoulos, Duchi & Zrnic 2024, §3), i.e. one λ_i corrects both
    the numerator and the denominator, chosen for the linearised ratio: λ = Σ Z V / Σ Z², with
    V = Y_N − ν Y_D, Z = A_N − ν A_D and ν the fold's own ratio (correcting N and D with
    separate coefficients can cancel the covariance the ratio gains from and widen it).
    """
    n, d = slice(m, 2 * m), slice(2 * m, 2 * m + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        nu = moments["CY"][..., n] / moments["CY"][..., d]
        nu = np.where(np.isfinite(nu), nu, 0.0)
        zv = (
            moments["AY"][..., n]
            - nu * (moments["AnYd"] + moments["AdYn"])
            + nu**2 * moments["AY"][..., d]
        )
        zz = moments["AA"][..., n] - 2 * nu * moments["AnAd"] + nu**2 * moments["AA"][..., d]
        vv = moments["YY"][..., n] - 2 * nu * moments["YnYd"] + nu**2 * moments["YY"][..., d]
        # the ratio's information is in the correct draws: their effective number (Kish, over
        # the pool's terms Y_D, nonzero only at correct facts), not every draw's
        if RATIO_DRAWS == "correct":
            n_eff = moments["CY"][..., d] ** 2 / moments["YY"][..., d] - 2.0
        else:
            n_eff = moments["M"][..., n] ** 2 / moments["MM"][..., n] - 2.0
        n_eff = np.where(np.isfinite(n_eff), n_eff, 0.0)
    return shrunk_slope(zv, zz, vv, n_eff)


def ratio_precision_coefficient(moments: dict[str, np.ndarray], m: int) -> np.ndarray:
    """λ_i of the self-normalised precision (Σ Y − λ Σ A) / Σ M from one fold's sums (..., m):
    λ = Σ A V / Σ A², V = Y − π M linearised at the fold's own ratio π = Σ Y / Σ M."""
    p = slice(0, m)
    with np.errstate(invalid="ignore", divide="ignore"):
        pi = moments["CY"][..., p] / moments["M"][..., p]
        pi = np.where(np.isfinite(pi), pi, 0.0)
        zv = moments["AY"][..., p] - pi * moments["AM"]
        vv = moments["YY"][..., p] - 2 * pi * moments["MY"][..., p] + pi**2 * moments["MM"][..., p]
        n_eff = moments["M"][..., p] ** 2 / moments["MM"][..., p] - 2.0
    if POOL_SELF:
        return pooled_slope(zv, moments["AA"][..., p], vv, n_eff)
    return shrunk_slope(zv, moments["AA"][..., p], vv, n_eff)


def fold_coefficients(moments: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(λ, μ) from one fold's moment totals (each (..., c)).

    A = S̃ (judge control), B = M̃ (mass control), both of mean zero within every sampler, so
    their uncentred sums of products estimate the within-sampler covariances the variance of
    the estimator is made of.  λ is the least-squares coefficient of Y on A given B, clipped to
    [0, 1]; μ the coefficient on B given λ, clipped to [−1, 1].  Both are multiplied by the
    positive-part factor max(0, 1 − p/F), F = ν R²/(1 − R²) the regression's F-type statistic
    (ν = (ΣM)²/ΣM² − 2 effective draws, R² the share of Y's ratio-centred sum of squares the
    controls explain, p the number of controls): a judge or mass that explains little of the
    labels in a small fold is not used, so the estimator falls back to the joint estimator.
    """
    AA, AB, BB, AY, BY = (moments[k] for k in ("AA", "AB", "BB", "AY", "BY"))
    MM, MY, YY, M1 = (moments[k] for k in ("MM", "MY", "YY", "M"))
    with np.errstate(invalid="ignore", divide="ignore"):
        n_eff = M1**2 / MM - 2.0
        syy = YY - MY**2 / MM
        ok_a = AA > 1e-12 * np.maximum(MM, 1e-300)
        lam1 = np.where(ok_a, np.clip(AY / np.where(ok_a, AA, 1.0), *LAMBDA_RANGE), 0.0)
        has_b = (BB > 1e-12 * np.maximum(MM, 1e-300)) & USE_MASS & (n_eff >= MASS_MIN_DRAWS)
        det = AA * BB - AB**2
        slope2 = np.where(has_b, (AY * BB - BY * AB) / det, 0.0)
        lam2 = np.where(ok_a & np.isfinite(slope2), np.clip(slope2, *LAMBDA_RANGE), 0.0)
        mu2 = np.where(has_b, np.clip((BY - lam2 * AB) / BB, -1.0, 1.0), 0.0)
        mu2 = np.where(np.isfinite(mu2), mu2, 0.0)
        # the mass joins only where its final prediction error RSS (ν + p)/(ν − p) is smaller
        fpe1 = (syy - (2 * lam1 * AY - lam1**2 * AA)) * (n_eff + 1) / (n_eff - 1)
        rss2 = syy - 2 * (lam2 * AY + mu2 * BY) + lam2**2 * AA + 2 * lam2 * mu2 * AB + mu2**2 * BB
        has_b = has_b & (n_eff > 2) & (rss2 * (n_eff + 2) / (n_eff - 2) < fpe1)
        lam = np.where(has_b, lam2, lam1)
        mu = np.where(has_b, mu2, 0.0)
        explained = lam * AY + mu * BY
        r2 = np.clip(np.where(syy > 0, explained / syy, 0.0), 0.0, 1.0)
        p = 1.0 + has_b
        F = np.where(r2 < 1.0, n_eff * r2 / (1.0 - r2), np.inf)
        c = SHRINK + SMALL / np.maximum(n_eff, 1e-12)
        shrink = np.where(n_eff > 0, np.clip(1.0 - c * p / F, 0.0, 1.0), 0.0)
        shrink = np.where(np.isfinite(shrink), shrink, 0.0)
    return lam * shrink, mu * shrink


class PPIEstimator(Estimator):
    """Prediction-powered precision and recall (human draws correcting a judge on every output)."""

    name: ClassVar[str] = "ppi"
    kind: ClassVar[str] = "unbiased"
    equation: ClassVar[str] = (
        "Angelopoulos et al. 2023 (PPI) eq. 1 with PPI++ power tuning (2024) over the joint "
        "estimator's draws (Chaganty et al. 2017): π̂_i = Σ_k t_i f/q_i − Σ_a λ_i^(1−a) "
        "Σ_{k∈a} (t_i s/q_i − E_j[t_i s/q_i]), the control's per-sampler mean E_j known from "
        "the judge's scores on every output, s replaced by its linear calibration α + β s "
        "from the other fold's labels, λ cross-fitted over two folds (unbiased for any "
        "judge); pooled recall a ratio of such sums with one λ_i; true recall θ̂·ν̂_i"
    )
    summary: ClassVar[str] = (
        "prediction-powered: the judge's exact totals over every output, corrected by the "
        "importance-weighted human draws (PPI++ with a cross-fitted λ per system)"
    )
    interval_note: ClassVar[str] = ", prediction-powered (PPI++, cross-fitted λ per system)"
    #: the joint estimator's --precision-form choice (unbiased sum or self-normalised ratio),
    #: made on the same human terms, applies to the corrected precision too
    precision_forms: ClassVar[bool] = True
    #: the anytime sequences take the judge's scores as their precision control
    uses_judge: ClassVar[bool] = True

    def __init__(self) -> None:
        #: the judge totals, full-sample totals and calibrations of each context, for this run
        self.cache = ContextCache()

    def check(self, task, options: Any) -> None:
        if task is None or getattr(task, "judge", None) is None or not len(task.judge):
            where = task.root / "judge.tsv" if task is not None else "judge.tsv"
            raise BundleError(
                where,
                None,
                "--estimator ppi needs the judge's scores: judge.tsv (or .csv/.parquet) with "
                "query_id, answer, judge_score in [0, 1]",
            )

    # -- layout -------------------------------------------------------------------------

    def draw_layout(self, m: int) -> TermLayout:
        """[Y (2m+1) | mass (m) | per fold: moments, corrections (each 2m+1)]; ``joint``,
        ``pooled_num``, ``pooled_den`` are views into Y (the human-only joint terms)."""
        c = 2 * m + 1
        parts = [("Y", c), ("mass", m)]
        parts += [(f"{k}{a}", c) for a in (0, 1) for k in (*MOMENTS, *CORRECTIONS)]
        parts += [(f"{k}{a}", m) for a in (0, 1) for k in CROSS]
        base = TermLayout.of(*parts)
        blocks = dict(base.blocks)
        blocks["joint"] = slice(0, m)
        blocks["pooled_num"] = slice(m, 2 * m)
        blocks["pooled_den"] = slice(2 * m, 2 * m + 1)
        return TermLayout(blocks, base.width)

    def layouts(self, ctx: ScoringContext) -> dict[str, TermLayout]:
        return {"draws": self.draw_layout(ctx.data.m), "units": unit_layout(ctx.data.m)}

    def judge(self, ctx: ScoringContext) -> JudgeTotals:
        """The judge totals of this context (computed once per context)."""
        cache = self.cache.of(ctx)
        if "judge" not in cache:
            options = ctx.options
            engine = getattr(ctx.task, "engine_judge", None)
            if engine is not None:  # one pass over the runs for the raw scores and every map
                s = engine.drawn_scores(ctx.data)
                maps = [self.fold_map(ctx, a, s) if CALIBRATE else None for a in (0, 1)]
                totals = engine.totals_many(
                    ctx.data, options.target, [None, *maps], options.cluster_queries
                )
                cache["judge"] = totals[0]
                for a in (0, 1):
                    if maps[a] is not None:
                        cache[f"fitted{a}"] = totals[1 + a]
            else:
                cache["judge"] = judge_totals(
                    ctx.task, ctx.data, options.target, options.weighting, options.cluster_queries
                )
        return cache["judge"]

    def terms(self, ctx: ScoringContext) -> dict[str, np.ndarray]:
        data = ctx.data
        judge = self.judge(ctx)
        layout = self.draw_layout(data.m)
        Y, S, M, Ms = _quantity_terms(data, judge, ctx.options.weighting, strings=True)
        A, B = _centred(data, judge, S, Ms)
        folds = draw_folds(data)
        draws = np.zeros((data.K, layout.width))
        draws[:, layout["Y"]] = Y
        mass = M
        if judge.class_count_drawn is not None:  # Σ M − (Σ M_s − its known total)
            mass = M.copy()
            mass[:, : data.m] = (M - B)[:, : data.m]
        draws[:, layout["mass"]] = mass[:, : data.m]
        controls = self.calibrated_controls(ctx, judge, (A, B, M), folds)
        for a in (0, 1):
            own = (folds == a)[:, None]
            # moments of fold a estimate the coefficient of fold 1 − a's control, linearised
            # at the denominator the estimator uses (the string-corrected mass with classes)
            products = _products(controls[1 - a], B, Y, mass, data.m)
            products["CA"] = controls[a]
            for key, value in products.items():
                draws[:, layout[f"{key}{a}"]] = np.where(own, value, 0.0)
        self.cache.of(ctx)["full"] = draws.sum(axis=0)
        if ctx.options.cluster_queries:
            return clustered_terms(data, draws)
        return {"draws": draws, "units": unit_terms(data)}

    def calibrated_controls(self, ctx: ScoringContext, judge: JudgeTotals, terms, folds):
        """[control of fold 0, control of fold 1]: each the judge calibrated on the *other*
        fold's labels (``CALIBRATE``), so that it is fixed given that fold.  With "linear",
        pooled recall's columns take the logistic map instead where the other fold holds at
        least ``RECALL_LOGISTIC_MIN`` correct draws (a rare-positive ratio needs the judge's
        low scores mapped to ≈ 0; a map fitted to fewer positives widened it)."""
        A, B, M = terms
        data = ctx.data
        f = data.label[data.draw_fact]
        s = judge.score_drawn[data.draw_fact]
        if not CALIBRATE:
            return [A, A]
        from receval.judge import calibrates

        if calibrates(ctx.task):
            return [self.combined_control(ctx, a, M) for a in (0, 1)]
        controls = []
        for a in (0, 1):
            other = folds == 1 - a
            if CALIBRATE == "linear":
                alpha, beta = linear_calibration(s[other], f[other])
                control = beta * A + alpha * B
                logistic_cols = slice(data.m, 2 * data.m + 1)
                if self.fold_map(ctx, a, s) is None:
                    controls.append(control)
                    continue
            else:
                control, logistic_cols = A.copy(), slice(0, 2 * data.m + 1)
            fitted = self.fitted_totals(ctx, a)
            _, S_g, _ = _quantity_terms(data, fitted, ctx.options.weighting)
            control = control.copy()
            control[:, logistic_cols] = _centred(data, fitted, S_g, M)[0][:, logistic_cols]
            controls.append(control)
        return controls

    def fold_map(self, ctx: ScoringContext, a: int, s: np.ndarray | None = None):
        """Fold a's map of the judge's scores, fitted on fold 1 − a's labels only (None: no
        map, the linear control alone): the judges calibrated and combined when they are
        (``calibration{a}`` kept for run.json), else the logistic map where ``CALIBRATE`` asks
        for it ("linear": from ``RECALL_LOGISTIC_MIN`` correct draws in fold 1 − a).  ``s``:
        the judge's raw scores of the draws (default: the judge totals').  Computed once."""
        cache = self.cache.of(ctx)
        if f"map{a}" in cache:
            return cache[f"map{a}"]
        from receval.judge import calibrates

        data = ctx.data
        other = draw_folds(data) == 1 - a
        f = data.label[data.draw_fact]
        out = None
        if calibrates(ctx.task):
            from receval.estimators.judge_calibration import task_calibration

            facts = data.draw_fact[other]
            ok = np.isfinite(f[other])
            train, first = np.unique(data.facts[facts[ok]], return_index=True)
            fit = task_calibration(ctx.task, train, f[other][ok][first])
            cache[f"calibration{a}"] = fit
            out = _constant_map(fit.combined)
        elif CALIBRATE and not (
            CALIBRATE == "linear" and np.nansum(f[other]) < RECALL_LOGISTIC_MIN
        ):
            if s is None:
                s = self.judge(ctx).score_drawn[data.draw_fact]
            out = logistic_calibration(s[other], f[other])
        cache[f"map{a}"] = out
        return out

    def fitted_totals(self, ctx: ScoringContext, a: int) -> JudgeTotals:
        """The judge totals under fold a's map (:meth:`fold_map`), computed once."""
        cache = self.cache.of(ctx)
        if f"fitted{a}" not in cache:
            options = ctx.options
            cache[f"fitted{a}"] = judge_totals(
                ctx.task,
                ctx.data,
                options.target,
                options.weighting,
                options.cluster_queries,
                self.fold_map(ctx, a),
            )
        return cache[f"fitted{a}"]

    def combined_control(self, ctx: ScoringContext, a: int, M: np.ndarray):
        """Fold a's control from the judges calibrated and combined on fold 1 − a's labelled
        draws (:mod:`receval.estimators.judge_calibration`): c·g(x) minus its known per-sampler
        expectation, recomputed exactly for that g over every output, so it has mean zero
        given fold 1 − a (exactly unbiased, as for the linear map)."""
        fitted = self.fitted_totals(ctx, a)
        _, S_g, _ = _quantity_terms(ctx.data, fitted, ctx.options.weighting)
        return _centred(ctx.data, fitted, S_g, M)[0]

    def full_totals(self, ctx: ScoringContext) -> np.ndarray:
        """The draws stage's full-sample totals (the coefficients λ̂ of the point estimate)."""
        cache = self.cache.of(ctx)
        if "full" not in cache:
            self.terms(ctx)
        return cache["full"]

    # -- statistic ----------------------------------------------------------------------

    def statistic(self, ctx: ScoringContext, ratio: np.ndarray | None = None) -> Statistic:
        data = ctx.data
        m = data.m
        layout = self.draw_layout(m)
        units = unit_layout(m)
        num, den = units["theta_num"].start, units["theta_den"].start
        census, exact = data.census, data.census_precision
        use_ratio = np.zeros(m, bool) if ratio is None else np.asarray(ratio, bool)

        def coefficients(d: np.ndarray) -> list[dict[str, np.ndarray]]:
            """Per fold a, the coefficients of its correction from the other fold's sums."""
            keys = (*MOMENTS, *CORRECTIONS, *CROSS)
            out = []
            for fold in (0, 1):
                other = {k: d[..., layout[f"{k}{1 - fold}"]] for k in keys}
                lam, mu = fold_coefficients(other)
                out.append(
                    {
                        "lam": lam,
                        "mu": mu,
                        "self": ratio_precision_coefficient(other, m),
                        "ratio": ratio_coefficient(other, m),
                    }
                )
            return out

        full = self.full_totals(ctx)
        hat = coefficients(full)

        def corrected(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            """(Ŷ of every quantity, with the self-normalised precision where ``ratio`` asks
            for it, pooled recall, λ of precision and pooled recall).

            A replicate's correction is λ̂ C + λ* (C* − C): the full-sample coefficient times
            the full-sample control, plus the replicate's own coefficient times the control's
            resampling deviation.  At the full sample this is λ̂ C; over replicates it adds
            Var(λ*) Var(C*), the coefficient's estimation noise, once (λ* C* would count it
            twice, since C* is centred at the observed C, not at 0)."""
            total = d[..., layout["Y"]].copy()
            ratio_num = total[..., :m].copy()
            num = total[..., m : 2 * m].copy()
            den = np.broadcast_to(total[..., 2 * m : 2 * m + 1], num.shape).copy()
            lams = 0.0
            pn, pd_ = slice(m, 2 * m), slice(2 * m, 2 * m + 1)
            for fold, (star, h) in enumerate(zip(coefficients(d), hat, strict=True)):
                if GATE_REPLICATES:  # a coefficient the full sample does not use stays 0
                    star = {k: np.where(h[k] == 0, 0.0, v) for k, v in star.items()}
                c0, b0 = full[layout[f"CA{fold}"]], full[layout[f"CB{fold}"]]
                dc = d[..., layout[f"CA{fold}"]] - c0
                db = d[..., layout[f"CB{fold}"]] - b0
                total = (
                    total - (h["lam"] * c0 + star["lam"] * dc) - (h["mu"] * b0 + star["mu"] * db)
                )
                ratio_num = ratio_num - (h["self"] * c0[:m] + star["self"] * dc[..., :m])
                num = num - (h["ratio"] * c0[pn] + star["ratio"] * dc[..., pn])
                den = den - (h["ratio"] * c0[pd_] + star["ratio"] * dc[..., pd_])
                lam_p = np.where(use_ratio, star["self"], star["lam"][..., :m])
                lams = lams + np.concatenate([lam_p, star["ratio"]], axis=-1) / 2
            self_normalised = ratio_num / d[..., layout["mass"]]
            total[..., :m] = np.where(use_ratio, self_normalised, total[..., :m])
            return total, num / den, lams

        def stat(totals: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            d, u = totals["draws"], totals["units"]
            with np.errstate(invalid="ignore", divide="ignore"):
                theta = u[..., num] / u[..., den]
                q, pooled, lam = corrected(d)
                precision, census_precision = q[..., :m], exact
                if QUERY_STAGE in totals:  # t_i = 1/|X_i| over the resampled queries
                    cells = totals[QUERY_STAGE]
                    resized = precision * data.sizes / cells[..., :m]
                    precision = np.where(use_ratio, precision, resized)
                    census_precision = cells[..., m:] / cells[..., :m]
                precision = np.where(census, census_precision, precision)
                recall = theta[..., None] * pooled
                joint = d[..., layout["joint"]]
                ratio_form = joint / d[..., layout["mass"]]
            metrics = metric_dict(
                precision, pooled, recall, theta, q[..., 2 * m : 2 * m + 1], joint, ratio_form
            )
            metrics["judge_lambda"] = lam[..., :m]
            metrics["judge_lambda_recall"] = lam[..., m : 2 * m]
            return metrics

        return stat

    # -- reliability, notes -------------------------------------------------------------

    #: Kish sizes of the joint mixture's mass terms, as for the joint estimator
    effective_sizes = JointEstimator.effective_sizes

    def system_notes(self, ctx: ScoringContext, notes: list[list[str]]) -> None:
        unsupported_precision_notes(ctx, notes, "the human correction needs its own sample")
        share = self.judge(ctx).scored_share
        for i in np.flatnonzero((share < 1) & (ctx.data.sizes > 0)):
            notes[i].append(
                f"judge: {1 - share[i]:.0%} of outputs unscored (imputed with the judge's mean; "
                "unbiased, less narrowing)"
            )

    def record(self, ctx: ScoringContext, run: Any) -> JudgeBlock:
        """run.json's ``judge`` block: the judge audited against the human labels (and, when the
        judges are calibrated, ``combination``: each judge's weight in each fold's control)."""
        audit = judge_audit(ctx, self.judge(ctx), run)
        cache = self.cache.of(ctx)
        fits = [cache.get(f"calibration{a}") for a in (0, 1)]
        if all(f is not None for f in fits):
            audit["combination"] = {
                name: [round(float(f.weights[j]), 4) for f in fits]
                for j, name in enumerate(fits[0].names)
            }
            audit["calibration_method"] = (
                "per judge: isotonic share correct per grade level, a logit offset per query "
                "(shrunk), fitted on the other fold's labels; judges combined by simplex "
                "weights on inner out-of-fold scores, or the best single judge"
            )
        return JudgeBlock.from_json(audit)

    def run_warnings(self, ctx: ScoringContext, warnings: list[str]) -> None:
        JointEstimator().run_warnings(ctx, warnings)
        from receval.judge import judge_grades

        grades = judge_grades(ctx.task)
        if grades is None:
            return
        engine = getattr(ctx.task, "engine_judge", None)
        if engine is not None:  # counted over the pool in SQL
            pool, missed = engine.pool_facts, engine.pool_missing()
        else:
            pooled = np.flatnonzero(ctx.task.facts["in_pool"].to_numpy(bool))
            pool, missed = pooled.size, grades.missing(pooled)
        for name, missing in missed.items():
            if missing:
                who = f"judge {name!r}" if name else "the judge"
                warnings.append(
                    f"{who} did not score {missing} of the {pool} pooled facts (imputed: "
                    "the judges' mean, or a level of its own when calibrated; unbiased, less "
                    "narrowing)"
                )


def _constant_map(values: np.ndarray):
    """The map giving ``values`` (a calibration's score of every fact) whatever it is given."""

    def mapped(_: np.ndarray) -> np.ndarray:
        return values

    return mapped


def _rounded(values: np.ndarray, digits: int = 4) -> list:
    return [None if not np.isfinite(v) else round(float(v), digits) for v in np.asarray(values)]


def calibration_bins(score: np.ndarray, label: np.ndarray, bins: int = 10) -> list[dict]:
    """Reliability diagram data: per equal-width score bin, the facts, mean score, mean label."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(score, edges[1:-1]), 0, bins - 1)
    out = []
    for b in range(bins):
        inside = which == b
        if inside.any():
            out.append(
                {
                    "lo": round(float(edges[b]), 3),
                    "hi": round(float(edges[b + 1]), 3),
                    "facts": int(inside.sum()),
                    "mean_score": round(float(score[inside].mean()), 4),
                    "share_correct": round(float(label[inside].mean()), 4),
                }
            )
    return out


def judge_audit(ctx: ScoringContext, judge: JudgeTotals, run: Any) -> dict[str, Any]:
    """The judge against the human labels of the drawn facts (scored ones only): calibration
    bins, correlation and mean absolute error overall and per system, the judge-only precision
    Σ t_i s, λ per system, and the effective number of human labels the judge was worth:
    n_i (Var_boot(joint sum) / Var_boot(ppi) − 1), both variances over the same replicates."""
    from receval.judge import judge_names

    data = ctx.data
    scored = judge.scored_drawn
    s, f = judge.score_drawn[scored], data.label[scored]

    def corr(a: np.ndarray, b: np.ndarray) -> float:
        if a.size < 3 or a.std() == 0 or b.std() == 0:
            return float("nan")
        return float(np.corrcoef(a, b)[0, 1])

    own = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=data.m)
    worth = np.full(data.m, np.nan)  # no replicates (e.g. --intervals anytime): not measured
    if len(run.replicates["precision"]) > 1:
        with np.errstate(invalid="ignore", divide="ignore"):
            var_ppi = np.nanvar(run.replicates["precision"], axis=0)
            var_joint = np.nanvar(run.replicates["precision_unbiased"], axis=0)
            worth = own * (var_joint / var_ppi - 1.0)
    systems = {}
    for i, name in enumerate(data.systems):
        mine = data.member[scored, i]
        systems[name] = {
            "lambda_precision": _rounded([run.point["judge_lambda"][i]])[0],
            "lambda_pooled_recall": _rounded([run.point["judge_lambda_recall"][i]])[0],
            "judge_precision": _rounded([judge.judge_precision[i]])[0],
            "scored_share": _rounded([judge.scored_share[i]])[0],
            "labelled_facts": int(mine.sum()),
            "correlation": _rounded([corr(s[mine], f[mine])])[0],
            "mean_abs_error": _rounded(
                [np.abs(s[mine] - f[mine]).mean() if mine.any() else np.nan]
            )[0],
            "effective_extra_labels": _rounded([worth[i]], 1)[0],
        }
    return {
        "judges": judge_names(ctx.task),
        "labelled_scored_facts": int(scored.sum()),
        "labelled_unscored_facts": int((~scored).sum()),
        "correlation": _rounded([corr(s, f)])[0],
        "mean_abs_error": _rounded([np.abs(s - f).mean() if s.size else np.nan])[0],
        "calibration": calibration_bins(s, f),
        "coefficients": "cross-fitted over two folds per sampler, on the judge calibrated by "
        "the other fold's labels (alpha + beta s), clipped to [0, 1], shrunk by max(0, 1 - 1/F); "
        "lambda here is the mean of the two folds' values at the full sample",
        "effective_extra_labels": "n_i * (Var(joint) / Var(ppi) - 1) over the same bootstrap "
        "replicates: how many more own-sample human labels the joint estimator would need",
        "systems": systems,
    }
