"""Small-sample expansion of bootstrap intervals: how many draws each metric's variance rests on.

A bootstrap interval of a sum of n i.i.d. draws is too narrow for small n for two reasons: the
bootstrap variance of a mean is (n − 1)/n times the unbiased one (the bootstrap resamples n of n
draws), and the interval uses normal-like quantiles where the studentised statistic has Student
t_{n−1} tails.  With n = 10 draws per system a nominal 95 % percentile interval then covers about
P(|T_9| ≤ 1.96 √(9/10)) ≈ 0.91 — what bench/ppi.py measured for ``joint`` and ``ppi`` (0.85–0.92
at n = 10).  The *expanded percentile interval* (Hesterberg, "What teachers should know about the
bootstrap", *The American Statistician* 69, 2015, §5.2) undoes both: it reads the replicates at
the level α' with

    Φ⁻¹(1 − α'/2) = √(n/(n − 1)) · t_{n−1, 1 − α/2},

which for a normal mean gives exactly the t interval; it changes nothing as n grows
(n = 30: 1.06 × the quantile distance, n = 100: 1.02 ×, n = 1000: 1.002 ×).

For a weighted sum over several samplers "n" is the number of draws the variance rests on, the
Satterthwaite degrees of freedom (+1) of its variance estimate Σ w_k² (y_k − ȳ)²: with equal
per-draw variance that is (Σ w²)² / Σ w⁴ over the design weights
(:func:`receval.estimators.reliability.variance_draws`, label-free).  The reliability flags
already compute it per system for precision and pooled recall (the same design weights for the
``joint``, ``ppi`` and ``simple`` estimators); pool coverage θ̂ rests on the exhaustive units in
which a correct fact was found; true recall θ̂·ν̂ combines the two by Satterthwaite's formula
with the relative variances of θ̂ and ν̂ from the shared replicates; F1 takes the smaller of
precision's and recall's counts; the pool's correct facts the Kish size of the judged-correct
draws; the universe's correct facts Ŷ/θ̂ and precision at a target recall take θ̂'s and
precision's counts.  Every interval of ``--intervals bootstrap`` (percentile, basic and BCa alike)
is read at the expanded level; the paired tests behind tiers and rank sets are unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from receval.estimators.bootstrap import BootstrapRun
    from receval.estimators.reliability import EffectiveSizes


def expanded_alpha(alpha: float, draws: np.ndarray | None, size: int) -> np.ndarray:
    """Per column the two-sided level α' at which to read the replicates (Hesterberg 2015).

    ``draws`` (size,) is the number of draws each column's variance rests on; a column with
    none (NaN, 0 or infinite: a census, a quantity without a count) keeps α.  Fewer than 2
    draws count as 2 (no variance estimate: the widest expansion, t_1).
    """
    from scipy.special import ndtr
    from scipy.stats import t as student

    out = np.full(size, float(alpha))
    if draws is None:
        return out
    n = np.asarray(draws, float)
    use = np.isfinite(n) & (n > 0)
    n = np.maximum(np.where(use, n, 2.0), 2.0)
    z = np.sqrt(n / (n - 1.0)) * student.ppf(1.0 - alpha / 2.0, n - 1.0)
    return np.where(use, 2.0 * ndtr(-z), out)


def metric_draws(sizes: EffectiveSizes, run: BootstrapRun) -> dict[str, np.ndarray]:
    """The number of draws each metric's variance rests on, per system (see the module text)."""
    units = float(sizes.units_with_facts)
    theta_draws = np.array([units if sizes.units else np.nan])
    precision = np.asarray(sizes.precision_variance, float)
    pooled = np.asarray(sizes.pooled_recall_variance, float)
    recall = _satterthwaite(run, pooled, units)
    return {
        "precision": precision,
        "pooled_recall": pooled,
        "recall": recall,
        "f1": np.fmin(precision, recall),
        "pool_coverage": theta_draws,
        "pool_correct": np.array([float(sizes.pooled_recall_den)]),
    }


def _satterthwaite(run: BootstrapRun, pooled: np.ndarray, units: float) -> np.ndarray:
    """Draws behind θ̂·ν̂_i: (v_θ + v_ν)² / (v_θ²/(n_θ − 1) + v_ν²/(n_ν − 1)) + 1 with the
    relative replicate variances v of θ̂ and ν̂_i (delta method for a product of independent
    estimates); ν̂_i's count alone where θ̂ does not vary."""
    import warnings

    if len(run.replicates["pooled_recall"]) < 2:  # no replicates (e.g. anytime intervals)
        return pooled
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: no θ̂ or ν̂_i
        theta = run.point["pool_coverage"][..., 0]
        nu = run.point["pooled_recall"]
        v_theta = np.nanvar(run.replicates["pool_coverage"][..., 0]) / theta**2
        v_nu = np.nanvar(run.replicates["pooled_recall"], axis=0) / nu**2
        if not (np.isfinite(v_theta) and v_theta > 0 and units > 1):
            return pooled
        df_theta, df_nu = units - 1.0, np.maximum(pooled - 1.0, 1.0)
        df = (v_theta + v_nu) ** 2 / (v_theta**2 / df_theta + v_nu**2 / df_nu)
    return np.where(np.isfinite(df) & (v_nu >= 0), df + 1.0, pooled)
