"""Effective sample sizes of every ratio's denominator, and the flags of numbers not to trust.

Every sample-based number receval reports is a ratio of weighted sums (or a weighted sum whose
weights are a ratio): precision Σ t f/q (/ Σ t/q), pooled recall ν̂ (self-normalised importance
weighting over judged-correct draws), pool coverage θ̂ (a ratio over exhaustive units).  Its
bootstrap interval is trustworthy only when the sum rests on enough independent pieces; the
*effective sample size* says on how many: Kish's n_eff = (Σ w)² / Σ w² over the rows with weight
w (Kish, *Survey Sampling*, 1965, §11.7; for self-normalised importance sampling: Owen, *Monte
Carlo theory, methods and examples*, 2013, §9.3).  n_eff equals the number of rows when all weights
are equal and falls towards 1 when one row dominates.

:data:`MIN_EFFECTIVE` is the flagging threshold.  Why 20: a ratio's relative bias is O(1/n) and its
bootstrap interval's coverage error O(1/√n) for percentile intervals (Hall, *The Bootstrap and
Edgeworth Expansion*, 1992, §3.5); in the issue-9 audit and in ``bench/validity.py`` systems with
5–10 judged draws or 7 exhaustive units covered 0.75–0.88 at a nominal 0.95, while from about 20
pieces on the coverage stayed within Monte Carlo error of the nominal level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from receval.estimators.sample_data import SampleData

#: below this effective sample size a ratio's interval is flagged in ``note``
MIN_EFFECTIVE = 20
#: pooled recall is flagged when fewer judged-correct draws hit the system's facts: ν̂_i's
#: numerator is then a sum of a handful of positive terms and its percentile interval skewed.
#: Lower than MIN_EFFECTIVE because ν̂'s bias is driven by the *common* denominator (large):
#: in bench/validity.py's low-precision world (2–15 hits per system) ν̂ was unbiased (|z| ≤ 1.1)
#: and its 95% intervals covered 0.938.
MIN_CORRECT_HITS = 5
#: precision is flagged when fewer than this many judged draws of the system's facts are wrong
#: (or correct): a proportion's sampling distribution is then bounded and skewed at 1 (or 0),
#: and percentile intervals miss on the open side — the n·p ≥ 5 and n·(1 − p) ≥ 5 rule of
#: the binomial's normal approximation (e.g. Agresti, *Categorical Data Analysis*, §1.4).  In
#: bench/validity.py's high-precision world (0.97–1.0, 30 draws) unflagged precision intervals
#: covered 0.899 at 0.95 without this rule.
MIN_EACH_LABEL = 5


def variance_draws(weights: np.ndarray, axis: int = 0) -> np.ndarray:
    """The number of draws a weighted sum's variance rests on: (Σ w²)² / Σ w⁴ along ``axis``.

    For a sum Σ_k w_k Z_k of independent terms with a common variance σ² and fourth moment, the
    variance is σ² Σ w² and the sum's kurtosis excess is κ Σ w⁴ / (Σ w²)² — that of an
    equally-weighted mean of (Σ w²)² / Σ w⁴ draws (the Lyapunov ratio of the central limit
    theorem).  It equals the number of draws when all weights are equal and falls to the number
    of heavy draws when a few weights dominate the variance — e.g. a system with 30 own draws
    inside a pool of hundreds: the pool's draws land on its shared facts with small weights and
    raise Kish's n_eff, but its variance rests on its few own draws of facts nobody else was
    sampled for.  Label-free (design weights only), so a sample that happens to hit no correct
    fact among the heavy draws cannot hide it.  0 where every weight is 0.
    """
    w = np.abs(np.nan_to_num(np.asarray(weights, float)))
    square = (w**2).sum(axis=axis)
    fourth = (w**4).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.where(fourth > 0, square**2 / fourth, 0.0)


def kish(weights: np.ndarray, axis: int = 0) -> np.ndarray:
    """Kish's effective sample size (Σ w)² / Σ w² along ``axis`` (0 where every weight is 0)."""
    w = np.abs(np.nan_to_num(np.asarray(weights, float)))
    total = w.sum(axis=axis)
    square = (w**2).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(square > 0, total**2 / square, 0.0)


@dataclass(frozen=True)
class EffectiveSizes:
    """Effective sample sizes behind each system's numbers (arrays (m,)) and the pool's."""

    own_draws: np.ndarray  # judged draws of the system's own sample(s)
    precision: np.ndarray  # Kish n_eff of the precision estimator's draw weights t_i/q_i
    correct_hits: np.ndarray  # judged-correct draws whose fact the system output (ν̂_i numerator)
    wrong_hits: np.ndarray  # judged-wrong draws whose fact the system output
    pooled_recall: np.ndarray  # Kish n_eff of ν̂_i's numerator weights
    #: draws the precision estimator's variance rests on (:func:`variance_draws` of t_i/q_i)
    precision_variance: np.ndarray
    #: the same for ν̂_i's linearised weights |g_i − ν̂_i| / q0 (label-free)
    pooled_recall_variance: np.ndarray
    pooled_recall_den: float  # Kish n_eff of ν̂'s common denominator (all judged-correct draws)
    units: int  # exhaustive units (draws of units)
    units_with_facts: int  # units in which some correct fact was found
    pool_coverage: float  # Kish n_eff of θ̂'s denominator weights b_u/π_u
    exhaustive_in_pool: float  # correct exhaustive facts some system output (θ̂'s numerator)


def effective_sizes(
    data: SampleData, mass_terms: np.ndarray, *, own_only: bool = False
) -> EffectiveSizes:
    """Effective sample sizes from the sample arrays and the joint mass terms t_i/q_i (K × m).

    With ``own_only`` (an estimator whose precision rests on the system's own draws only, such as
    ``simple``) precision's n_eff is the number of judged draws of its own sample (uniform
    design) or their Kish size.
    """
    m = data.m
    own_draws = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=m)
    if own_only:
        mine = data.sampler_system[data.draw_sampler][:, None] == np.arange(m)[None, :]
        t = data.target[data.draw_fact]  # (K, m)
        q = data.proposal[data.draw_fact, data.draw_sampler]  # (K,)
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(mine & (q[:, None] > 0), t / q[:, None], 0.0)
        precision = kish(w)
    else:
        precision = kish(mass_terms)
    correct = data.label[data.draw_fact] > 0
    hit = data.member[data.draw_fact] & correct[:, None]
    miss = data.member[data.draw_fact] & (data.label[data.draw_fact] < 1)[:, None]
    from receval.estimators.recall import pooled_recall_terms

    num, den = pooled_recall_terms(data)
    found = data.unit_found * data.unit_weight
    with np.errstate(invalid="ignore", divide="ignore"):
        nu = num.sum(axis=0) / den.sum()
    return EffectiveSizes(
        own_draws=own_draws,
        precision=precision,
        correct_hits=hit.sum(axis=0).astype(float),
        wrong_hits=miss.sum(axis=0).astype(float),
        pooled_recall=kish(num),
        precision_variance=variance_draws(w if own_only else mass_terms),
        pooled_recall_variance=_pooled_variance_draws(data, nu),
        pooled_recall_den=float(kish(den)),
        units=data.U,
        units_with_facts=int((data.unit_found > 0).sum()),
        pool_coverage=float(kish(found)) if data.U else 0.0,
        exhaustive_in_pool=float(data.unit_pooled.sum()),
    )


def _pooled_variance_draws(data: SampleData, nu: np.ndarray) -> np.ndarray:
    """:func:`variance_draws` of ν̂_i's linearised design weights |g_i(x_k) − ν̂_i| / q0(x_k).

    ν̂_i − ν_i ≈ Σ_k (g_i − ν_i) f / (N q0) / B (delta method); leaving out f makes the count
    label-free.  (m,); 0 without draws.
    """
    if data.K == 0:
        return np.zeros(data.m)
    from receval.estimators.recall import full_support_proposal

    q0 = full_support_proposal(data)[data.draw_fact]
    with np.errstate(invalid="ignore", divide="ignore"):
        inv = np.where(q0 > 0, 1.0 / q0, 0.0)
    nu = np.nan_to_num(nu)
    out = np.empty(data.m)
    for i in range(data.m):  # m columns of K draws: no (K × m) float matrix kept
        g = data.member[data.draw_fact, i]
        out[i] = variance_draws(np.abs(g - nu[i]) * inv)
    return out


def reliability_notes(
    sizes: EffectiveSizes, census: np.ndarray, *, minimum: int = MIN_EFFECTIVE
) -> list[list[str]]:
    """Per system, the flags of numbers whose interval cannot be trusted, each saying why."""
    m = census.size
    notes: list[list[str]] = [[] for _ in range(m)]
    for i in range(m):
        if not census[i]:
            notes[i].extend(_precision_notes(sizes, i, minimum))
        notes[i].extend(_pooled_recall_notes(sizes, i, minimum))
    pool = pool_notes(sizes, minimum=minimum)
    if pool:
        for i in range(m):
            notes[i].append(f"recall: flagged: {pool}")
    return notes


def _precision_notes(sizes: EffectiveSizes, i: int, minimum: int) -> list[str]:
    """The precision flag of sampled (not census) system i, if any: the first reason that holds."""
    if 0 < sizes.own_draws[i] < minimum:
        return [
            f"precision: flagged: {int(sizes.own_draws[i])} judged draws of this system's "
            f"sample (< {minimum}): the interval may undercover"
        ]
    if 0 < sizes.precision[i] < minimum:
        return [
            f"precision: flagged: effective sample size {sizes.precision[i]:.1f} (< {minimum}): "
            "the interval may undercover"
        ]
    if 0 < sizes.precision_variance[i] < minimum:
        return [
            f"precision: flagged: its variance rests on about {sizes.precision_variance[i]:.1f} "
            f"draws (< {minimum}; (Σw²)²/Σw⁴ of the draw weights, e.g. few own draws inside a "
            "large pool): the interval may undercover"
        ]
    if sizes.own_draws[i] > 0:
        return _one_sided(sizes, i)
    return []


def _pooled_recall_notes(sizes: EffectiveSizes, i: int, minimum: int) -> list[str]:
    """The pooled-recall flag of system i, if any: the first reason that holds."""
    if sizes.correct_hits[i] == 0 and sizes.pooled_recall_den > 0:
        return [
            "pooled_recall: flagged: no judged-correct draw of this system's facts, "
            "the estimate 0 has no sampling interval"
        ]
    if 0 < sizes.correct_hits[i] < MIN_CORRECT_HITS:
        return [
            f"pooled_recall: flagged: {int(sizes.correct_hits[i])} judged-correct draws of this "
            f"system's facts (< {MIN_CORRECT_HITS}; effective {sizes.pooled_recall[i]:.1f}): "
            "its interval may undercover"
        ]
    if 0 < sizes.pooled_recall_variance[i] < minimum:
        return [
            "pooled_recall: flagged: its variance rests on about "
            f"{sizes.pooled_recall_variance[i]:.1f} draws (< {minimum}; (Σw²)²/Σw⁴ of the "
            "linearised draw weights |g_i − ν̂_i|/q0): its interval may undercover"
        ]
    return []


def _one_sided(sizes: EffectiveSizes, i: int) -> list[str]:
    """The precision flag of a system whose judged draws are (nearly) all of one label."""
    for count, label, end in (
        (sizes.wrong_hits[i], "wrong", "1"),
        (sizes.correct_hits[i], "correct", "0"),
    ):
        if count < MIN_EACH_LABEL:
            return [
                f"precision: flagged: {int(count)} {label} judged draws among this system's "
                f"facts (< {MIN_EACH_LABEL}): near precision {end} the interval may undercover"
            ]
    return []


def partial_rounds_warning(data: SampleData) -> str:
    """A run warning when a sample round after the first drew from only some of the sampled
    systems ('' otherwise).

    Fixed-n intervals assume every sample size was fixed before any label was seen.  A later
    round drawn for some systems only — typically sized after looking at the leaderboard
    (``receval sample --adaptive --system ...``, or by hand) — makes the importance weights of
    the earlier draws depend on earlier labels.  The estimates stay nearly unbiased when every
    open system is topped up alike, but when the top-up goes to a few systems the other systems'
    earlier draws, selected for looking worse, keep large weights in pooled recall's common
    denominator: in ``bench/topup.py``'s null world, sizes from 30 to ~2,000 chosen that way
    biased the topped-up systems' pooled recall by +0.02 (about one half-width) and its 95 %
    intervals covered 0.55.  A bias is not visible in any effective sample size, so this is said
    once per run rather than flagged per system.
    """
    if data.J == 0 or data.sampler_round.size != data.J:
        return ""
    sampled = set(data.sampler_system[data.sampler_n > 0].tolist())
    partial = []
    for r in sorted(set(data.sampler_round.tolist()) - {int(data.sampler_round.min())}):
        drawn = set(data.sampler_system[(data.sampler_round == r) & (data.sampler_n > 0)].tolist())
        if drawn and drawn != sampled:
            partial.append(f"{len(drawn)} of {len(sampled)}")
    if not partial:
        return ""
    return (
        f"sample rounds after the first drew from only some systems ({', '.join(partial)}): if "
        "their sizes were chosen after looking at the labels, the intervals (which assume sizes "
        "fixed in advance) can miss, pooled recall and recall most; top up every open system "
        "alike (receval sample --adaptive plans one common size) or use intervals valid at "
        "every look"
    )


def pool_notes(sizes: EffectiveSizes, *, minimum: int = MIN_EFFECTIVE) -> str:
    """Why pool coverage θ̂ (and so every true recall) cannot be trusted; '' when it can."""
    if sizes.units == 0:
        return ""  # reported separately: recall cannot be estimated at all
    if sizes.exhaustive_in_pool == 0:
        return "no correct exhaustive fact in the pool: pool coverage estimate 0 has no interval"
    if sizes.units_with_facts < minimum:
        return (
            f"pool coverage from {sizes.units_with_facts} exhaustive units with correct facts "
            f"(< {minimum}; effective {sizes.pool_coverage:.1f}): interval may undercover"
        )
    return ""
