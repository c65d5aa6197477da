"""The joint estimator (default): every system's precision and pooled recall from all samples.

Joint precision π̂_i = Σ_j (w_ij/n_j) Σ_{x∈X̂_j} t_i(x) f(x)/q_i(x), q_i = Σ_j w_ij s_j
(Chaganty et al. 2017, §3, unbiased by appendix Theorem 1), or its self-normalised form
(``--precision-form``); pool coverage θ̂ from the exhaustive units; pooled recall ν̂_i by
self-normalised importance weighting over judged-correct draws; true recall θ̂·ν̂_i.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from receval.estimators.base import (
    Estimator,
    ScoringContext,
    Statistic,
    TermLayout,
    sampled_statistic,
    stage_terms,
    unit_layout,
)
from receval.estimators.precision import joint_precision_terms, precision_support
from receval.estimators.recall import pooled_recall_terms


class JointEstimator(Estimator):
    """Importance-reweighted precision and pooled recall over every system's sample."""

    name: ClassVar[str] = "joint"
    kind: ClassVar[str] = "unbiased"
    equation: ClassVar[str] = (
        "Chaganty et al. 2017, §3: joint precision Σ_j (w_ij/n_j) Σ t_i f/q_i (Theorem 1); "
        "pooled recall ν̂_i = Σ g_i f/q / Σ f/q; true recall θ̂·ν̂_i"
    )
    summary: ClassVar[str] = (
        "importance-reweighted precision and pooled recall over every system's sample, true "
        "recall = pool coverage × pooled recall"
    )
    precision_forms: ClassVar[bool] = True
    mixture_weights: ClassVar[bool] = True

    def draw_layout(self, m: int) -> TermLayout:
        """[joint precision (m) | ν̂ numerators (m) | ν̂ denominator (1) | mass Σ t/q (m)]."""
        return TermLayout.of(("joint", m), ("pooled_num", m), ("pooled_den", 1), ("mass", m))

    def layouts(self, ctx: ScoringContext) -> dict[str, TermLayout]:
        return {"draws": self.draw_layout(ctx.data.m), "units": unit_layout(ctx.data.m)}

    def draw_blocks(self, ctx: ScoringContext) -> list[np.ndarray]:
        data, weighting = ctx.data, ctx.options.weighting
        num, den = pooled_recall_terms(data)
        return [
            joint_precision_terms(data, weighting),
            num,
            den[:, None],
            joint_precision_terms(data, weighting, label=False),  # self-normalising mass
        ]

    def terms(self, ctx: ScoringContext) -> dict[str, np.ndarray]:
        return stage_terms(ctx, self.draw_blocks(ctx))

    def statistic(self, ctx: ScoringContext, ratio: np.ndarray | None = None) -> Statistic:
        """``ratio`` (m,) bool: these systems' precision in the self-normalised form."""
        m = ctx.data.m
        use_ratio = np.zeros(m, bool) if ratio is None else np.asarray(ratio, bool)
        layout = self.draw_layout(m)

        def combine(d, u, theta, pooled, ratio_form):
            precision = np.where(use_ratio, ratio_form, d[..., layout["joint"]])
            return precision, theta[..., None] * pooled

        return sampled_statistic(ctx.data, layout, combine, use_ratio)

    def effective_sizes(self, ctx: ScoringContext, terms: dict[str, np.ndarray]) -> Any:
        from receval.estimators.reliability import effective_sizes

        mass = terms["draws"][:, self.draw_layout(ctx.data.m)["mass"]]
        return effective_sizes(ctx.data, mass, own_only=False)

    def system_notes(self, ctx: ScoringContext, notes: list[list[str]]) -> None:
        unsupported_precision_notes(ctx, notes, "joint estimator needs its own sample")

    def run_warnings(self, ctx: ScoringContext, warnings: list[str]) -> None:
        data = ctx.data
        own = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=data.m) > 0
        unsampled = ~own & (data.sizes > 0)
        if unsampled.any():
            names = ", ".join(np.array(data.systems)[unsampled][:5])
            warnings.append(
                f"{int(unsampled.sum())} system(s) have no sample ({names}...): facts only they found are outside the "
                "recall proposal's support, so pooled recall is relative to the sampled systems' pool"
            )

    def class_caveat(self) -> str:
        return "; joint precision is self-normalised for every system (its |X_i| is estimated)"


def unsupported_precision_notes(ctx: ScoringContext, notes: list[list[str]], why: str) -> None:
    """Note the systems whose precision no judged draw supports (the mixture's samplers with
    weight do not cover their outputs: :func:`~receval.estimators.precision.precision_support`)."""
    data = ctx.data
    covered = precision_support(data, ctx.options.weighting)
    for i in np.flatnonzero(~covered & ~data.census & (data.sizes > 0)):
        notes[i].append(f"precision: no judged sample draws of this system ({why})")
