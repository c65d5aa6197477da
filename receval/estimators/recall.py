"""Recall: pool coverage θ, pooled recall ν (naive and importance-reweighted), true recall θ·ν.

Chaganty et al. 2017 factorise true recall as r_i = θ · ν_i, where θ = E_{p0}[g(x)] is the share
of all correct facts that some system output (the pool's recall) and ν_i = E_{p0}[g_i(x) | x ∈ X]
is system i's share of the pool's correct facts.  θ comes from exhaustive annotation of sampled
units (documents), ν_i from the labelled per-system samples.  As for precision, every estimator
here is a sum (or a ratio of sums) over draws or units, returned as per-row terms so that one
bootstrap engine can resample them.
"""

from __future__ import annotations

import numpy as np

from receval.estimators.sample_data import SampleData


def pool_coverage_terms(data: SampleData) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit numerator and denominator of θ̂ (each of shape (U,)).

    θ̂ = Σ_u a_u / π_u  /  Σ_u b_u / π_u  — a_u correct facts found in unit u that some system output,
    b_u correct facts found in u, π_u the unit's selection probability (constant for uniform
    designs).  This is the notes' θ̂ = (1/n_0) Σ_{x ∈ Ŷ_0} g(x) with the draws clustered by unit
    (Chaganty et al. 2017, "pool recall"); a ratio estimator: consistent, with O(1/U) bias.
    """
    return data.unit_pooled * data.unit_weight, data.unit_found * data.unit_weight


def simple_recall_terms(data: SampleData) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit terms of the exhaustive-only ("simple") recall estimator: (U × m) and (U,).

    r̂_i^simple = Σ_u c_ui / π_u  /  Σ_u b_u / π_u — the share of exhaustively found correct facts
    that system i output (Chaganty et al. 2017, simple recall).  Consistent (ratio estimator).
    """
    return data.unit_by_system * data.unit_weight[:, None], data.unit_found * data.unit_weight


def full_support_proposal(data: SampleData) -> np.ndarray:
    """q0(x) = Σ_j (n_j / N) s_j(x) at the drawn facts (D,): the balance mixture of all samplers.

    Its support is the union of all sampled systems' outputs, so a correct fact found only by
    systems disjoint from i still enters ν̂_i's denominator (the support caveat in the notes).
    """
    total = data.sampler_n.sum()
    if total <= 0:
        return np.zeros(data.label.size)
    return data.proposal @ (data.sampler_n / total)


def pooled_recall_terms(data: SampleData) -> tuple[np.ndarray, np.ndarray]:
    """Per-draw numerator (K × m) and denominator (K,) terms of the reweighted pooled recall.

    ν̂_i = Σ_k g_i(x_k) f(x_k) / q0(x_k)  /  Σ_k f(x_k) / q0(x_k)   (each term × 1/N)

    — self-normalised importance sampling over the judged-correct draws with the full-support
    proposal q0 (Chaganty et al. 2017, ν̂_i with the appendix's common q, w_j ∝ n_j).  Consistent
    (ratio estimator).  The denominator's total, Σ_k f/(N q0), is an unbiased estimate of the number
    of correct facts in the sampled pool (Horvitz–Thompson form).
    """
    q0 = full_support_proposal(data)
    total = data.sampler_n.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(q0 > 0, data.label / (q0 * total), 0.0)  # (D,)
    den = weight[data.draw_fact]
    num = data.member[data.draw_fact] * den[:, None]
    return num, den


def naive_pooled_recall(data: SampleData, drawn_counts: np.ndarray) -> np.ndarray:
    """Closed-world pooled recall over the judged facts: |J⁺ ∩ X_i| / |J⁺|.

    J⁺ is the set of distinct drawn facts judged correct (``drawn_counts`` (..., D) > 0 says which
    facts a (replicate) sample contains).  This is the biased baseline: facts of systems that were
    sampled more, or that share many facts, are over-represented in J⁺.
    """
    present = (drawn_counts > 0) * data.label  # (..., D)
    num = present @ data.member.astype(float)  # (..., m)
    den = present.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def true_recall(theta: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """r̂_i = θ̂ · ν̂_i (Chaganty et al. 2017, joint recall); θ̂ and ν̂ come from independent samples."""
    return theta * nu


def f1_score(precision: np.ndarray, recall: np.ndarray) -> np.ndarray:
    """F1 = 2PR / (P + R) (0 when both are 0; NaN when either is NaN)."""
    precision = np.asarray(precision, float)
    recall = np.asarray(recall, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = precision + recall
        out = np.where(total > 0, 2 * precision * recall / np.where(total > 0, total, 1.0), 0.0)
    return np.where(np.isnan(precision) | np.isnan(recall), np.nan, out)
