"""The simple estimator: each system's own sample for precision, exhaustive units for recall.

π̂_i^simple = (1/n_i) Σ_{x∈X̂_i} t_i(x) f(x)/s_i(x) (Chaganty et al. 2017, "simple precision",
unbiased); recall from the exhaustive units alone, Σ_u c_ui / Σ_u b_u (consistent).
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
from receval.estimators.joint import JointEstimator
from receval.estimators.precision import simple_precision_terms


class SimpleEstimator(Estimator):
    """Per-system samples for precision, exhaustive units alone for recall."""

    name: ClassVar[str] = "simple"
    kind: ClassVar[str] = "unbiased"
    equation: ClassVar[str] = (
        "Chaganty et al. 2017: simple precision (1/n_i) Σ t_i f/s_i over the system's own draws; "
        "recall Σ_u c_ui / Σ_u b_u over the exhaustive units"
    )
    summary: ClassVar[str] = (
        "each system's own sample for precision, the exhaustive units alone for recall"
    )

    def draw_layout(self, m: int) -> TermLayout:
        """The joint blocks (for ν̂, the pool's correct facts and diagnostics) plus ``simple``."""
        return TermLayout.of(
            ("joint", m), ("pooled_num", m), ("pooled_den", 1), ("simple", m), ("mass", m)
        )

    def layouts(self, ctx: ScoringContext) -> dict[str, TermLayout]:
        return {"draws": self.draw_layout(ctx.data.m), "units": unit_layout(ctx.data.m)}

    def terms(self, ctx: ScoringContext) -> dict[str, np.ndarray]:
        joint, num, den, mass = JointEstimator().draw_blocks(ctx)
        return stage_terms(ctx, [joint, num, den, simple_precision_terms(ctx.data), mass])

    def statistic(self, ctx: ScoringContext, ratio: np.ndarray | None = None) -> Statistic:
        m = ctx.data.m
        layout = self.draw_layout(m)
        units = unit_layout(m)
        den = units["theta_den"]

        def combine(d, u, theta, pooled, ratio_form):
            return d[..., layout["simple"]], u[..., units["simple_recall"]] / u[..., den]

        return sampled_statistic(ctx.data, layout, combine, np.zeros(m, bool))

    def effective_sizes(self, ctx: ScoringContext, terms: dict[str, np.ndarray]) -> Any:
        from receval.estimators.reliability import effective_sizes

        mass = terms["draws"][:, self.draw_layout(ctx.data.m)["mass"]]
        return effective_sizes(ctx.data, mass, own_only=True)

    def system_notes(self, ctx: ScoringContext, notes: list[list[str]]) -> None:
        data = ctx.data
        own = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=data.m) > 0
        for i in np.flatnonzero(~own & ~data.census & (data.sizes > 0)):
            notes[i].append("precision: no judged sample draws of this system")

    def class_caveat(self) -> str:
        return (
            "; the simple estimator divides by |X_i| and under-states precision by the "
            "share of unresolved aliases (the joint estimator does not)"
        )
