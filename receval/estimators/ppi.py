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
strong judge at n = 10.)  The bootstrap resamples each sampler's draws as for the joint
estimator (a draw keeps its fold; the controls have mean zero whatever the folds' sizes).
``--precision-form`` applies as for the joint estimator (the choice is made on the same human
terms): the self-normalised form is (Σ Y − λ Σ A) / Σ M with λ for the linearised ratio.

The known output mass (B_k = M_k − E_j[M], mean zero too) can serve as a second control
variate (a regression estimator, Särndal, Swensson & Wretman 1992, §6.4): ``USE_MASS``.  It is
off: in bench/ppi.py it widened the intervals at n = 10 per system (sd ratio 1.02–1.07 with a
weak judge in simulated worlds, and with the ParaBank NLL judge) and gained little at n = 30.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from receval.errors import BundleError
from receval.estimators.base import (
    Estimator,
    ScoringContext,
    Statistic,
    TermLayout,
    metric_dict,
    unit_layout,
    unit_terms,
)
from receval.estimators.joint import JointEstimator, unsupported_precision_notes
from receval.estimators.precision import joint_precision_terms
from receval.estimators.recall import pooled_recall_terms
from receval.estimators.sample_data import SampleData

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


def judge_totals(task, data: SampleData, target: str = "micro", weighting: str = "size"):
    """The judge's scores at the drawn facts and the controls' per-sampler expectations.

    For the precision of system i with mixture weights w_ij (:func:`mixture_weights`) and
    q_i = Σ_j w_ij s_j:  E_j[S_i] = (w_ij/n_j) Σ_x s_j(x) t_i(x) s(x)/q_i(x) and E_j[M_i] the
    same without s; for pooled recall with q0 = Σ_j (n_j/N) s_j:  E_j[g_i s/(N q0)],
    E_j[g_i/(N q0)], E_j[s/(N q0)], E_j[1/(N q0)].  Facts of one equivalence class count once,
    as in :class:`SampleData` (a class takes its canonical fact's score); unscored facts take
    the imputed score of :func:`receval.judge.fact_scores`.
    """
    from scipy import sparse

    from receval.estimators.precision import mixture_weights
    from receval.estimators.sample_data import design_probabilities, query_targets
    from receval.formats.coded import codes_in
    from receval.judge import fact_scores

    scores, scored = fact_scores(task)
    view, probabilities, _ = design_probabilities(task, True)
    out = view.outputs
    m, J = data.m, data.J
    sys_codes = codes_in(out["system"], pd.Index(data.systems)).astype(np.int64)
    fact = out["fact"].to_numpy(np.int64)
    s = scores[fact]
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

    prec_s = per_system(inv_q * s) * scale
    prec_m = per_system(inv_q) * scale
    num_s = per_system(inv_q0[fact] * s)
    num_m = per_system(inv_q0[fact])
    den_s = np.asarray(P.T @ (inv_q0 * scores)).ravel()
    den_m = np.asarray(P.T @ inv_q0).ravel()
    size = np.bincount(sys_codes, minlength=m).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.bincount(sys_codes, weights=scored[fact], minlength=m) / size
    return JudgeTotals(
        score_drawn=scores[data.facts],
        scored_drawn=scored[data.facts],
        expected_score=np.concatenate([prec_s.T, num_s.T, den_s[:, None]], axis=1),
        expected_mass=np.concatenate([prec_m.T, num_m.T, den_m[:, None]], axis=1),
        scored_share=share,
        judge_precision=np.bincount(sys_codes, weights=t * s, minlength=m),
    )


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


def _quantity_terms(data: SampleData, judge: JudgeTotals, weighting: str):
    """Per-draw (Y, S, M), each K × (2m + 1): human, judge and mass terms of every quantity."""
    with_score = dataclasses.replace(data, label=judge.score_drawn)
    with_one = dataclasses.replace(data, label=np.ones_like(data.label))
    y_num, y_den = pooled_recall_terms(data)
    s_num, s_den = pooled_recall_terms(with_score)
    m_num, m_den = pooled_recall_terms(with_one)
    Y = np.concatenate([joint_precision_terms(data, weighting), y_num, y_den[:, None]], axis=1)
    S = np.concatenate([joint_precision_terms(with_score, weighting), s_num, s_den[:, None]], 1)
    M = np.concatenate(
        [joint_precision_terms(data, weighting, label=False), m_num, m_den[:, None]], axis=1
    )
    return Y, S, M


#: the positive-part shrinkage of the coefficients is max(0, 1 − SHRINK · p / F)
SHRINK = 1.0
#: whether the known output mass is used as a second control variate
USE_MASS = False


def shrunk_slope(zy: np.ndarray, zz: np.ndarray, yy: np.ndarray, n_eff: np.ndarray) -> np.ndarray:
    """The judge coefficient from a fold's sums: clip(Σzy/Σzz, 0, 1) times the positive-part
    factor max(0, 1 − SHRINK/F), F = ν R²/(1 − R²), R² = λ Σzy / Σyy, ν = ``n_eff``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = zz > 0
        lam = np.where(ok, np.clip(zy / np.where(ok, zz, 1.0), 0.0, 1.0), 0.0)
        r2 = np.clip(np.where(yy > 0, lam * zy / yy, 0.0), 0.0, 1.0)
        F = np.where(r2 < 1.0, n_eff * r2 / (1.0 - r2), np.inf)
        shrink = np.where(n_eff > 0, np.clip(1.0 - SHRINK / F, 0.0, 1.0), 0.0)
        lam = lam * np.where(np.isfinite(shrink), shrink, 0.0)
    return np.where(np.isfinite(lam), lam, 0.0)


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
        n_eff = moments["M"][..., n] ** 2 / moments["MM"][..., n] - 2.0
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
        has_b = (BB > 1e-12 * np.maximum(MM, 1e-300)) & USE_MASS
        det = AA * BB - AB**2
        joint_slope = np.where(has_b, (AY * BB - BY * AB) / det, AY / AA)
        ok_a = AA > 1e-12 * np.maximum(MM, 1e-300)
        lam = np.where(ok_a & np.isfinite(joint_slope), np.clip(joint_slope, 0.0, 1.0), 0.0)
        mu = np.where(has_b, np.clip((BY - lam * AB) / BB, -1.0, 1.0), 0.0)
        mu = np.where(np.isfinite(mu), mu, 0.0)
        explained = lam * AY + mu * BY
        syy = YY - MY**2 / MM
        r2 = np.clip(np.where(syy > 0, explained / syy, 0.0), 0.0, 1.0)
        n_eff = M1**2 / MM - 2.0
        p = 1.0 + has_b
        F = np.where(r2 < 1.0, n_eff * r2 / (1.0 - r2), np.inf)
        shrink = np.where(n_eff > 0, np.clip(1.0 - SHRINK * p / F, 0.0, 1.0), 0.0)
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
        "the judge's scores on every output, λ cross-fitted over two folds (unbiased for any "
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

    def check(self, task, options: Any) -> None:
        if task is None or getattr(task, "judge", None) is None or not len(task.judge):
            where = task.root / "judge.tsv" if task is not None else "judge.tsv"
            raise BundleError(
                where,
                None,
                "--estimator ppi needs the judge's scores: judge.tsv (or .csv/.parquet) with "
                "query_id, answer, judge_score in [0, 1]",
            )
        if options.cluster_queries:
            raise ValueError("estimator 'ppi' does not resample queries as clusters yet")

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
        cache = ctx.__dict__.setdefault("_ppi_cache", {})
        if "judge" not in cache:
            options = ctx.options
            cache["judge"] = judge_totals(ctx.task, ctx.data, options.target, options.weighting)
        return cache["judge"]

    def terms(self, ctx: ScoringContext) -> dict[str, np.ndarray]:
        data = ctx.data
        judge = self.judge(ctx)
        layout = self.draw_layout(data.m)
        Y, S, M = _quantity_terms(data, judge, ctx.options.weighting)
        A = S - judge.expected_score[data.draw_sampler]  # mean zero within every sampler
        B = M - judge.expected_mass[data.draw_sampler]
        folds = draw_folds(data)
        draws = np.zeros((data.K, layout.width))
        draws[:, layout["Y"]] = Y
        draws[:, layout["mass"]] = M[:, : data.m]
        products = {
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
        }
        m = data.m
        num, den = slice(m, 2 * m), slice(2 * m, 2 * m + 1)
        products |= {
            "AM": A[:, :m] * M[:, :m],
            "AnYd": A[:, num] * Y[:, den],
            "AdYn": A[:, den] * Y[:, num],
            "AnAd": A[:, num] * A[:, den],
            "YnYd": Y[:, num] * Y[:, den],
        }
        for a in (0, 1):
            own = (folds == a)[:, None]
            for key, value in products.items():
                draws[:, layout[f"{key}{a}"]] = np.where(own, value, 0.0)
        ctx.__dict__.setdefault("_ppi_cache", {})["full"] = draws.sum(axis=0)
        return {"draws": draws, "units": unit_terms(data)}

    def full_totals(self, ctx: ScoringContext) -> np.ndarray:
        """The draws stage's full-sample totals (the coefficients λ̂ of the point estimate)."""
        cache = ctx.__dict__.setdefault("_ppi_cache", {})
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
                precision = np.where(census, exact, q[..., :m])
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

    def run_info(self, ctx: ScoringContext, run: Any) -> dict[str, Any]:
        """run.json's ``judge`` key: the judge audited against the human labels."""
        return {"judge": judge_audit(ctx, self.judge(ctx), run)}

    def run_warnings(self, ctx: ScoringContext, warnings: list[str]) -> None:
        from receval.estimators.joint import JointEstimator

        JointEstimator().run_warnings(ctx, warnings)


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
        "coefficients": "cross-fitted over two folds per sampler, clipped to [0, 1], shrunk by "
        "max(0, 1 - 1/F); lambda here is the mean of the two folds' values at the full sample",
        "effective_extra_labels": "n_i * (Var(joint) / Var(ppi) - 1) over the same bootstrap "
        "replicates: how many more own-sample human labels the joint estimator would need",
        "systems": systems,
    }
