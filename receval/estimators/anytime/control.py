"""A predictable control variate for the anytime precision sequences (``--intervals anytime``).

The plain precision term of system i at step k is Z_k = w_k f(x_k) with w_k = t_i(x_k)/q_k(x_k)
(:mod:`receval.estimators.anytime`); its variance is driven by the facts of large weight.
Facts output by many systems are far more often correct than facts output by one (pooling),
and that is known for every fact before any label.  So the facts of each system are split
into *strata* by popularity b(x) ∈ {1, 2, ≥ 3 systems}, and the term becomes

    U_k = w_k (f(x_k) − γ_k β_k(b(x_k))) + γ_k Σ_b β_k(b) T_ib,     T_ib = Σ_{x ∈ X_i, b(x) = b} t_i(x),

with β_k(b) the share of correct labels among the earlier draws of stratum b (prior 1/2) and
γ_k ∈ [0, 1] the regression coefficient of the plain term on the control w β − Σ_b β T
over the earlier steps of the system (0 for its first :data:`WARMUP` steps).  Both are
*predictable* (fixed before draw k), and E[w_k g(x_k) | past] = Σ_{X_i} t_i g for any g fixed
before the draw whenever q_k covers X_i, so E[U_k | past] = π_i exactly: a control variate
with a known mean in the manner of prediction-powered inference (Angelopoulos et al., Science
2023; PPI++, Angelopoulos, Duchi & Zrnic 2023) and of anytime-valid off-policy inference with
predictable components (Waudby-Smith et al. 2022), here with the popularity strata as the
predictor.  The sequence stays a betting confidence sequence on bounded terms: the range of
U_k is known before the draw from the per-stratum coverage own_ib = Σ_s (r_s/r) κ_isb
(κ_isb = min over X_i ∩ b of p_s/t_i): w ≤ 1/own_ib on stratum b, so

    U_k ∈ [γ c − max_b γ β_b / own_ib,  γ c + max_b (1 − γ β_b) / own_ib]    (c = Σ_b β_b T_ib).

With γ = 0 this is the plain term with a range at most the plain one (max_b 1/own_ib ≤ 1/own_i).
When popularity says nothing about correctness, γ stays near 0 and little is lost; in the
bench's gradient world it halves the terms' variance.

**Labels already known.**  A fact drawn at an earlier step has its label in the past, so the
control's prediction for it may be the label itself (any prediction fixed before the draw keeps
the mean).  With L_k the facts labelled before step k (from the stream's own draws only, so
every look reads the same terms for the same steps) the term is

    U_k = Σ_{x ∈ X_i ∩ L_k} t_i f + γ_k (c_k − Σ_{x ∈ X_i ∩ L_k} t_i g_k) + [x_k ∉ L_k] w_k (f − γ_k g_k),

whose conditional mean is again π_i: the labelled facts enter exactly, the others
importance-weighted.  A draw of a labelled fact has no spread at all, so the spread falls as
labels accumulate and a system whose facts are all labelled has an exact term; the range is
the one above about the new base (a draw of a labelled fact lies inside it).  Labels are
reused across systems: a fact drawn for one system is known to every system that output it.
In bench/anytime.py's gradient world the final look's precision interval fell from 1.10 to
0.80 × the fixed-n bootstrap's width, and the paired tests on the same terms decided 45.7
pairs where they decided 35.0 (80 repetitions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from receval.estimators.anytime.betting import BettingStreams

#: popularity strata: facts output by 1, 2, and 3 or more systems
STRATA = 3
#: steps of a system before γ is estimated (γ = 0 before: the plain term)
WARMUP = 20
#: the pooled-recall bets' truncation: the range (constant in ν) sits far above the terms'
#: spread, so the truncation binds on most steps; staking up to 0.97 of what the range allows
#: (any value below 1 keeps the capital positive) narrowed ν in all three worlds checked
#: against 0.9 (median width × the bootstrap's: bench/anytime.py gradient 1.445 -> 1.418,
#: gradient20 1.517 -> 1.485; data/kbp-sim one random round 0.086 -> 0.082), where precision's
#: terms, heavier-tailed against their bets, do better at 3/4 (at 0.9: 1.10 -> 1.24 in gradient)
RECALL_CAP = 0.97


@dataclass(frozen=True)
class Strata:
    """Each fact's popularity stratum (``of_fact``, indexed by fact id of the view; −1: no
    output) and each system's target mass per stratum ``mass`` (m, STRATA) = T_ib."""

    of_fact: np.ndarray
    mass: np.ndarray
    #: each system's distinct facts per stratum (m, STRATA): Σ_pool g_i over stratum b
    count: np.ndarray | None = None


def popularity_strata(
    facts: np.ndarray, sys_codes: np.ndarray, t_all: np.ndarray, m: int
) -> Strata:
    """Strata of the output rows' facts (``facts``, ``sys_codes``, targets ``t_all`` per row):
    the number of distinct systems outputting a fact, capped at :data:`STRATA`."""
    n_facts = int(facts.max()) + 1 if facts.size else 0
    # the distinct (fact, system) pairs as one sorted key, np.unique's result by a sort and a
    # difference: on data/kbp-sim (141k rows) np.unique over axis 1 took 0.19 CPU s and numpy
    # 2.4's hashed np.unique of the key 0.07 s, the sort 0.002 s; bincount adds in row order
    # as np.add.at did
    facts, sys_codes = np.asarray(facts, np.int64), np.asarray(sys_codes, np.int64)
    pair = np.sort(facts * m + sys_codes)
    pair = pair[np.concatenate([[True], pair[1:] != pair[:-1]])] if pair.size else pair
    pair_fact, pair_sys = pair // max(m, 1), pair % max(m, 1)
    popularity = np.bincount(pair_fact, minlength=n_facts)
    of_fact = np.where(popularity > 0, np.minimum(popularity, STRATA) - 1, -1)
    cells = m * STRATA
    mass = np.bincount(sys_codes * STRATA + of_fact[facts], weights=t_all, minlength=cells)
    count = np.bincount(pair_sys * STRATA + of_fact[pair_fact], minlength=cells).astype(float)
    mass, count = mass.reshape(m, STRATA), count.reshape(m, STRATA)
    return Strata(of_fact, mass, count)


def stratum_kappa(
    ratio: np.ndarray, sys_codes: np.ndarray, stratum: np.ndarray, m: int
) -> np.ndarray:
    """κ_ib = min over X_i ∩ b of p_i/t_i (STRATA, m) from each output row's ``ratio`` p/t
    (0 where the stratum is empty)."""
    kappa = np.full((STRATA, m), np.inf)
    if ratio.size:
        np.minimum.at(kappa, (stratum, sys_codes), ratio)
    return np.where(np.isfinite(kappa), kappa, 0.0)


@dataclass(frozen=True)
class JudgeControl:
    """An automatic judge's scores as the control (``--estimator ppi --intervals anytime``):
    ``mean`` (m,) = Σ_{X_i} t_i s exactly, and the highest and lowest score of each system's
    facts per stratum (m, STRATA), which bound the control's range."""

    mean: np.ndarray
    high: np.ndarray
    low: np.ndarray
    #: with a judge calibrated as the stream goes (:mod:`receval.estimators.judge_stream`):
    #: ``mean`` (K, m), ``high``/``low`` (K, m, STRATA) per row, the score per row and system
    #: (K, m), and per row (K, m) Σ t_i g over the facts labelled at earlier rows, g the row's
    #: own calibrated map
    predicted: np.ndarray | None = None


def judge_control(
    scores: np.ndarray, facts, sys_codes, t_all, strata: Strata, m: int
) -> JudgeControl:
    """The judge control of :func:`controlled_precision_streams` from every fact's score s(x) ∈
    [0, 1] (``scores``, by fact id) and the output rows (``facts``, ``sys_codes``, ``t_all``)."""
    s = np.clip(np.asarray(scores, float)[facts], 0.0, 1.0)
    mean = np.bincount(sys_codes, weights=t_all * s, minlength=m)
    b = strata.of_fact[facts]
    high = np.zeros((m, STRATA))
    low = np.ones((m, STRATA))
    if s.size:
        np.maximum.at(high, (sys_codes, b), s)
        np.minimum.at(low, (sys_codes, b), s)
    return JudgeControl(mean, high, low)


@dataclass(frozen=True)
class KnownLabels:
    """The labels a step already knows: a fact drawn at an earlier step has its label in the
    past, so the term of a later draw of it can be its exact contribution (module docstring).
    ``known`` (K,) whether the row's fact was labelled at an earlier step, ``step`` (K,) each
    row's step.  Internally, in
    step order (``order`` sorts the rows by step, stably): ``first`` the rows that label a fact
    for the first time, ``start`` the first sorted row of each row's step."""

    known: np.ndarray
    step: np.ndarray
    order: np.ndarray
    first: np.ndarray
    start: np.ndarray

    def before(self, values: np.ndarray) -> np.ndarray:
        """Per row (K, …) the sum of ``values`` (K, …; a function of the row's fact) over the
        facts labelled at earlier steps: e.g. values = t_i(x)·f(x) gives Σ_{x labelled before}
        t_i(x) f(x)."""
        values = np.asarray(values, float)[self.order]
        picked = np.where(self.first.reshape(-1, *[1] * (values.ndim - 1)), values, 0.0)
        cum = np.concatenate([np.zeros((1, *values.shape[1:])), np.cumsum(picked, axis=0)])
        out = np.empty_like(values)
        out[self.order] = cum[self.start]
        return out

    def total(self, values: np.ndarray) -> np.ndarray:
        """The sum of ``values`` (K, …; a function of the row's fact) over every fact the rows
        label, each once: what the whole stream knows."""
        values = np.asarray(values, float)[self.order]
        return values[self.first].sum(axis=0)

    def by_step(self, values: np.ndarray, steps: int) -> np.ndarray:
        """:meth:`before` per step (``steps``, …) instead of per row (0 at a step without rows;
        every row of a step has the same value)."""
        values = np.asarray(values, float)
        out = np.zeros((steps, *values.shape[1:]))
        if self.step.size:
            at, row = np.unique(self.step, return_index=True)
            out[at] = self.before(values)[row]
        return out


def known_labels(fact: np.ndarray, label: np.ndarray, step: np.ndarray) -> KnownLabels:
    """:class:`KnownLabels` of rows with facts ``fact`` and ``label`` (NaN: not labelled) and
    ``step`` (K,) each row's step, in any order (a legacy round's pool steps interleave its
    systems' rows): a fact is known at a step when a row of an earlier step labelled it."""
    by_row = np.asarray(step, np.int64)
    order = np.argsort(by_row, kind="stable")
    fact = np.asarray(fact, np.int64)[order]
    step = by_row[order]
    K = fact.size
    labelled = np.isfinite(np.asarray(label, float))[order]
    first = np.zeros(K, bool)
    first_row = np.full(int(fact.max()) + 1 if K else 0, K, np.int64)
    if labelled.any():
        rows = np.flatnonzero(labelled)
        facts, at = np.unique(fact[rows], return_index=True)
        first[rows[at]] = True
        first_row[facts] = rows[at]
    start = np.searchsorted(step, step, side="left") if K else np.zeros(0, np.int64)
    sorted_known = labelled & (first_row[fact] < start) if K else np.zeros(0, bool)
    known = np.empty(K, bool)
    known[order] = sorted_known
    return KnownLabels(known, by_row, order, first, start)


def controlled_precision_streams(
    target: np.ndarray,
    label: np.ndarray,
    q: np.ndarray,
    own: np.ndarray,
    own_b: np.ndarray,
    stratum: np.ndarray,
    mass: np.ndarray,
    judge: tuple[np.ndarray, JudgeControl] | None = None,
    fact: np.ndarray | None = None,
) -> BettingStreams:
    """Every system's precision stream with the control variate (module docstring): m streams
    of K steps.  ``target`` (K, m) t_i at each drawn fact, ``label`` (K,), ``q`` (K,), ``own``
    (K, m) as for the plain terms (a step with own = 0 is skipped), ``own_b`` (K, m, STRATA)
    the per-stratum coverage, ``stratum`` (K,) each drawn fact's stratum, ``mass`` (m, STRATA).

    With ``judge`` = (the judge's score at each drawn fact (K,), :class:`JudgeControl`) the
    control is the judge's score g = s(x) with its exact mean Σ_{X_i} t_i s (prediction-powered,
    γ the predictable PPI++-style coefficient) instead of the popularity shares."""
    K, m = target.shape
    f = np.nan_to_num(np.asarray(label, float))
    present = mass > 0  # (m, B)
    covered = np.where(present[None], own_b > 0, True).all(axis=2)
    active = (own > 0) & covered
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(active, target / q[:, None], 0.0)
    beta = None
    if judge is None:
        beta = _stratum_shares(f, stratum)  # (K, B), predictable
        g = beta[np.arange(K), stratum]  # (K,)
        c = beta @ mass.T  # (K, m)
        g_high = g_low = beta[:, None, :]
    else:
        g = np.clip(np.asarray(judge[0], float), 0.0, 1.0)  # (K,) or per system (K, m)
        c = np.broadcast_to(judge[1].mean, (K, m))
        g_high, g_low = judge[1].high, judge[1].low
        if g_high.ndim == 2:  # one map for every row
            g_high, g_low = g_high[None], g_low[None]
    plain = w * f[:, None]
    g_k = g if g.ndim == 2 else g[:, None]  # the prediction per row (and system)
    control = w * g_k - c
    gamma = _regression(plain, control, active)
    u = plain - gamma * control
    base = gamma * c
    if fact is not None:  # facts labelled at earlier steps enter with their exact labels
        own_map = judge is not None and judge[1].predicted is not None  # each row's own map
        one = g[:, 0] if g.ndim == 2 else g
        correct, predicted, fresh = _known_parts(target, label, fact, stratum, beta, one)
        if own_map:
            predicted = judge[1].predicted
        base = correct + gamma * (c - predicted)
        u = base + np.where(fresh[:, None], w * (f[:, None] - gamma * g_k), 0.0)
    down, up = np.zeros((K, m)), np.zeros((K, m))
    for b in range(own_b.shape[2]):  # one stratum at a time: (K, m) work arrays
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(present[None, :, b] & (own_b[..., b] > 0), 1.0 / own_b[..., b], 0.0)
        np.maximum(down, gamma * g_high[..., b] * inv, out=down)
        np.maximum(up, (1.0 - gamma * g_low[..., b]) * inv, out=up)
    lo = base - down
    hi = base + up
    one = np.ones((m, K))
    return BettingStreams(u.T, one, lo.T, one, hi.T, one, active.T)


def _known_parts(target, label, fact, stratum, beta, g):
    """For the terms with known labels: per row (K, m) Σ t_i f and Σ t_i g_k over the facts
    labelled at earlier rows (g_k the control's prediction at the row: β_k of the fact's stratum,
    or the judge's score when ``beta`` is None), and (K,) whether the row's fact is new."""
    K = target.shape[0]
    kn = known_labels(fact, label, np.arange(K))
    f = np.nan_to_num(np.asarray(label, float))
    correct = kn.before(target * f[:, None])
    if beta is None:
        predicted = kn.before(target * g[:, None])
    else:
        predicted = np.zeros_like(correct)
        for b in range(beta.shape[1]):  # β_k changes with k: the known mass per stratum
            mass_b = kn.before(np.where((stratum == b)[:, None], target, 0.0))
            predicted += beta[:, b : b + 1] * mass_b
    return correct, predicted, ~kn.known


def _stratum_shares(f: np.ndarray, stratum: np.ndarray, prior: float = 0.5) -> np.ndarray:
    """β_k(b) (K, STRATA): share of correct labels among the draws before k in stratum b,
    with one prior draw at ``prior``."""
    K = f.size
    onehot = np.zeros((K, STRATA))
    onehot[np.arange(K), stratum] = 1.0
    seen = np.cumsum(onehot, axis=0) - onehot
    correct = np.cumsum(onehot * f[:, None], axis=0) - onehot * f[:, None]
    return np.clip((prior + correct) / (1.0 + seen), 0.0, 1.0)


def _regression(plain: np.ndarray, control: np.ndarray, active: np.ndarray) -> np.ndarray:
    """γ_k (K, m): Σ_{j<k} a_j b_j / Σ_{j<k} b_j² over the system's earlier active steps
    (a the plain term, b the control, whose mean is 0), clipped to [0, 1]; 0 for the first
    :data:`WARMUP` active steps."""
    ab = np.where(active, plain * control, 0.0)
    bb = np.where(active, control**2, 0.0)
    sab = np.cumsum(ab, axis=0) - ab
    sbb = np.cumsum(bb, axis=0) - bb
    n = np.cumsum(active, axis=0) - active
    with np.errstate(divide="ignore", invalid="ignore"):
        gamma = np.where(sbb > 0, sab / sbb, 0.0)
    return np.where(n >= WARMUP, np.clip(gamma, 0.0, 1.0), 0.0)


def controlled_recall_streams(
    member: np.ndarray,
    label: np.ndarray,
    sigma: np.ndarray,
    pool_step: np.ndarray,
    stratum: np.ndarray,
    count: np.ndarray,
    high: np.ndarray,
    active: np.ndarray,
) -> BettingStreams:
    """Every system's pooled-recall stream (m streams of P pool steps) with a predictable
    control variate in the numerator.

    The plain test of ν_i = C_i/G bets on Y(ν) = A − ν·B per pool step, A = Σ_step g_i f/σ and
    B = Σ_step f/σ (E A = C_i = Σ_pool g_i f, E B = G = Σ_pool f when the step covers the pool).
    Here A becomes A − γ (Σ_step g_i β(b(x))/σ − Σ_b β(b) n_ib), n_ib the system's distinct
    facts in popularity stratum b and β the share of correct labels among the draws of
    *earlier pool steps* in that stratum (prior 1/2): the control has conditional mean 0
    (E Σ_step h/σ = Σ_pool h for any h fixed before the step), so E[Y(ν_true) | past] = 0 still.
    γ ∈ [0, 1] is the regression of the plain term at the running estimate on the control over
    the system's earlier steps (0 for the first :data:`WARMUP`), predictable too.  B is left
    alone, so the test stays A' − ν·B with B ≥ 0 and the capitals monotone in ν.

    The range: with 1/σ ≤ ``high``/(draws in the step) (``high`` (P,) = the step's bound of
    B), c = γ Σ_b β n_ib and β̲, β̄ the smallest and largest stratum share,
    Y ∈ [c − high, c + (1 − γ β̲) high] for every ν ∈ [0, 1] (a wrong fact of system i costs
    at most γβ̄·high ≤ high, a correct fact of another at most ν·high ≤ high).  The range is
    taken constant in ν so the bets' truncation does not depend on ν and each factor
    1 + λ(A' − νB) is monotone in ν (a range that shrinks with ν would make the truncated bet
    depend on ν and the capital non-monotone where A' < 0)."""
    m = member.shape[1]
    P = high.size
    f = np.nan_to_num(np.asarray(label, float))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(sigma > 0, 1.0 / sigma, 0.0)
    beta = _step_shares(f, stratum, pool_step, P)  # (P, STRATA), predictable per step
    at_draw = beta[pool_step, stratum]  # (K,)
    plain = np.zeros((m, P))
    ctrl = np.zeros((m, P))
    for i in range(m):
        g = member[:, i]
        plain[i] = np.bincount(pool_step, weights=g * f * w, minlength=P)
        ctrl[i] = np.bincount(pool_step, weights=g * at_draw * w, minlength=P)
    total = np.bincount(pool_step, weights=f * w, minlength=P)
    known = count @ beta.T  # (m, P): Σ_b β(b) n_ib
    control = ctrl - known
    nu_prev = (0.5 + np.cumsum(plain, axis=1) - plain) / (1.0 + np.cumsum(total) - total)
    act = np.broadcast_to(active, (m, P))
    gamma = _regression((plain - nu_prev * total).T, control.T, act.T).T
    u = plain - gamma * control
    c = gamma * known
    low_share = beta.min(axis=1)[None, :]
    zero = np.zeros((m, P))
    lo0 = c - high[None, :]
    hi0 = c + (1.0 - gamma * low_share) * high[None, :]
    return BettingStreams(
        u, np.broadcast_to(total, (m, P)), lo0, zero, hi0, zero, act, cap=RECALL_CAP
    )


def _step_shares(f: np.ndarray, stratum: np.ndarray, step: np.ndarray, P: int) -> np.ndarray:
    """β_p(b) (P, STRATA): share of correct labels among the draws of pool steps before p in
    stratum b, with one prior draw at 1/2."""
    cell = step * STRATA + stratum
    seen = np.bincount(cell, minlength=P * STRATA).reshape(P, STRATA)
    right = np.bincount(cell, weights=f, minlength=P * STRATA).reshape(P, STRATA)
    seen = np.cumsum(seen, axis=0) - seen
    right = np.cumsum(right, axis=0) - right
    return np.clip((0.5 + right) / (1.0 + seen), 0.0, 1.0)
