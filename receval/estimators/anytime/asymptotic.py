"""Asymptotic anytime intervals (``--intervals anytime-asymptotic``): confidence sequences whose
coverage at every look holds as the draws grow (asymptotically), narrower than the betting
sequences at early looks.

**What it estimates.**  The same quantities as ``--intervals anytime``
(:mod:`receval.estimators.anytime`), from the same stream of per-draw terms
(:func:`receval.estimators.anytime.stream.build_stream`: rounds in order, each draw of a round in
a random order weighted by the mixture of the sources still to come, predictable control
variates, labelled facts entering exactly), so every design the betting sequences read is read
here: precision, pooled recall, pool coverage θ and the pool's correct facts, recall θ·ν and
F1, and the paired comparisons behind tiers, rank sets and ``sample --until-decided``.

**The sequences.**  For a hypothesised value μ each step k gives a term Y_k(μ) = u_k − μ v_k with
conditional mean 0 at the true μ (precision: the controlled term minus μ; pooled recall, recall,
F1: the one-stream terms of :mod:`receval.estimators.anytime.f1`; a pair: the difference of two
systems' terms from the same draw).  Each side bets on ±Y with the *Gaussian* capital

    log M_t(μ) = Σ_{k ≤ t} ψ(±λ_k Y_k(μ)),   ψ(x) = x − x²/2 (x < 1),  ψ(x) = 1/2 (x ≥ 1),

λ_k predictable (fixed before draw k): the plug-in bets of the betting sequences, tuned to the
draws of the rounds started so far (WSR 2024 eq. 24, :func:`receval.estimators.anytime.betting
.plugin_bets`; pairs: sqrt(2c/(σ̂²_{k−1} H_k)) with c the first Holm threshold), none before a
system's :data:`WARMUP_HITS`-th hit (the guarantee's start time) and, for precision, none before
the Kish effective sample size of the system's earlier weights t_i/q reaches :data:`WARMUP_ESS`
(:func:`warm_ess`: the Gaussian approximation of right-skewed importance-weighted terms is poor
below it, and the running maximum keeps an early miss at every later look).  Rejected where the running
maximum of M_t reaches 2/α (pairs: Holm over all ordered pairs on the p-values 1/max_t M_t, as
the betting pairs).  Where the betting sequences' capital is Π(1 + λ_k Y_k), truncated so that
no draw can ruin it (λ ≤ cap/range), the Gaussian capital has no range and no truncation.

**What that buys, measured** (bench/anytime_asymptotic.py, seed 1, 3 repetitions).  Resolution
at early looks: an equal design in the gradient world read at 1,176 / 2,112 / 3,984 draws orders
26.0 / 40.0 / 48.0 pairs by precision (betting 14.7 / 35.7 / 48.0, the fixed-n bootstrap 32.7 /
43.3 / 48.3) and 4.3 / 11.3 / 24.7 by F1 (betting 0.0 / 7.0 / 21.7, bootstrap 3.7 / 15.0 /
25.0).  At the final look the widths are the betting sequences' (precision 1.01x, pooled recall
0.99-1.01x; recall and F1 1.36-1.39x, their α split), and the loop deciding with either orders
about as many pairs as the equal design scored once by the bootstrap (precision 49.0 and 49.3
against 48.3; F1 24.3 and 24.3 against 25.0).  In the population with importance weights ~7x
the typical one (below) the final width is 0.67x the betting sequences' — and that is exactly
where its guarantee fails.

**Assumptions and guarantee: asymptotic time-uniform coverage, not a non-asymptotic one.**
With Gaussian terms E[exp ψ(λY) | past] ≤ 1 (for Y ~ N(0, σ²): −(λσ)⁴/4 + … in the log), so M_t
is a test supermartingale and Ville's inequality gives coverage at every look at once, whatever
rule chose the counts.  For the real terms it holds as the number of draws grows: λ_k shrinks
as 1/√H_k, the third-moment excess of a step is O(λ³ E|Y|³), and over H steps it sums to
O(E|Y|³/(σ³√H)) → 0 (the strong-approximation argument of time-uniform central limit theory,
Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas, *Time-uniform central limit theory and
asymptotic confidence sequences*, Ann. Statist. 2024: a Gaussian boundary applied to sums of
martingale differences with finite (2 + δ) moments and a variance process that grows without
bound holds uniformly over time as the start time grows).  So it assumes: the draws of a
round i.i.d. from their sources (as receval draws them) and the terms' conditional variance
finite and not dominated by a few draws (Lindeberg); its error tends to α as the draws grow,
and at few draws or heavy-tailed importance weights it can exceed α.  Measured: on a finite
population whose design draws the correct facts of half the systems with weight 0.15 (terms
right-skewed, weights ~7x), the share of 1,000 campaigns (2,040 draws each) whose sequence ever
misses was 0.17-0.19 for those systems with the hit warm-up alone (betting: at most 0.023), all
at the *upper* end (the bettor on −Y gains between the rare large terms; the betting sequences'
upper end is held by the range exactly there), and 0.016-0.034 for the systems of even weights;
with :data:`WARMUP_ESS` it is 0.035-0.049 (at most 0.002 for the even ones), at 0.75x the
betting width, and at 240 draws 0.000, at 2.1x the betting width: it bets little before the
warm-up (``bench/anytime_asymptotic.py --only population``).  In the null world (12 equal
systems, the loop deciding with it, 9 looks, 40 repetitions) no look split the tiers in 0.950 of the
repetitions (SE 0.034) and precision / pooled recall covered at every look 0.992 / 0.979 (SE
0.004 / 0.015; precision 0.919 ± 0.015 with the 30-hit warm-up alone, every miss an upper end
set at a look of Kish ESS 30-200 and kept by the running maximum — hence :data:`WARMUP_ESS`);
the betting sequences (16 repetitions) gave 1.000, 0.984 and 0.990.  The betting sequences
(``--intervals anytime``) need none of this: their coverage holds for every number of draws,
for bounded terms.  Pool coverage θ and T = K/θ (F1's pairs) keep the betting sequences: a
design has tens of exhaustive units, too few for a Gaussian approximation.

**When not to trust it.**  Few draws of a system, or importance weights so uneven that a
handful of draws carry the variance: each system's Kish effective sample size of its precision
weights t_i/q and of its pooled-recall terms is checked, and a system below
:data:`MIN_ASYMPTOTIC_ESS` is flagged in ``note`` (then prefer ``--intervals anytime``).  The
flag counts draws; it does not see skew: a design that draws some class of a system's facts
far less often than their share of its target (``--by-judge`` strata, ``entity-relation``
weights far from uniform) gives right-skewed terms whose upper end this method can miss at any
number of draws the bench reached — use ``--intervals anytime`` there.

**Recall and F1.**  θ's betting sequence at α/2 over the exhaustive units (non-asymptotic) and
the one-stream test of recall or F1 (2G − f(n + K/θ), :class:`receval.estimators.anytime.f1
.DirectF1`) at α/2: the term increases with θ and ψ is nondecreasing, so the lower side's capital
is least at θ's lower end and the upper side's at its upper end; F1's (recall's) lower end is
the one at θ_lo, the upper at θ_hi (valid for every θ inside, a union bound over θ's and the
draws' errors).  Legacy rounds and ``--target macro``: products of θ's and ν's ends at α/2
(recall) and of π, ν and θ at α/3 (F1).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from receval.estimators.anytime.betting import BettingStreams, _buffers
from receval.estimators.anytime.betting import one_sided_ends as _betting_ends
from receval.estimators.anytime.control import RECALL_CAP, controlled_precision_streams
from receval.estimators.anytime.f1 import (
    PRIORS,
    T_SHARE,
    _binding_moments,
    _census_order,
    _w,
    direct_pooled_recall,
    direct_stream,
    true_facts,
)
from receval.estimators.anytime.method import (
    AnytimeBounds,
    AnytimeComparisons,
    AnytimeIntervals,
    _judge_terms,
    _judged,
    _levels,
    simultaneous_bounds,
)
from receval.estimators.anytime.pairs import (
    PAIRED,
    PairTests,
    SystemTerms,
    chunked,
    decide,
    ok_pairs,
    pooled_recall_terms,
    precision_terms,
    running_top,
    step_moments,
)
from receval.estimators.anytime.sequences import (
    _unit_streams,
    f1_of,
    pool_totals,
    precision_streams,
    sequence_bets,
    unit_bounds,
)
from receval.estimators.anytime.stream import build_stream
from receval.estimators.reliability import kish
from receval.progress import stage

if TYPE_CHECKING:
    from receval.estimators.base import ScoringContext
    from receval.estimators.sample_data import SampleData
    from receval.run_record import IntervalRecord
    from receval.task import Task

#: bisection steps of each end (resolution 2⁻²⁴ of the search range; a rejected value is
#: reported, so the ends are conservative by at most that)
ITERATIONS = 24
#: the start time of the asymptotic guarantee (which holds from a start time on, as it grows):
#: a system's sequences do not bet before this many earlier draws of the stream hit its facts,
#: a pair's before both systems have (a predictable rule).  bench/anytime_asymptotic.py's
#: population (rounds of 400): ever-miss shares of the uniform-weight systems 0.07-0.11 from
#: the first draw, 0.02-0.03 from 30 hits
WARMUP_HITS = 30
#: below this Kish effective sample size of a system's precision weights (or pooled-recall
#: terms) its asymptotic intervals are flagged in ``note``: the Gaussian approximation of a
#: sum of importance-weighted terms needs more pieces than the bootstrap's 20 (reliability.py),
#: since the time-uniform boundary is read at every look, the early ones included
MIN_ASYMPTOTIC_ESS = 50
#: the precision sequences' start time in effective draws: no bet before the Kish effective
#: sample size (Σw)²/Σw² of the system's earlier importance weights t_i/q reaches this.
#: bench/anytime_asymptotic.py's null world (40 repetitions): precision covered at every look
#: 0.919 with the hit warm-up alone, 0.992 with this one (the tiers' paired tests unchanged)
WARMUP_ESS = 100.0


def gaussian_log_path(streams: BettingStreams, bets, mu, side: int, running: bool) -> np.ndarray:
    """log M_t(μ) (module docstring) after the last step (``running`` False, (..., S)) or its
    running maximum with the starting capital 1 included (``running`` True, (..., S)), for
    candidate values ``mu`` (S,) or (A, S).  ``side`` +1 bets on Y (rejects μ below the mean),
    −1 on −Y.  ψ is nondecreasing and Y decreasing in μ (v ≥ 0), so the capital is monotone in
    μ and each end is found by bisection."""
    path = _gaussian_steps(streams, bets, mu, side, running)
    if not running:
        return path
    return np.maximum(path.max(axis=-1, initial=0.0), 0.0)


def _gaussian_steps(streams: BettingStreams, bets, mu, side: int, running: bool) -> np.ndarray:
    """The path Σ_{k ≤ t} ψ(±λ_k Y_k(μ)) over every step (``running``; (..., S, K)) or its
    last value (..., S): :func:`gaussian_log_path` before its maximum.  Works in place on the
    betting module's two per-thread work buffers (the operations, and their order, of
    ψ(x) = x − 0.5·x·x written out: the same floats); the result is a view of one of them,
    read before the thread's next capital."""
    mu = np.asarray(mu, float)[..., None]
    x, step = _buffers(np.broadcast_shapes(mu.shape, streams.u.shape))
    np.multiply(mu, streams.v, out=x)
    if side > 0:
        np.subtract(streams.u, x, out=x)
    else:  # −(u − μv) = μv − u exactly
        np.subtract(x, streams.u, out=x)
    np.multiply(bets, x, out=x)
    np.multiply(x, 0.5, out=step)
    np.multiply(step, x, out=step)
    np.subtract(x, step, out=step)
    np.copyto(step, 0.5, where=~(x < 1.0))  # ψ(x) = 1/2 from x = 1 on (and at NaN)
    if not streams.dense:
        np.copyto(step, 0.0, where=~np.asarray(streams.active, bool))
    if not running:
        return step.sum(axis=-1)
    return np.cumsum(step, axis=-1, out=step)


class GaussianStreams(BettingStreams):
    """Betting streams whose capital is the Gaussian one (:func:`gaussian_log_path`): the
    searches of :mod:`receval.estimators.anytime.betting` (the guided bisection, streams in
    chunks over the workers) then find its ends, bit for bit those of a plain bisection (the
    capital is monotone in μ, which is all the guided search's replay needs)."""

    @classmethod
    def of(cls, streams: BettingStreams) -> GaussianStreams:
        """``streams``' terms and ranges under the Gaussian capital."""
        fields = dataclasses.fields(BettingStreams)
        return cls(**{f.name: getattr(streams, f.name) for f in fields})

    def log_path(self, bets, mu, side: int, running: bool) -> np.ndarray:
        """The path :func:`receval.estimators.anytime.betting.log_capital` reads: every
        step's (its running maximum over every step, the starting capital included, is then
        :func:`gaussian_log_path`'s)."""
        return _gaussian_steps(self, bets, mu, side, running)


def one_sided_ends(streams, bets, level: np.ndarray, side: int, search, running=True):
    """The end (A, S) the Gaussian bettor ``side`` leaves at log-levels ``level`` (A, S) inside
    ``search`` (the parameter's range): side +1 the lower end, −1 the upper.  A rejected value
    is reported (or the range end where nothing is rejected, the other where everything is):
    the ends of a plain bisection of :data:`ITERATIONS` steps, found by the betting sequences'
    guided search with few capital evaluations
    (:func:`receval.estimators.anytime.betting.one_sided_ends`)."""
    gauss = GaussianStreams.of(streams)
    return _betting_ends(gauss, bets, level, side, search, ITERATIONS, running)


def warm(hits: np.ndarray | None, shape, start: int = WARMUP_HITS) -> np.ndarray:
    """Whether each step may bet (S, K): at least ``start`` earlier hits (``hits`` (S, K): the
    step's draw is of the stream's system's facts; None: every step is a hit)."""
    if hits is None:
        seen = np.broadcast_to(np.arange(shape[1]), shape)
    else:
        h = np.asarray(hits, bool)
        seen = np.cumsum(h, axis=1) - h
    return seen >= start


def warm_ess(weights: np.ndarray, start: float = WARMUP_ESS) -> np.ndarray:
    """Whether each step may bet (S, K): the Kish effective sample size (Σw)²/Σw² of the
    stream's earlier nonzero ``weights`` (S, K) is at least ``start`` (predictable: only
    earlier steps are read)."""
    w = np.asarray(weights, float)
    s1 = np.cumsum(w, axis=1) - w
    s2 = np.cumsum(w * w, axis=1) - w * w
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.where(s2 > 0, s1 * s1 / s2, 0.0)
    return ess >= start


def asymptotic_ends(
    streams,
    levels,
    search,
    alpha,
    horizon,
    prior=0.5,
    scale=None,
    hits=None,
    start=WARMUP_HITS,
    ready=None,
) -> dict:
    """Two-sided ends per level α' in ``levels``: ``{α': (lower (S,), upper (S,))}`` (each side
    at α'/2), the bets those of the betting sequences (:func:`sequence_bets`), none before the
    warm-up (:func:`warm`); NaN for a stream with no active step."""
    S = streams.shape[0]
    if streams.shape[1] == 0:
        nan = np.full(S, np.nan)
        return {a: (nan, nan) for a in levels}
    bets = sequence_bets(streams, alpha, horizon, prior, scale)
    bets = np.where(warm(hits, streams.shape, start), bets, 0.0)
    if ready is not None:
        bets = np.where(ready, bets, 0.0)
    level = np.log(2.0 / np.asarray(levels, float))[:, None] * np.ones((len(levels), S))
    lower = one_sided_ends(streams, bets, level, +1, search)
    upper = np.maximum(one_sided_ends(streams, bets, level, -1, search), lower)
    none = ~np.asarray(streams.active, bool).any(axis=1)
    lower = np.where(none[None, :], np.nan, lower)
    upper = np.where(none[None, :], np.nan, upper)
    return {a: (lower[i], upper[i]) for i, a in enumerate(levels)}


def asymptotic_bounds(
    task: Task, data: SampleData, confidence: float, judge: bool = False
) -> AnytimeBounds:
    """Every sequence the leaderboard reads (module docstring) at the levels of
    :func:`receval.estimators.anytime.anytime_bounds`."""

    alpha = 1.0 - confidence
    levels = _levels(alpha, max(int((data.sizes > 0).sum()), 1))
    m = data.m
    stage(f"anytime-asymptotic: the stream of {data.K} draws")
    st = build_stream(task, data)
    pool = pool_totals(task, data, st)
    precision = _precision(task, data, st, judge)
    horizon = st.horizon.T if st.fact.size else None
    hits = (data.target[st.fact] > 0).T  # (m, K): the draw is of the system's facts
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where(st.own > 0, data.target[st.fact] / st.q[:, None], 0.0).T
    ready = warm_ess(weights)
    stage(f"anytime-asymptotic: precision sequences ({m} systems)")
    ends = {"precision": asymptotic_ends(precision, levels, (0.0, 1.0), alpha, horizon, hits=hits,
                                         ready=ready)}  # fmt: skip
    direct = data.target_kind == "micro" and _one_draw_steps(st)
    stage(f"anytime-asymptotic: pooled recall sequences ({m} systems)")
    if direct and st.fact.size:
        nu, prior = direct_pooled_recall(precision, pool, data.sizes)
        ends["pooled_recall"] = asymptotic_ends(nu, levels, (0.0, 1.0), alpha, horizon, prior,
                                                prior * pool.facts / 2, hits)  # fmt: skip
    else:
        ends["pooled_recall"] = asymptotic_ends(_ratio_streams(data, st, pool), levels,
                                                (0.0, 1.0), alpha, _pool_horizon(st), 0.5,
                                                pool.facts / 2)  # fmt: skip
    correct = BettingStreams.of_means(pool.total[None, :], pool.high[None, :], pool.active[None, :])
    ends["pool_correct"] = asymptotic_ends(correct, [alpha], (0.0, pool.facts), alpha,
                                           _pool_horizon(st), pool.facts / 2)  # fmt: skip

    # θ keeps the betting sequence: a design has tens of units (20 in the bench's gradient
    # world), too few for the Gaussian capital (from its 10th unit on it gave [0, 1] there)
    ends["pool_coverage"] = unit_bounds(data, sorted({*levels, alpha / 2}), alpha)
    pieces = (precision, pool, hits)
    stage(f"anytime-asymptotic: recall and F1 ({m} systems)")
    for name, pair in _recall_f1(ends, pieces, data, alpha, horizon, direct).items():
        ends[name] = {alpha: pair}
    stage("")
    return AnytimeBounds(ends, (st.shuffled_rounds, st.legacy_rounds), bool(direct))


def _precision(task, data, st, judge: bool) -> BettingStreams:
    """Every system's controlled precision stream (as :func:`anytime_bounds` builds it)."""
    if st.own_b is None:
        return precision_streams(data.target[st.fact], st.label, st.q, st.own)
    control = _judge_terms(task, data, st) if judge else None
    return controlled_precision_streams(
        data.target[st.fact], st.label, st.q, st.own, st.own_b, st.stratum, st.mass, control,
        fact=st.fact,
    )  # fmt: skip


def _one_draw_steps(st) -> bool:
    """Whether every pool step is one draw (rounds in a random order)."""
    return st.P == st.fact.size and np.array_equal(st.pool_step, np.arange(st.P))


def _pool_horizon(st):
    return st.pool_horizon[None, :] if st.P else None


def _ratio_streams(data, st, pool) -> BettingStreams:
    """Pooled recall's ratio test A − ν·B per pool step (legacy rounds, ``--target macro``)."""
    m, P = data.m, st.P
    member = np.zeros((m, P))
    for i in range(m):
        member[i] = np.bincount(st.pool_step, weights=data.member[st.fact, i] * pool.weight,
                                minlength=P)  # fmt: skip
    plain = BettingStreams.of_ratios(member, pool.raw_total[None, :], pool.raw_high[None, :],
                                     np.broadcast_to(pool.active, (m, P)))  # fmt: skip
    return dataclasses.replace(plain, cap=RECALL_CAP)


def _recall_f1(ends, pieces, data, alpha, horizon, direct) -> dict:
    """Recall's and F1's (lower, upper) at α (module docstring, "Recall and F1");
    ``pieces``: the precision streams, the pool totals and the hits (:func:`warm`)."""

    precision, pool, hits = pieces
    m = data.m
    nan = np.full(m, np.nan)
    t_lo, t_hi = (float(x[0]) for x in ends["pool_coverage"][alpha / 2])
    if not np.isfinite(t_lo) or not precision.shape[1]:
        return {"recall": (nan, nan), "f1": (nan, nan)}
    if not direct:
        n_lo, n_hi = ends["pooled_recall"][alpha / 2]
        p_lo, p_hi = ends["precision"][alpha / 3]
        u_lo, u_hi = ends["pool_coverage"][alpha / 3]
        v_lo, v_hi = ends["pooled_recall"][alpha / 3]
        return {"recall": (t_lo * n_lo, t_hi * n_hi),
                "f1": (f1_of(p_lo, u_lo * v_lo), f1_of(p_hi, u_hi * v_hi))}  # fmt: skip
    n = np.asarray(data.sizes, float)
    level = np.full((1, m), np.log(4.0 / alpha))  # each side at α/4: two-sided α/2
    units = _unit_streams(data)
    ref = float(np.clip(units[0].u.sum() / max(units[0].v.sum(), 1e-300), max(t_lo, 1e-3), 1.0))
    out = {}
    for name in PRIORS:
        test = direct_stream(precision, pool, n, name, (max(t_lo, 1e-3), ref), alpha, horizon)
        test = dataclasses.replace(test, bets=np.where(warm(hits, test.bets.shape), test.bets, 0))
        lower = (
            one_sided_ends(test.streams(np.full(m, t_lo)), test.bets, level, +1, (0.0, 1.0))[0]
            if t_lo > 0 else np.zeros(m)
        )  # fmt: skip
        upper = one_sided_ends(test.streams(np.full(m, t_hi)), test.bets, level, -1, (0.0, 1.0))
        none = ~np.asarray(test.active, bool).any(axis=1)
        out[name] = (np.where(none, np.nan, lower), np.where(none, np.nan, upper[0]))
    return out


# ----------------------------------------------------------------------------- paired tests


def gaussian_pair_bets(d, active, horizon, threshold: float, ready=True) -> np.ndarray:
    """Predictable bets λ_s = sqrt(2c/(m̂_{s−1} H_s)) on a pair's terms ``d`` (pairs, S): m̂ the
    running mean of d² over the earlier active steps, H_s the steps of the rounds started so
    far (``horizon`` (S,)), c = ``threshold`` (the log-capital to reach); 0 before the pair is
    ``ready`` (pairs, S: both systems past the warm-up, :func:`warm`)."""
    act = np.asarray(active, bool)
    sq = np.where(act, d * d, 0.0)
    n_prev = np.cumsum(act, axis=1) - act
    m2 = (np.cumsum(sq, axis=1) - sq) / np.maximum(n_prev, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.sqrt(2.0 * threshold / (m2 * np.asarray(horizon, float)[None, :]))
    return np.where(act & ready & (n_prev > 0) & (m2 > 0) & np.isfinite(lam), lam, 0.0)


def _step_warm(data, st) -> np.ndarray:
    """(m, P) whether each system is past the warm-up at each pool step (hits counted per
    step: a legacy batch's draws together)."""
    hits = np.zeros((data.m, st.P))
    for i in range(data.m):
        hits[i] = np.bincount(st.pool_step, weights=data.target[st.fact, i] > 0, minlength=st.P)
    seen = np.cumsum(hits, axis=1) - hits
    return seen >= WARMUP_HITS


def gaussian_path(lam: np.ndarray, d: np.ndarray) -> np.ndarray:
    """log M_t = Σ_{s ≤ t} ψ(λ_s d_s) for every step (rows: pairs)."""
    x = lam * d
    return np.cumsum(np.where(x < 1.0, x - 0.5 * x * x, 0.5), axis=1)


def asymptotic_pair_tests(task, data, metric: str, ok: np.ndarray, alpha: float) -> PairTests:
    """Every pair of the systems ``ok`` tested both ways with the Gaussian capital, Holm at
    ``alpha`` over all ordered pairs (the terms and the procedure of
    :mod:`receval.estimators.anytime.pairs`, F1's of :mod:`receval.estimators.anytime.f1`)."""

    n_ok = int(np.sum(ok))
    stage(f"anytime-asymptotic: paired tests of {metric} ({n_ok * (n_ok - 1) // 2} pairs)")
    st = build_stream(task, data)
    terms = precision_terms(task, data, st)
    horizon = st.pool_horizon
    if metric == "f1":
        return _f1_pair_tests(task, data, st, terms, ok, alpha)
    if metric in ("pooled_recall", "recall"):
        terms = _correct_outputs(terms, data) if data.target_kind == "micro" else (
            pooled_recall_terms(task, data, st))  # fmt: skip
    idx, pairs = ok_pairs(ok)
    threshold = np.log(max(pairs.shape[0], 1) / alpha)
    ready = _step_warm(data, st)

    def part(a, b):
        d = terms.y[a] - terms.y[b]
        width = (terms.hi[a] - terms.lo[b]) - (terms.lo[a] - terms.hi[b])
        act = terms.active[a] & terms.active[b] & (width > 0)
        d = np.where(act, d, 0.0)
        lam = gaussian_pair_bets(d, act, horizon, threshold, ready[a] & ready[b])
        up = running_top(gaussian_path(lam, d))
        down = running_top(gaussian_path(lam, -d))
        return (up, down, *step_moments(d, act))

    out = chunked(pairs, terms.y.shape[1], part)
    return decide(pairs, out, terms.y.shape[0], idx, alpha, terms.exact)


def _correct_outputs(terms: SystemTerms, data) -> SystemTerms:
    """n_i times the precision terms (:func:`receval.estimators.anytime.pairs
    .correct_output_terms`, from the stream already built)."""
    n = np.asarray(data.sizes, float)[:, None]
    exact = None if terms.exact is None else terms.exact * n[:, 0]
    return SystemTerms(terms.y * n, terms.lo * n, terms.hi * n, terms.active, exact)


def _f1_pair_tests(task, data, st, terms: SystemTerms, ok, alpha: float) -> PairTests:
    """F1's pairs (:func:`receval.estimators.anytime.f1.f1_pair_tests`) with the Gaussian
    capital: ψ is concave, so log M_t(w) = Σ ψ(λ_s D_s(w)) is concave in w (D affine in w) and
    its least value over T's interval is at an end, as for the betting capital."""

    facts = true_facts(task, data, st, alpha * T_SHARE)
    n = np.asarray(data.sizes, float)
    idx, pairs = ok_pairs(ok & (n > 0))
    threshold = np.log(max(pairs.shape[0], 1) / alpha)
    horizon = st.pool_horizon
    ready = _step_warm(data, st)

    def part(a, b):
        c = np.sqrt(n[a] * n[b])[:, None]
        r = np.sqrt(n[a] / n[b])[:, None]
        ya, yb = terms.y[a], terms.y[b]
        A, B = ya - yb, r * ya - yb / r
        act = terms.active[a] & terms.active[b]
        w_ref = _w(facts.reference[None, :], c)
        lam = gaussian_pair_bets(np.where(act, A + w_ref * (B - A), 0.0), act, horizon, threshold,
                                 ready[a] & ready[b])  # fmt: skip
        w_lo, w_hi = _w(facts.lower, c), _w(facts.upper, c)
        d_lo = np.where(act, A + w_lo * (B - A), 0.0)
        d_hi = np.where(act, A + w_hi * (B - A), 0.0)
        up = running_top(np.minimum(gaussian_path(lam, d_lo), gaussian_path(lam, d_hi)))
        down = running_top(np.minimum(gaussian_path(lam, -d_lo), gaussian_path(lam, -d_hi)))
        return (up, down, *_binding_moments(d_lo, d_hi, act))

    out = chunked(pairs, terms.y.shape[1], part)
    ordered = _census_order(pairs, np.isfinite(terms.exact) if terms.exact is not None else
                            np.zeros(n.size, bool), terms, n, facts)  # fmt: skip
    return decide(pairs, out, n.size, idx, alpha * (1.0 - T_SHARE), ordered=ordered)


# ----------------------------------------------------------------------------- the method


def stream_ess(task, data) -> tuple[np.ndarray, np.ndarray]:
    """Per system the Kish effective sample size (Σw)²/Σw² of its precision weights t_i/q over
    the stream's draws that cover it, and of its pooled-recall terms g_i f/σ (NaN: none)."""

    st = build_stream(task, data)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(st.own > 0, data.target[st.fact] / st.q[:, None], 0.0)
        g = (
            data.member[st.fact]
            * np.where(st.pool_sigma > 0, st.label / st.pool_sigma, 0.0)[:, None]
        )
    return kish(w), kish(g)


ASSUMPTIONS = [
    "asymptotic: the coverage at every look holds as the number of draws grows (time-uniform "
    "central limit theory); at few draws or heavy-tailed importance weights the error can "
    "exceed alpha (flagged in note below an effective sample size of "
    f"{MIN_ASYMPTOTIC_ESS}); --intervals anytime has a guarantee at every number of draws",
    "the draws of each source of a round i.i.d. (as receval sample draws them), their terms of "
    "finite variance, no few draws dominating it (Lindeberg)",
    "each sampler's rows in samples.tsv in the order they were drawn; a round marked order = "
    "random in the random order drawn with it",
    "pool coverage and the true facts' interval for F1's pairs: the betting sequences over the "
    "exhaustive units (non-asymptotic), whose number and choice the design fixes",
]


class AsymptoticIntervals(AnytimeIntervals):
    """Asymptotic confidence sequences valid at every look as the draws grow (module
    docstring); no bootstrap replicates."""

    name: ClassVar[str] = "anytime-asymptotic"
    summary: ClassVar[str] = (
        "the same looks as anytime with Gaussian confidence sequences, valid as the draws grow "
        "(i.i.d. draws, finite variance); narrower at early looks, not to be trusted with few "
        "draws or skewed importance weights"
    )

    def check(self, options: Any) -> None:
        try:
            super().check(options)
        except ValueError as err:
            message = str(err).replace("'anytime'", f"'{self.name}'")
            if self.name not in message:
                message += f" (intervals={self.name!r})"
            raise ValueError(message) from None

    def label(self, options: Any, B: int | None) -> str:
        judged = ", prediction-powered precision" if _judged(options) else ""
        return (
            f"asymptotic anytime confidence sequence {options.confidence:.0%} (Gaussian capital, "
            f"bets tuned to the rounds drawn; Waudby-Smith et al. 2024){judged}, valid at every "
            "look as draws grow (i.i.d. draws, finite variance)"
        )

    def bounds(self, ctx: ScoringContext) -> AnytimeBounds:
        if self._cached is None or self._cached[0] is not ctx:
            bounds = asymptotic_bounds(
                ctx.task, ctx.data, ctx.options.confidence, judge=_judged(ctx.options)
            )
            self._cached = (ctx, bounds)
        return self._cached[1]

    #: the paired tests (``sample --until-decided --intervals anytime-asymptotic`` reads them)
    def pair_tests(self, ctx: ScoringContext, metric: str, ok: np.ndarray) -> PairTests:
        """The paired Gaussian tests of ``metric`` among the systems ``ok`` (what the tiers and
        ``sample --until-decided --intervals anytime-asymptotic`` decide by), Holm over all
        pairs; the judge's predictions are not used here."""
        return asymptotic_pair_tests(ctx.task, ctx.data, metric, ok, 1.0 - ctx.options.confidence)

    def comparisons(self, ctx, point, replicates, metric):
        alpha = 1.0 - ctx.options.confidence
        micro = metric != "f1" or ctx.data.target_kind == "micro"
        if metric in PAIRED and ctx.data.K and micro:
            ok = ~np.isnan(np.asarray(point, float))
            tests = asymptotic_pair_tests(ctx.task, ctx.data, metric, ok, alpha)
            procedure = "asymptotic-pairs-f1" if metric == "f1" else "asymptotic-pairs"
            return AsymptoticComparisons(tests.better, tests.pvalues, procedure, alpha, 0)
        m_alive = max(int((ctx.data.sizes > 0).sum()), 1)
        lower, upper = simultaneous_bounds(self.bounds(ctx), metric, alpha, m_alive)
        ok = ~np.isnan(point) & ~np.isnan(lower) & ~np.isnan(upper)
        better = (lower[:, None] > upper[None, :]) & ok[:, None] & ok[None, :]
        pvalues = np.where(better | better.T, alpha, 1.0)
        pvalues[~(ok[:, None] & ok[None, :])] = np.nan
        return AsymptoticComparisons(better, pvalues, "asymptotic", alpha, 0)

    def system_notes(self, ctx: ScoringContext, notes: list[list[str]]) -> None:
        """Flag every system whose stream's effective sample size is below
        :data:`MIN_ASYMPTOTIC_ESS` (the Gaussian approximation is then not to be trusted)."""
        if not ctx.data.K:
            return
        precision, recall = stream_ess(ctx.task, ctx.data)
        census = np.asarray(ctx.data.census, bool)
        for i in range(ctx.data.m):
            for metric, ess in (("precision", precision[i]), ("pooled_recall", recall[i])):
                if metric == "precision" and census[i]:
                    continue
                if np.isfinite(ess) and 0 < ess < MIN_ASYMPTOTIC_ESS:
                    notes[i].append(
                        f"{metric}: flagged: asymptotic interval on an effective sample size "
                        f"{ess:.1f} (< {MIN_ASYMPTOTIC_ESS}) of the stream's draws: may "
                        "undercover (--intervals anytime holds at every sample size)"
                    )

    def record(self, ctx: ScoringContext) -> IntervalRecord:
        out = super().record(ctx)
        block = {}
        block["method"] = self.name
        block["what"] = (
            "asymptotic confidence sequences: per hypothesised value a Gaussian test "
            "supermartingale sum psi(lambda_k Y_k), psi(x) = x - x^2/2 (1/2 from x = 1), with "
            "the betting sequences' predictable bets tuned to the draws of the rounds started "
            "so far, no range truncation; rejected where its running maximum reaches 2/alpha "
            "(Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas 2024: time-uniform central limit "
            "theory); valid at every look as the draws grow"
        )
        block["guarantee"] = "asymptotic time-uniform coverage (not a non-asymptotic guarantee)"
        block["assumptions"] = ASSUMPTIONS
        block["splits"] = (
            "recall and f1: theta's betting sequence at alpha/2 and the one-stream test at "
            "alpha/2 read at theta's ends (micro, rounds in a random order; otherwise products "
            "of the factors' ends at alpha/2 or alpha/3); comparisons: paired Gaussian tests per "
            "ordered pair, Holm over all of them (f1: at both ends of the true facts' betting "
            "sequence at 0.2 alpha)"
        )
        block["min_effective_sample_size"] = MIN_ASYMPTOTIC_ESS
        return out.replace(
            intervals=out.intervals.replace(**block),
            ranking={**out.ranking, "procedure": self.name},
        )


class AsymptoticComparisons(AnytimeComparisons):
    """Comparisons from the asymptotic sequences (no replicates: ``B`` = 0)."""

    def describe(self) -> str:
        what = {
            "asymptotic-pairs": "a Gaussian test supermartingale of the paired difference per "
            "ordered pair (both systems' terms from the same draws), Holm over all S(S-1) "
            "one-sided hypotheses",
            "asymptotic-pairs-f1": "a Gaussian test supermartingale of the weighted precision "
            "difference whose sign is F1's, at both ends of the true facts' interval, "
            "Holm over all S(S-1) one-sided hypotheses",
        }.get(self.procedure, "every system's sequence at alpha/m, i better than j when its "
              "lower end exceeds j's upper end")  # fmt: skip
        return (
            f"anytime-asymptotic: {what}; family-wise error <= {self.alpha:g} over all pairs "
            "and all looks as the draws grow (asymptotic)"
        )
