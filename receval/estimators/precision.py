"""Precision from per-system samples: simple and joint (importance-reweighted) estimators.

Both estimators are sums over draws, so each is returned as a (K × m) matrix of per-draw
*terms*: the estimate is the column sum, and the bootstrap engine resamples rows
(:mod:`receval.estimators.bootstrap`).  References: Chaganty, Paranjape, Liang & Manning,
"Importance sampling for unbiased on-demand evaluation of knowledge base population", EMNLP 2017,
§3 and appendix Theorem 1.
"""

from __future__ import annotations

import numpy as np

from receval.estimators.sample_data import SampleData

WEIGHTINGS = ("size", "overlap")


def mixture_weights(data: SampleData, weighting: str = "size") -> np.ndarray:
    """The mixture weights w_ij (m × J), each row summing to 1.

    * ``"size"``: w_ij ∝ n_j — the balance heuristic; q_i = q is the same for every system and the
      estimator is the deterministic-mixture estimator (1/N) Σ_all draws t_i f / q.
    * ``"overlap"``: the paper's heuristic w_ij ∝ n_j Σ_x t_i(x) s_j(x) (Chaganty et al. 2017, §3),
      which gives samplers of systems disjoint from i no weight.
    """
    n = data.sampler_n
    if weighting == "size":
        w = np.broadcast_to(n, (data.m, data.J)).astype(float)
    elif weighting == "overlap":
        w = n[None, :] * data.overlap
    else:
        raise ValueError(f"unknown weighting {weighting!r} (known: {', '.join(WEIGHTINGS)})")
    total = w.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, w / total, 0.0)


def joint_precision_terms(
    data: SampleData, weighting: str = "size", *, label: bool = True
) -> np.ndarray:
    """Per-draw terms of the joint precision estimator (K × m).

    With ``label=False`` the terms leave out f(x): their column sum Σ t_i/q_i estimates 1
    (unbiased), and the ratio of the two sums is the self-normalised (Hájek) joint precision,
    always within [0, 1], consistent, with O(1/n) bias (Owen, *Monte Carlo theory, methods and
    examples*, 2013, §9.2).

    π̂_i = Σ_j (w_ij / n_j) Σ_{x ∈ X̂_j} t_i(x) f(x) / q_i(x),  q_i(x) = Σ_j w_ij s_j(x)
    (Chaganty et al. 2017, eq. for π̂_i^joint; unbiased by appendix Theorem 1 whenever q_i > 0 on
    X_i, i.e. whenever the samplers with w_ij > 0 cover every output of system i).  Columns of
    systems that are not covered are NaN: see :func:`precision_support`.
    """
    w = mixture_weights(data, weighting)  # (m, J)
    q = data.proposal @ w.T  # (D, m)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = data.label[:, None] if label else 1.0
        ratio = np.where(data.target > 0, data.target * f / q, 0.0)  # (D, m)
        scale = np.where(data.sampler_n > 0, 1.0 / data.sampler_n, 0.0)  # (J,)
    terms = (w.T[data.draw_sampler] * scale[data.draw_sampler, None]) * ratio[data.draw_fact]
    covered = precision_support(data, weighting)
    terms[:, ~covered] = np.nan
    return terms


def precision_support(data: SampleData, weighting: str = "size") -> np.ndarray:
    """Whether q_i > 0 on all of X_i (m,): the joint estimator of system i is unbiased only then.

    Coverage is exact: the mass Σ_x t_i(x) 1[q_i(x) > 0] is 1 iff some sampler with w_ij > 0 is
    a distribution over a superset of X_i.  We check it with the overlaps: system i is covered when
    one of its own samplers has weight (its s_j has full support on X_i by construction).
    """
    w = mixture_weights(data, weighting)
    own = data.sampler_system[None, :] == np.arange(data.m)[:, None]  # (m, J)
    return ((w > 0) & own & (data.sampler_n[None, :] > 0)).any(axis=1)


def simple_precision_terms(data: SampleData) -> np.ndarray:
    """Per-draw terms of the simple precision estimator (K × m): each system's own sample only.

    π̂_i^simple = (1/n_i) Σ_{x ∈ X̂_i} t_i(x) f(x) / s_i(x) — the sample mean of f for a uniform
    design (Chaganty et al. 2017, "simple precision"); with several sample rounds of the same
    system, their balance mixture is the proposal.  Unbiased.  Systems without a sample: NaN.
    """
    own = data.sampler_system  # (J,)
    n_own = np.bincount(own, weights=data.sampler_n, minlength=data.m)  # (m,)
    # q_i^own(x) = Σ_{j own} (n_j / n_own_i) s_j(x)
    mix = np.zeros((data.m, data.J))
    with np.errstate(invalid="ignore", divide="ignore"):
        mix[own, np.arange(data.J)] = np.where(n_own[own] > 0, data.sampler_n / n_own[own], 0.0)
        q = data.proposal @ mix.T  # (D, m)
        ratio = np.where(data.target > 0, data.target * data.label[:, None] / q, 0.0)
    terms = np.zeros((data.K, data.m))
    k = np.arange(data.K)
    i = own[data.draw_sampler]
    with np.errstate(invalid="ignore", divide="ignore"):
        terms[k, i] = ratio[data.draw_fact, i] / n_own[i]
    terms[:, n_own == 0] = np.nan
    return terms
