"""Annotator resampling: let disagreement between annotators widen the bootstrap intervals.

By default every interval receval reports is *conditional on the merged labels*: the labels that
:func:`receval.merge.merge_labels` derives from the annotators' votes are treated as the truth,
and only the sampling of draws (and exhaustive units) is random.  When annotators err, the merged
label of a fact is itself a random variable, and an interval that ignores it can miss the latent
truth even though it covers the merged labels (issue 20: three annotators at 10 % independent
error, majority merge: 0.94 against the merged labels, 0.85–0.91 against the truth).

With ``annotator_resampling`` every bootstrap replicate also redraws the votes: within each
drawn fact the v non-ignored votes are resampled with replacement (so the number of correct
votes is Binomial(v, c/v) for c correct of v), and the resampled votes are merged again with the
task's rule and tie policy.  This is a two-stage bootstrap (Davison & Hinkley, *Bootstrap Methods
and their Application*, 1997, §3.8: resampling both the first-stage units and, within them, the
second-stage observations); facts whose votes all agree keep their label, so only disagreement
adds variance.  It does not remove the bias of a merge rule (a fact that every annotator gets
wrong stays wrong), and a fact with one vote cannot show disagreement.

The resampled labels enter centred, δ_b = f*_b − E*[f*] (see :func:`resample_annotators`).
Every draw term is affine in the draw's label f (joint precision t f/q, pooled recall g f/q0 and
f/q0; the self-normalising mass does not involve f), so a replicate's draw totals with labels f*
are the totals with the merged labels plus Σ_k c_bk δ_b(x_k) (T1 − T0)_k, T1 and T0 the
terms with every label set to 1 and to 0.  Only draws of disputed facts enter the correction, so
the cost is one (B × disputed draws) product.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from receval.estimators.bootstrap import BootstrapRun, Replicates
from receval.merge import decide_labels

#: ``--annotator-resampling`` resamples the draws stage only; this stage name carries the labels
DRAWS = "draws"


def drawn_votes(task: Any, facts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(correct, wrong) non-ignored vote counts of each drawn fact (D,) (0, 0 without votes)."""
    votes = task.merged.votes.set_index("fact")
    correct = votes["correct"].reindex(facts).fillna(0).to_numpy(np.int64)
    wrong = votes["wrong"].reindex(facts).fillna(0).to_numpy(np.int64)
    return correct, wrong


def label_replicates(
    correct: np.ndarray,
    wrong: np.ndarray,
    B: int,
    rng: np.random.Generator,
    *,
    rule: str = "majority",
    tie: str = "half",
) -> tuple[np.ndarray, np.ndarray]:
    """Re-merged labels of the disputed facts in ``B`` vote resamples.

    Returns (indices of the facts whose votes disagree (P,), labels (B × P)).  A label may be
    NaN when the tie policy is ``unjudged`` and a resample ties.
    """
    votes = correct + wrong
    disputed = np.flatnonzero((correct > 0) & (wrong > 0))
    if disputed.size == 0:
        return disputed, np.zeros((B, 0))
    v = votes[disputed]
    c_star = rng.binomial(v[None, :], (correct[disputed] / v)[None, :], size=(B, disputed.size))
    labels = decide_labels(c_star.ravel(), (v[None, :] - c_star).ravel(), rule, tie)
    return disputed, labels.reshape(B, disputed.size)


def expected_labels(
    correct: np.ndarray,
    wrong: np.ndarray,
    merged: np.ndarray,
    *,
    rule: str = "majority",
    tie: str = "half",
) -> np.ndarray:
    """E*[f*] of each fact under vote resampling: Σ_c' Binom(c'; v, c/v) · merge(c', v − c').

    A resample that merges to no label (a tie under ``unjudged``) counts as ``merged``.
    """
    from scipy.stats import binom

    v = correct + wrong
    out = np.zeros(v.size)
    for k in range(int(v.max(initial=0)) + 1):  # vote counts: a handful of values
        has = v >= k
        decided = decide_labels(np.full(v.size, k), v - k, rule, tie)
        decided = np.where(np.isnan(decided), merged, decided)
        with np.errstate(invalid="ignore", divide="ignore"):
            pmf = binom.pmf(k, v, np.where(v > 0, correct / np.maximum(v, 1), 0.0))
        out += np.where(has, pmf * decided, 0.0)
    return out


def resample_annotators(
    ctx: Any, estimator: Any, run: BootstrapRun, replicates: Replicates, rng: np.random.Generator
) -> BootstrapRun:
    """``run`` with every replicate's draw totals recomputed under re-merged resampled votes.

    The full-sample (point) estimates are unchanged: they use the merged labels.  Each disputed
    fact's replicate label enters as merged label + (f*_b − E*[f*]): centred, so that the vote
    resampling adds the merged label's variance without moving the replicates' centre (the
    majority of resampled votes is biased towards ½ for a disputed fact: E*[f*] = 20/27 for
    2 correct votes of 3, and uncentred replicates shift the percentile interval away from the
    estimate).  A resampled label that is NaN (a tie under ``unjudged``) counts as merged.
    """
    data, task = ctx.data, ctx.task
    correct, wrong = drawn_votes(task, data.facts)
    config = task.config
    disputed, labels = label_replicates(
        correct, wrong, replicates.B, rng, rule=config.merge_rule, tie=config.tie_policy
    )
    if disputed.size == 0 or run.totals is None:
        return run
    merged = data.label[disputed]
    labels = np.where(np.isnan(labels), merged[None, :], labels)
    expected = expected_labels(
        correct[disputed], wrong[disputed], merged, rule=config.merge_rule, tie=config.tie_policy
    )
    delta = labels - expected[None, :]  # (B × P), mean 0 over the vote resamples
    position = np.full(data.label.size, -1, np.int64)
    position[disputed] = np.arange(disputed.size)
    rows = np.flatnonzero(position[data.draw_fact] >= 0)  # draws of disputed facts
    ones = dataclasses.replace(ctx, data=dataclasses.replace(data, label=np.ones_like(data.label)))
    zeros = dataclasses.replace(
        ctx, data=dataclasses.replace(data, label=np.zeros_like(data.label))
    )
    slope = np.nan_to_num(estimator.terms(ones)[DRAWS][rows] - estimator.terms(zeros)[DRAWS][rows])
    counts = replicates.counts[DRAWS][:, rows]  # (B × rows)
    shift = (counts * delta[:, position[data.draw_fact[rows]]]) @ slope  # (B × F)
    full, reps_totals, jack_totals = run.totals
    new_totals = dict(reps_totals)
    new_totals[DRAWS] = reps_totals[DRAWS] + shift  # NaN columns stay NaN
    return BootstrapRun(
        point=run.point,
        replicates=estimator.statistic(ctx)(new_totals),
        jackknife=run.jackknife,
        totals=(full, new_totals, jack_totals),
    )
