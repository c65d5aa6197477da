"""Prediction-powered precision and recall: human draws correct an automatic judge.

Every output x carries a judge score s(x) ∈ [0, 1] (``judge.tsv``, :mod:`receval.judge`), so
judge totals over any known set of outputs are *exact*: A_i = Σ_x t_i(x) s(x) for system i's
precision, B_i = Σ_{x ∈ X_i} s(x) and B = Σ_{x ∈ pool} s(x) for pooled recall, and the output
masses Σ_x t_i(x) = 1, |X_i|, |pool|.  The human draws (the joint estimator's importance
weights, shared by every system) estimate what the judge gets wrong.  For one quantity with
per-draw human terms Y_k (e.g. t_i f/q_i), judge terms S_k (t_i s/q_i) and mass terms M_k
(t_i/q_i), whose sums estimate Y = Σ h f, S = Σ h s and M = Σ h without bias, the estimate is
the regression (control-variate) estimator

    Ŷ = Σ_k Y_k − λ (Σ_k S̃_k − 0) − μ (Σ_k M_k − M),   S̃_k = S_k − a M_k,  a = S / M,

(Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, *Prediction-powered inference*, Science 2023,
eq. 1 with the PPI++ power-tuning coefficient of Angelopoulos, Duchi & Zrnic 2024, §2; the known
mass as a second control variate is the regression estimator of survey sampling, Särndal,
Swensson & Wretman 1992, §6.4).  For any *fixed* (λ, μ) it is unbiased.  The coefficients are
chosen from the data, but **cross-fitted**: the draws of every sampler are split in arrival
order into two folds, the coefficients of one fold's correction come from the other fold's
draws only, and draws of different folds are independent, so

    Ŷ = Σ_k Y_k − Σ_{a ∈ {0,1}} [λ_{1−a} C^S_a + μ_{1−a} (C^M_a − M/2)],

with C_a the fold's terms rescaled by n_j / (2 n_ja) (each has expectation half the whole), is
exactly unbiased for precision whatever the judge (useless, inverted, missing, biased for some
systems).  Pooled recall is the ratio of two such estimates (consistent, as the joint estimator's
ν̂ is).  In each fold, λ is the weighted least-squares slope of f on s (weights M_k²) given the
mass, clipped to [0, 1] and shrunk toward 0 by the positive-part factor max(0, 1 − 1/t²) of its
t statistic (a judge that explains little of the labels in a small fold is not used); μ is then
the fold's weighted mean of f − λ(s − a), clipped to [0, 1].  With λ = μ = 0 the estimator is the
joint estimator, and with the judge a constant it still uses the known mass (the control variate
the joint estimator's unbiased sum leaves unused).

The coefficients are computed inside the statistic from fold moment totals, so every bootstrap
replicate re-estimates them and the intervals account for their estimation.  Draws of samplers
with a single judged draw enter both folds' corrections with half weight and neither fold's
moments (still unbiased).
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
    bootstrap_stages,
    unit_layout,
    unit_terms,
)
from receval.estimators.bootstrap import Stage
from receval.estimators.precision import joint_precision_terms, precision_support
from receval.estimators.recall import f1_score, pooled_recall_terms
from receval.estimators.sample_data import SampleData

#: the per-fold moment blocks of one quantity (uncentred sums over the fold's draws)
MOMENTS = ("MM", "MY", "MS", "SS", "SY", "YY", "M")
#: the per-fold correction blocks (terms rescaled by n_j / (2 n_ja))
CORRECTIONS = ("CS", "CM")


@dataclass(frozen=True)
class JudgeTotals:
    """The judge's exact totals over known output sets, and its score at the drawn facts.

    Quantities are laid out as columns ``[precision (m) | pooled numerator (m) | pool (1)]``:
    ``known_score`` holds A_i = Σ t_i s, B_i = Σ_{X_i ∩ P} s, B = Σ_P s and ``known_mass`` 1,
    |X_i ∩ P|, |P|, where P is the support of the pooled-recall proposal (the outputs of the
    sampled systems).
    """

    score_drawn: np.ndarray  # (D,)
    known_score: np.ndarray  # (2m + 1,)
    known_mass: np.ndarray  # (2m + 1,)
    scored_share: np.ndarray  # (m,) share of each system's outputs the judge scored
    judge_precision: np.ndarray  # (m,) A_i: the judge's own precision estimate


def judge_totals(task, data: SampleData, target: str = "micro") -> JudgeTotals:
    """The judge's totals for ``data`` (built from ``task`` by :func:`build_sample_data`).

    Facts of one equivalence class count once, as in :class:`SampleData` (each class takes
    the score of its canonical fact); unscored facts take the imputed score of
    :func:`receval.judge.fact_scores`.
    """
    from receval.estimators.sample_data import _design_probabilities, _targets
    from receval.judge import fact_scores
    from receval.task import codes_in

    scores, scored = fact_scores(task)
    view = _design_probabilities(task, True)[0]
    out = view.outputs
    m = data.m
    sys_codes = codes_in(out["system"], pd.Index(data.systems)).astype(np.int64)
    fact = out["fact"].to_numpy(np.int64)
    s = scores[fact]
    t = _targets(view, target).to_numpy(float)
    precision_total = np.bincount(sys_codes, weights=t * s, minlength=m)
    sampled = np.unique(data.sampler_system[data.sampler_n > 0])
    in_support = np.zeros(len(scores), bool)
    in_support[fact[np.isin(sys_codes, sampled)]] = True
    inside = in_support[fact].astype(float)
    pooled_score = np.bincount(sys_codes, weights=s * inside, minlength=m)
    pooled_mass = np.bincount(sys_codes, weights=inside, minlength=m)
    size = np.bincount(sys_codes, minlength=m).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.bincount(sys_codes, weights=scored[fact], minlength=m) / size
    return JudgeTotals(
        score_drawn=scores[data.facts],
        known_score=np.concatenate([precision_total, pooled_score, [scores[in_support].sum()]]),
        known_mass=np.concatenate([np.ones(m), pooled_mass, [float(in_support.sum())]]),
        scored_share=share,
        judge_precision=precision_total,
    )


def draw_folds(data: SampleData) -> np.ndarray:
    """The cross-fitting fold of every draw (K,): 0, 1 alternating in arrival order within each
    sampler, or −1 (both folds, half weight) for a sampler's only draw."""
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
    folds[data.sampler_n[data.draw_sampler] < 2] = -1
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


def fold_coefficients(
    moments: dict[str, np.ndarray], a: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(λ, μ) of one fold from its moment totals (each (..., c)); ``a`` = S/M per quantity.

    λ: the partial least-squares slope of Y on S given M (weights implicit in the terms),
    clipped to [0, 1] and multiplied by max(0, 1 − 1/t²), t² = ν R²/(1 − R²) with R² the
    share of Y's residual (given M) that S explains and ν = (ΣM)²/ΣM² − 2 the fold's effective
    number of draws.  μ = (ΣMY − λ Σ M S̃)/ΣM², clipped to [0, 1].
    """
    MM, MY, MS, SS, SY, YY, M1 = (moments[k] for k in MOMENTS)
    with np.errstate(invalid="ignore", divide="ignore"):
        sxx = SS - MS**2 / MM
        sxy = SY - MS * MY / MM
        syy = YY - MY**2 / MM
        slope = np.where(sxx > 1e-15 * np.maximum(SS, 1e-300), sxy / sxx, 0.0)
        r2 = np.clip(np.where(syy > 0, slope * sxy / syy, 0.0), 0.0, 1.0)
        n_eff = M1**2 / MM - 2.0
        t2 = np.where(r2 < 1.0, n_eff * r2 / (1.0 - r2), np.inf)
        shrink = np.where(n_eff > 0, np.clip(1.0 - 1.0 / t2, 0.0, 1.0), 0.0)
        lam = np.clip(slope, 0.0, 1.0) * np.where(np.isfinite(shrink), shrink, 0.0)
        lam = np.where(np.isfinite(lam) & (MM > 0), lam, 0.0)
        mu = np.clip((MY - lam * (MS - a * MM)) / MM, 0.0, 1.0)
        mu = np.where(MM > 0, mu, 0.0)
    return lam, mu


class PPIEstimator(Estimator):
    """Prediction-powered precision and recall (human draws correcting a judge on every output)."""

    name: ClassVar[str] = "ppi"
    kind: ClassVar[str] = "unbiased"
    equation: ClassVar[str] = (
        "Angelopoulos et al. 2023 (PPI) eq. 1 with PPI++ power tuning (2024): "
        "π̂_i = Σ t_i f/q_i − λ_i(Σ t_i s/q_i − Σ_x t_i s) − μ_i(Σ t_i/q_i − 1) over the joint "
        "estimator's draws (Chaganty et al. 2017), λ_i, μ_i cross-fitted over two folds "
        "(unbiased); pooled recall the ratio of two such estimates; true recall θ̂·ν̂_i"
    )
    summary: ClassVar[str] = (
        "prediction-powered: the judge's exact totals over every output, corrected by the "
        "importance-weighted human draws (PPI++ with a cross-fitted λ per system)"
    )
    interval_note: ClassVar[str] = ", prediction-powered (PPI++, cross-fitted λ per system)"

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
        base = TermLayout.of(*parts)
        blocks = dict(base.blocks)
        blocks["joint"] = slice(0, m)
        blocks["pooled_num"] = slice(m, 2 * m)
        blocks["pooled_den"] = slice(2 * m, 2 * m + 1)
        return TermLayout(blocks, base.width)

    def layouts(self, ctx: ScoringContext) -> dict[str, TermLayout]:
        return {"draws": self.draw_layout(ctx.data.m), "units": unit_layout(ctx.data.m)}

    def stages(self, ctx: ScoringContext) -> list[Stage]:
        """The joint estimator's stages, with each sampler's draws stratified by fold too (the
        bootstrap keeps the folds' sizes, as the cross-fitted correction assumes)."""
        stages = bootstrap_stages(ctx.data, False)
        folds = draw_folds(ctx.data)
        strata = ctx.data.draw_sampler * 3 + (folds + 1)
        return [Stage("draws", strata), *stages[1:]]

    def judge(self, ctx: ScoringContext) -> JudgeTotals:
        """The judge totals of this context (computed once per context)."""
        cache = ctx.__dict__.setdefault("_ppi_cache", {})
        if "judge" not in cache:
            cache["judge"] = judge_totals(ctx.task, ctx.data, ctx.options.target)
        return cache["judge"]

    def terms(self, ctx: ScoringContext) -> dict[str, np.ndarray]:
        data = ctx.data
        judge = self.judge(ctx)
        layout = self.draw_layout(data.m)
        Y, S, M = _quantity_terms(data, judge, ctx.options.weighting)
        folds = draw_folds(data)
        n_fold = np.zeros((data.J, 2))
        for a in (0, 1):
            n_fold[:, a] = np.bincount(data.draw_sampler[folds == a], minlength=data.J)
        draws = np.zeros((data.K, layout.width))
        draws[:, layout["Y"]] = Y
        draws[:, layout["mass"]] = M[:, : data.m]
        n = data.sampler_n[data.draw_sampler]
        for a in (0, 1):
            own = (folds == a)[:, None]
            with np.errstate(invalid="ignore", divide="ignore"):
                scale = np.where(
                    folds == a, n / (2 * n_fold[data.draw_sampler, a]), np.where(folds < 0, 0.5, 0)
                )[:, None]
            products = {
                "MM": M * M,
                "MY": M * Y,
                "MS": M * S,
                "SS": S * S,
                "SY": S * Y,
                "YY": Y * Y,
                "M": M,
            }
            for key, value in products.items():
                draws[:, layout[f"{key}{a}"]] = np.where(own, value, 0.0)
            draws[:, layout[f"CS{a}"]] = S * scale
            draws[:, layout[f"CM{a}"]] = M * scale
        return {"draws": draws, "units": unit_terms(data)}

    # -- statistic ----------------------------------------------------------------------

    def statistic(self, ctx: ScoringContext, ratio: np.ndarray | None = None) -> Statistic:
        data = ctx.data
        m = data.m
        judge = self.judge(ctx)
        layout = self.draw_layout(m)
        units = unit_layout(m)
        num, den = units["theta_num"].start, units["theta_den"].start
        known_s, known_m = judge.known_score, judge.known_mass
        with np.errstate(invalid="ignore", divide="ignore"):
            a = np.where(known_m > 0, known_s / known_m, 0.0)
        census, exact = data.census, data.census_precision

        def corrected(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            total = d[..., layout["Y"]].copy()
            lams = []
            for fold in (0, 1):
                other = {k: d[..., layout[f"{k}{1 - fold}"]] for k in MOMENTS}
                lam, mu = fold_coefficients(other, a)
                cs, cm = d[..., layout[f"CS{fold}"]], d[..., layout[f"CM{fold}"]]
                total = total - lam * (cs - a * cm) - mu * (cm - known_m / 2)
                lams.append(lam)
            return total, (lams[0] + lams[1]) / 2

        def stat(totals: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            d, u = totals["draws"], totals["units"]
            with np.errstate(invalid="ignore", divide="ignore"):
                theta = u[..., num] / u[..., den]
                q, lam = corrected(d)
                precision = np.where(census, exact, q[..., :m])
                pooled = q[..., m : 2 * m] / q[..., 2 * m : 2 * m + 1]
                recall = theta[..., None] * pooled
                joint = d[..., layout["joint"]]
                ratio_form = joint / d[..., layout["mass"]]
            return {
                "precision": precision,
                "pooled_recall": pooled,
                "recall": recall,
                "f1": f1_score(precision, recall),
                "pool_coverage": np.asarray(theta)[..., None],
                "pool_correct": np.asarray(q[..., 2 * m : 2 * m + 1]),
                "precision_unbiased": joint,
                "precision_ratio": ratio_form,
                "judge_lambda": lam[..., :m],
                "judge_lambda_recall": lam[..., m : 2 * m],
            }

        return stat

    # -- reliability, notes -------------------------------------------------------------

    def effective_sizes(self, ctx: ScoringContext, terms: dict[str, np.ndarray]) -> Any:
        from receval.estimators.reliability import effective_sizes

        mass = terms["draws"][:, self.draw_layout(ctx.data.m)["mass"]]
        return effective_sizes(ctx.data, mass, own_only=False)

    def system_notes(self, ctx: ScoringContext, notes: list[list[str]]) -> None:
        data = ctx.data
        covered = precision_support(data, ctx.options.weighting)
        for i in np.flatnonzero(~covered & ~data.census & (data.sizes > 0)):
            notes[i].append(
                "precision: no judged sample draws of this system (the human correction needs its "
                "own sample)"
            )
        share = self.judge(ctx).scored_share
        for i in np.flatnonzero((share < 1) & (data.sizes > 0)):
            notes[i].append(
                f"judge: {1 - share[i]:.0%} of outputs unscored (imputed with the judge's mean; "
                "unbiased, less narrowing)"
            )

    def run_warnings(self, ctx: ScoringContext, warnings: list[str]) -> None:
        from receval.estimators.joint import JointEstimator

        JointEstimator().run_warnings(ctx, warnings)
