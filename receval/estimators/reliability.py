"""Effective sample sizes of every ratio's denominator, and the flags of numbers not to trust.

Every sample-based number receval reports is a ratio of weighted sums (or a weighted sum whose
weights are a ratio): precision Σ t f/q (/ Σ t/q), pooled recall ν̂ (self-normalised importance
weighting over judged-correct draws), pool coverage θ̂ (a ratio over exhaustive units).  Its
bootstrap interval is trustworthy only when the sum rests on enough independent pieces; the
*effective sample size* says on how many: Kish's n_eff = (Σ w)² / Σ w² over the rows with weight
w (Kish, *Survey Sampling*, 1965, §11.7; for self-normalised importance sampling: Owen, *Monte
Carlo theory, methods and examples*, 2013, §9.3).  n_eff equals the number of rows when all weights
are equal and falls towards 1 when one row dominates.  The sizes are reported (``precision_ess``,
``pooled_recall_ess``, pool.csv) and set the small-sample expansion; the flags below rest on
what was measured to undercover.

**Which numbers are flagged, by measurement** (``bench/flags.py``, issue 37).  The bootstrap
intervals are read at the small-sample expanded level (:mod:`receval.estimators.small_sample`),
which already corrects for a variance resting on few draws: with 20 draws per system, systems
whose variance rests on 3–20 draws ((Σw²)²/Σw⁴, uneven samples of 5–120 draws, entity-relation
weights) covered 0.92–1.0, so a count of draws alone no longer flags (the earlier "< 20 draws"
rules flagged 60–100 % of rows in those worlds, and, as issue 37 measured, 62 % of the rows of
63 real TREC runs whose intervals covered).  What the expansion cannot mend is a *boundary*: a proportion whose draws are (nearly)
all of one label has a bounded, skewed sampling distribution the bootstrap cannot see beyond,
and a pooled recall whose numerator rests on a couple of correct draws.  Measured over real data
(ParaBank's 36 and MS MARCO's 5 systems, every pooled output judged; ``data/kbp-sim`` with its
truth) and worlds built to break the intervals (precision 0.02–0.1 and 0.95–1, near-identical
teammates, heavy-tailed weights, uneven samples, a null world), 20 draws per system:

* precision with fewer than :data:`MIN_EACH_LABEL` wrong (or correct) judged draws among the
  system's facts: unflagged coverage 0.93 (precision 0.02–0.1) → 0.96 at 3 (0.88 when only an
  all-one-label sample is flagged); at precision 0.95–1 the unflagged ones covered 1.0;
* pooled recall with fewer than :data:`MIN_CORRECT_HITS` judged-correct draws of the system's
  facts: 0.87 → 0.93 in the low-precision world; elsewhere nothing is flagged and coverage is
  0.95–0.98;
* pool coverage θ̂ (every true recall) from fewer than :data:`MIN_EFFECTIVE` exhaustive units
  with a correct fact (issue 9: 7 units covered 0.75–0.88).

A number flagged for another reason says so in its own note (an interval collapsed to a point,
a top-up after looking: :mod:`receval.estimators.looking`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from receval.estimators.sample_data import SampleData

#: pool coverage is flagged below this many exhaustive units with a correct fact
MIN_EFFECTIVE = 20
#: pooled recall is flagged when fewer judged-correct draws hit the system's facts (module text)
MIN_CORRECT_HITS = 3
#: precision is flagged when fewer than this many judged draws of the system's facts are wrong
#: (or correct): near 1 (or 0) its sampling distribution is bounded and skewed (module text)
MIN_EACH_LABEL = 3


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
    """Per system, the flags of numbers whose interval's coverage is in doubt, each saying why.

    The criteria are the ones :mod:`bench.flags <bench/flags.py>` measured (module docstring):
    precision with fewer than :data:`MIN_EACH_LABEL` judged draws of either label among the
    system's facts, pooled recall (and so recall and F1) with fewer than
    :data:`MIN_CORRECT_HITS` judged-correct draws of its facts, and every true recall when pool
    coverage rests on fewer than ``minimum`` exhaustive units with a correct fact.
    """
    m = census.size
    notes: list[list[str]] = [[] for _ in range(m)]
    for i in range(m):
        if not census[i] and sizes.own_draws[i] > 0:
            notes[i].extend(_one_sided(sizes, i))
        notes[i].extend(_pooled_recall_notes(sizes, i))
    pool = pool_notes(sizes, minimum=minimum)
    if pool:
        for i in range(m):
            notes[i].append(f"recall: flagged: {pool}")
    return notes


def _pooled_recall_notes(sizes: EffectiveSizes, i: int) -> list[str]:
    """The pooled-recall flag of system i, if any."""
    if sizes.correct_hits[i] == 0 and sizes.pooled_recall_den > 0:
        return [
            "pooled_recall: flagged: no judged-correct draw of this system's facts, "
            "the estimate 0 has no sampling interval"
        ]
    if 0 < sizes.correct_hits[i] < MIN_CORRECT_HITS:
        return [
            f"pooled_recall: flagged: {int(sizes.correct_hits[i])} judged-correct draws of this "
            f"system's facts (< {MIN_CORRECT_HITS}): its numerator rests on them and the "
            "interval may undercover"
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
                f"facts (< {MIN_EACH_LABEL}): near precision {end} the interval may undercover "
                "(the bootstrap sees too few draws of the rarer label)"
            ]
    return []


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
